"""The layering of docs/architecture.md section 3, read from the imports (``ast``, no import runs):

- the product (``gateway``, ``transports``, ``rfc6455``, ``tools``) never imports ``fakes``,
  ``bench``, ``soak``, ``registry_build`` (build time) or the tests;
- ``transports`` and ``tools`` never import ``gateway``;
- ``tools/_core`` and ``rfc6455`` import nothing of the project but themselves (``transports``
  and the gateway's client socket stand on ``rfc6455``);
- no module outside ``gateway.edges`` imports a client edge, but the composition root
  (``COMPOSITION_ROOT``) and the tooling listed in ``EDGE_WIRE_USERS``;
- a client edge (``gateway.edges.native``, ``.realtime``, each phone carrier's) never imports
  another one; what they share is beside them (``gateway.edges.socket``, ``.phone``);
- ``gateway.audio`` imports nothing of ``gateway`` outside ``gateway.audio``;
- no import circle between modules, counting every import: at the top, inside a function, or
  for type checking only (a circle drawn for the type checker is still a circle in the design).

``import a.b.c`` and ``from a.b import c`` (``c`` a module) are edges to ``a.b.c`` itself; ``from
a.b import name`` (not a module) is an edge to the package ``a.b``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("gateway", "transports", "rfc6455", "tools", "registry_build", "fakes", "bench", "soak")
PRODUCT = ("gateway", "transports", "rfc6455", "tools")
EVERYTHING = (*PACKAGES, "tests")
# Each phone carrier is an edge of its own; what they share (gateway.edges.phone) sits beside
# them, as gateway.edges.socket does for the native and realtime edges.
EDGES = (
    "gateway.edges.native",
    "gateway.edges.realtime",
    "gateway.edges.twilio",
    "gateway.edges.telnyx",
    "gateway.edges.plivo",
    "gateway.edges.vonage",
    "gateway.edges.exotel",
    "gateway.edges.webrtc",
)
# The composition root: the modules that build the app and may wire the edges in. Of these,
# only gateway.server and gateway.phone_lines import an edge (they build each edge's routes).
COMPOSITION_ROOT = (
    "gateway.server",
    "gateway.app",
    "gateway.__main__",
    "gateway.workers",
    "gateway.phone_lines",
)
# Tooling outside the product that reuses an edge's pure wire code rather than copying it.
EDGE_WIRE_USERS = {
    "fakes.openai_realtime.session": "the GA client event types the fake accepts",
    "fakes.openai_realtime.wire": "OpenAI's error texts, worded as the edge words them",
    "soak.phone": "signs its calls' webhooks as Twilio does (signature.twilio_signature)",
    "bench.setup.clients": "signs the webhook of the calls it times, as Twilio does",
    "fakes.carriers.twilio_api": "signs its simulated calls' webhooks as Twilio does",
}


@dataclass(frozen=True)
class Rule:
    """Modules under ``source`` (but not under ``exempt``) may not import modules under any of
    ``forbidden``, unless the module imported is under ``allowed``."""

    source: str
    forbidden: tuple[str, ...]
    why: str
    allowed: tuple[str, ...] = ()
    exempt: tuple[str, ...] = ()


RULES = (
    *(
        Rule(
            product,
            ("fakes", "bench", "soak", "registry_build", "tests"),
            "the product stands alone",
        )
        for product in PRODUCT
    ),
    Rule("transports", ("gateway",), "transports are below the gateway"),
    Rule("tools", ("gateway",), "tools are below the gateway"),
    Rule("tools._core", EVERYTHING, "tools/_core stands alone", allowed=("tools._core",)),
    Rule("rfc6455", EVERYTHING, "rfc6455 stands alone", allowed=("rfc6455",)),
    *(
        Rule(
            package,
            ("gateway.edges",),
            "only the composition root wires the client edges in",
            exempt=("gateway.edges", *COMPOSITION_ROOT, *EDGE_WIRE_USERS),
        )
        for package in PACKAGES
    ),
    *(
        Rule(
            edge,
            tuple(other for other in EDGES if other != edge),
            "an edge never imports another edge",
        )
        for edge in EDGES
    ),
    Rule(
        "gateway.audio",
        ("gateway",),
        "gateway/audio is a leaf of the gateway",
        allowed=("gateway.audio",),
    ),
)


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules_under(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in packages:
        base = root / package
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.py")):
            if any(part.startswith(".") for part in path.parts):
                continue
            found[module_name(root, path)] = path
    return found


def _resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def imports_of(module: str, path: Path, known: Mapping[str, Path]) -> set[str]:
    """The project modules ``module`` imports (anywhere in its body)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    edges: set[str] = set()

    def add(name: str) -> None:
        # The most specific known module: a.b.c, else a.b, else a.
        parts = name.split(".")
        while parts:
            candidate = ".".join(parts)
            if candidate in known:
                edges.add(candidate)
                return
            parts.pop()

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = (
                _resolve_relative(module, is_package, node.level, node.module)
                if node.level
                else node.module or ""
            )
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in known:
                    edges.add(full)
                else:
                    add(base)
    edges.discard(module)
    return edges


