"""The layering of docs/architecture.md section 3, read from the imports (``ast``, no import runs):

- the product (``gateway``, ``transports``, ``tools``) never imports ``fakes``, ``bench``,
  ``soak``, ``registry_build`` (build time) or the tests;
- ``transports`` and ``tools`` never import ``gateway``;
- ``tools/_core`` imports nothing of the project but itself;
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
PACKAGES = ("gateway", "transports", "tools", "registry_build", "fakes", "bench", "soak")
PRODUCT = ("gateway", "transports", "tools")


@dataclass(frozen=True)
class Rule:
    """Modules under ``source`` may not import modules under any of ``forbidden``."""

    source: str
    forbidden: tuple[str, ...]
    why: str


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
)
CORE = "tools._core"


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


def forbidden_imports(graph: Mapping[str, set[str]]) -> list[str]:
    problems = []
    for module, targets in sorted(graph.items()):
        for rule in RULES:
            if not _under(module, rule.source):
                continue
            for target in sorted(targets):
                if any(_under(target, banned) for banned in rule.forbidden):
                    problems.append(f"{module} imports {target} ({rule.why})")
        if _under(module, CORE):
            for target in sorted(targets):
                if not _under(target, CORE):
                    problems.append(f"{module} imports {target} (tools/_core stands alone)")
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
