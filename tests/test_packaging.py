"""``pip install .`` (no extras) installs the product only: no fake server, no test, no bench.

The wheel is built from this checkout (no network: ``--no-build-isolation``, with the
setuptools of the dev environment) and read as the zip it is.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_wheel_holds_the_product_and_nothing_else(tmp_path: Path) -> None:
    build = ["wheel", "--no-deps", "--no-build-isolation", "-q", str(REPO), "-w", str(tmp_path)]
    subprocess.run(
        [sys.executable, "-m", "pip", *build],
        check=True,
        capture_output=True,
        timeout=120,
    )
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"gateway", "transports", "rfc6455", "tools", "registry_build"}
    assert not [n for n in names if "/fake" in n or "/tests/" in n or n.startswith("bench/")]
    assert "gateway/static/index.html" in names  # package data still ships
    assert "gateway/static/js/webrtc.js" in names
    assert "gateway/static/console/index.html" in names  # the operator's console
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    parsed = Parser().parsestr(zipfile.ZipFile(wheel).read(metadata).decode())
    requirements = parsed.get_all("Requires-Dist") or []
    fakes_only = [r for r in requirements if 'extra == "fakes"' in r]
    assert any(r.startswith("cryptography") for r in fakes_only)
    # The product verifies Telnyx's Ed25519 webhook signatures itself: a runtime dependency.
    runtime = [r for r in requirements if "extra ==" not in r]
    assert any(r.startswith("cryptography") for r in runtime)
    assert not any(r.startswith(("matplotlib", "pytest", "hypothesis")) for r in runtime)
