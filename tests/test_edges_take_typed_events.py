"""No client edge parses the session's output back: the session hands every edge typed events
(``ClientOutput.event(ServerEvent)``), and the only code that turns them into JSON is the native
edge's, which sends that JSON to its client. Read from the imports (``ast``, nothing runs): a
bridge that encoded the session's events to read them again would have to import the encoder.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENCODER_MODULE = "gateway.protocol.encode"
# Where the session's events may become JSON: the protocol package itself, and the edges whose
# wire is that JSON (the native socket; the WebRTC data channel).
MAY_ENCODE = ("gateway/protocol/", "gateway/edges/native/", "gateway/edges/webrtc/")


def _imports_the_encoder(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            names = {alias.name for alias in node.names}
            if node.module == ENCODER_MODULE or (
                node.module == "gateway.protocol" and "encode" in names
            ):
                lines.append(node.lineno)
        elif isinstance(node, ast.Import) and any(
            alias.name == ENCODER_MODULE for alias in node.names
        ):
            lines.append(node.lineno)
    return lines


def encoder_importers(root: Path) -> dict[str, list[int]]:
    found = {}
    for path in sorted((root / "gateway").rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        lines = _imports_the_encoder(ast.parse(path.read_text(), str(path)))
        if lines:
            found[relative] = lines
    return found


def test_only_the_native_edge_encodes_the_session_s_events() -> None:
    importers = encoder_importers(REPO)
    assert importers, "the encoder moved: update this test"
    strays = {path: lines for path, lines in importers.items() if not path.startswith(MAY_ENCODE)}
    assert strays == {}, f"these modules encode the session's events: {strays}"
    assert any(path.startswith("gateway/edges/native/") for path in importers)


def test_the_check_catches_a_bridge_that_encodes(tmp_path: Path) -> None:
    bridge = tmp_path / "gateway" / "edges" / "realtime" / "bridge.py"
    bridge.parent.mkdir(parents=True)
    bridge.write_text("from gateway.protocol import encode\n")
    assert encoder_importers(tmp_path) == {"gateway/edges/realtime/bridge.py": [1]}
    bridge.write_text("import gateway.protocol.encode\n")
    assert encoder_importers(tmp_path) == {"gateway/edges/realtime/bridge.py": [1]}
