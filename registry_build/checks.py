"""File-level checks of one tool folder: docs and handler (read with ``ast``, never imported)."""

from __future__ import annotations

import ast

__all__ = ["REQUIRED_DOC_SECTIONS", "check_doc", "check_handler_source", "check_summary"]

REQUIRED_DOC_SECTIONS = ("Summary", "Parameters", "Returns", "Errors", "Examples")
MAX_SUMMARY_LINES = 4


def check_summary(text: str) -> list[str]:
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return ["doc_summary.md is empty"]
    if len(lines) > MAX_SUMMARY_LINES:
        return [f"doc_summary.md has {len(lines)} non-empty lines (at most {MAX_SUMMARY_LINES})"]
    return []


def check_doc(text: str) -> list[str]:
    """Every required ``## Section`` is present and has some text under it."""
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("## "):
            current = stripped[3:].strip()
            sections.setdefault(current, [])
        elif current is not None and stripped:
            sections[current].append(stripped)
    errors = []
    for name in REQUIRED_DOC_SECTIONS:
        if name not in sections:
            errors.append(f"doc.md is missing the section '## {name}'")
        elif not sections[name]:
            errors.append(f"doc.md section '## {name}' is empty")
    return errors


def check_handler_source(source: str) -> list[str]:
    """``handler.py`` must define a top-level ``async def execute(args, ctx)``."""
    try:
        tree = ast.parse(source, filename="handler.py")
    except SyntaxError as exc:
        return [f"handler.py does not parse: line {exc.lineno}: {exc.msg}"]
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "execute":
            return ["handler.py: execute must be 'async def' (it is a plain def)"]
        if isinstance(node, ast.AsyncFunctionDef) and node.name == "execute":
            params = node.args
            positional = len(params.posonlyargs) + len(params.args)
            if positional != 2 or params.vararg or params.kwonlyargs or params.kwarg:
                return [
                    "handler.py: execute must take exactly two parameters (args, ctx), "
                    f"it takes {positional} positional"
                    + (" and extra ones" if params.vararg or params.kwonlyargs else "")
                ]
            return []
    return ["handler.py defines no top-level 'async def execute(args, ctx)'"]
