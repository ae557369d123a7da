"""The page at ``/`` and its modules are served with types a browser accepts for ES modules."""

from __future__ import annotations

from harness import Gateway
from yarl import URL


async def test_index_and_modules_are_served(gateway: Gateway) -> None:
    async with gateway.http.get(f"{gateway.url}/") as index:
        assert index.status == 200
        assert index.content_type == "text/html"
        assert "connect-src 'self'" in index.headers["Content-Security-Policy"]
        page = await index.text()
    assert '<script type="module" src="/static/js/main.js"></script>' in page
    modules = [
        "js/main.js",
        "js/connection.js",
        "js/webrtc.js",
        "js/audio.js",
        "js/ui.js",
        "js/pcm.js",
        "js/worklets/capture.js",
        "js/worklets/playback.js",
    ]
    for path in [*modules, "style.css"]:
        async with gateway.http.get(f"{gateway.url}/static/{path}") as response:
            assert response.status == 200, path
            expected = "text/css" if path.endswith(".css") else "application/javascript"
            assert response.content_type == expected, path
    # Nothing outside gateway/static, however the path is spelled.
    for escape in ("/static/%2E%2E/server.py", "/static/..%2Fserver.py"):
        url = URL(f"{gateway.url}{escape}", encoded=True)
        async with gateway.http.get(url) as outside:
            assert outside.status in (403, 404), escape