def import_graph(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, set[str]]:
    known = modules_under(root, [*packages, "tests"])
    return {
        name: imports_of(name, path, known)
        for name, path in known.items()
        if name.split(".")[0] in packages
    }


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _any_under(module: str, prefixes: Iterable[str]) -> bool:
    return any(_under(module, prefix) for prefix in prefixes)


def forbidden_imports(graph: Mapping[str, set[str]]) -> list[str]:
    problems = []
    for module, targets in sorted(graph.items()):
        for rule in RULES:
            if not _under(module, rule.source) or _any_under(module, rule.exempt):
                continue
            for target in sorted(targets):
                if _any_under(target, rule.forbidden) and not _any_under(target, rule.allowed):
                    problems.append(f"{module} imports {target} ({rule.why})")
    return problems


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph.get(start, ())))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, pending = work[-1]
            if pending:
                child = pending.pop()
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, sorted(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


# -- the project -----------------------------------------------------------------------------------


def test_the_product_keeps_its_layers() -> None:
    assert forbidden_imports(import_graph(REPO)) == []


def test_no_module_imports_itself_back() -> None:
    assert circles(import_graph(REPO)) == []


def test_the_graph_sees_the_whole_project() -> None:
    graph = import_graph(REPO)
    assert len(graph) > 150
    assert {"gateway.server", "gateway.session.manager", "gateway.providers"} <= graph[
        "gateway.app"
    ]
    assert "transports.openai_realtime.transport" in graph["transports.openai_realtime"]
    assert {f"{edge}.routes" for edge in EDGES[:2]} <= graph["gateway.server"]
    assert {"gateway.edges.phone.routes", "gateway.edges.twilio.wire"} <= graph[
        "gateway.phone_lines"
    ]
    assert "rfc6455.frames" in graph["rfc6455.client"]


def test_the_listed_exceptions_are_modules_of_the_project() -> None:
    graph = import_graph(REPO)
    assert [name for name in (*COMPOSITION_ROOT, *EDGE_WIRE_USERS) if name not in graph] == []
    assert [edge for edge in EDGES if edge not in graph] == []


# -- the test of the test: temporary projects ------------------------------------------------


def write(root: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for package in PACKAGES:
        (root / package).mkdir(exist_ok=True)
        (root / package / "__init__.py").touch()
    return root


@pytest.mark.parametrize(
    ("files", "said"),
    [
        ({"gateway/a.py": "import fakes.x\n", "fakes/x.py": ""}, "gateway.a imports fakes.x"),
        (
            {"gateway/a.py": "def f():\n    from bench import y\n", "bench/y.py": ""},
            "gateway.a imports bench.y",
        ),
        (
            {"gateway/a.py": "from registry_build.z import q\n", "registry_build/z.py": ""},
            "gateway.a imports registry_build.z",
        ),
        ({"transports/t.py": "from gateway import app\n", "gateway/app.py": ""}, "transports.t"),
        ({"tools/w/h.py": "import gateway.app\n", "gateway/app.py": ""}, "tools.w.h"),
        (
            {"tools/_core/e.py": "from transports import base\n", "transports/base.py": ""},
            "tools/_core stands alone",
        ),
        (
            {
                "transports/t.py": (
                    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                    "    from gateway.session import Session\n"
                ),
                "gateway/session.py": "",
            },
            "transports.t imports gateway.session",
        ),
        (
            {"rfc6455/client.py": "from transports.base import E\n", "transports/base.py": ""},
            "rfc6455.client imports transports.base (rfc6455 stands alone)",
        ),
        (
            {"rfc6455/frames.py": "def f():\n    import gateway.errors\n", "gateway/errors.py": ""},
            "rfc6455.frames imports gateway.errors",
        ),
        (
            {
                "gateway/session/session.py": "from gateway.edges.native.routes import as_text\n",
                "gateway/edges/native/routes.py": "",
            },
            "gateway.session.session imports gateway.edges.native.routes (only the composition",
        ),
        (
            {
                "gateway/admission.py": "from gateway.edges.twilio import codec\n",
                "gateway/edges/twilio/codec.py": "",
            },
            "gateway.admission imports gateway.edges.twilio.codec",
        ),
        (
            {"fakes/x.py": "import gateway.edges.socket\n", "gateway/edges/socket.py": ""},
            "fakes.x imports gateway.edges.socket",
        ),
        (
            {
                "gateway/edges/realtime/routes.py": "from gateway.edges.native import routes\n",
                "gateway/edges/native/routes.py": "",
            },
            "gateway.edges.realtime.routes imports gateway.edges.native.routes (an edge never",
        ),
        (
            {
                "gateway/edges/twilio/bridge.py": "from gateway.edges.realtime import Thing\n",
                "gateway/edges/realtime/__init__.py": "",
            },
            "gateway.edges.twilio.bridge imports gateway.edges.realtime (an edge never",
        ),
        (
            {
                "gateway/audio/convert.py": "from gateway.protocol import X\n",
                "gateway/protocol.py": "",
            },
            "gateway.audio.convert imports gateway.protocol (gateway/audio is a leaf",
        ),
    ],
)
def test_a_forbidden_import_is_caught(tmp_path: Path, files: dict[str, str], said: str) -> None:
    problems = forbidden_imports(import_graph(write(tmp_path, files)))
    assert any(said in problem for problem in problems), problems


def test_allowed_imports_pass(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "gateway/a.py": "from transports.base import T\nfrom tools._core import e\n",
            "transports/base.py": "",
            "tools/_core/__init__.py": "from . import e\n",
            "tools/_core/e.py": "from tools._core import f\n",
            "tools/_core/f.py": "",
            "registry_build/b.py": "from gateway.a import x\n",
            "fakes/f.py": "import transports.base\n",
            "transports/u.py": "from rfc6455.client import connect\n",
            "rfc6455/client.py": "from rfc6455.frames import FrameReader\nimport websockets\n",
            "rfc6455/frames.py": "",
            "gateway/server.py": "from gateway.edges.native.routes import NativeRoutes\n",
            "gateway/edges/socket.py": "from rfc6455 import frames\nfrom gateway import errors\n",
            "gateway/errors.py": "",
            "gateway/edges/native/routes.py": (
                "from gateway.edges.socket import S\nfrom gateway.session import x\n"
            ),
            "gateway/edges/realtime/routes.py": "import gateway.edges.socket\n",
            "gateway/edges/twilio/playback.py": "from gateway.audio.g711 import SILENCE\n",
            "gateway/audio/convert.py": "from gateway.audio import g711\n",
            "gateway/audio/g711.py": "",
            "soak/phone.py": "from gateway.edges.twilio.signature import twilio_signature\n",
        },
    )
    assert forbidden_imports(import_graph(root)) == []


def test_a_circle_is_caught_however_it_is_drawn(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "gateway/a.py": "from gateway.b import x\n",
            "gateway/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from gateway.c import y\n",
            "gateway/c.py": "def f():\n    from . import a\n",
            "gateway/d.py": "from gateway import a\n",
        },
    )
    assert circles(import_graph(root)) == [["gateway.a", "gateway.b", "gateway.c"]]


def test_relative_imports_resolve(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "gateway/p/__init__.py": "from .q import r\n",
            "gateway/p/q.py": "from ..s import t\n",
            "gateway/s.py": "",
        },
    )
    graph = import_graph(root)
    assert graph["gateway.p"] == {"gateway.p.q"}
    assert graph["gateway.p.q"] == {"gateway.s"}
