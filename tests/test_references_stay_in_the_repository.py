"""Every document a comment, docstring, script or doc cites is in this repository.

A clone of the repository must carry its own plans: a reference to a document it does not
contain (a design file kept elsewhere, a provider reference copied into someone's workspace)
sends a reader nowhere. Scanned: every file git lists (tracked, or new and not ignored) of a
text kind (``TEXT_SUFFIXES``, ``Dockerfile``, and extensionless scripts with a ``#!`` line).
Found there, each is a problem:

1. a markdown or text document named by file name or relative path (``x.md``,
   ``docs/x.md``, ``./y.txt``) that the repository does not contain: a bare name must be the
   name of some file of the repository, a path must exist relative to the citing file's folder
   or to the repository's root;
2. a section number after a document of the repository (``docs/tools.md section 7.2``,
   ``protocol.md 10.15``) that is not a numbered heading of it;
3. a markdown link ``[text](path#anchor)`` whose file is missing (resolved from the citing
   file's folder, as a renderer does) or whose anchor is no heading of that file;
4. a path leaving the repository: ``../`` climbing above its root, a home or workspace folder
   (``/home/``, ``/Users/``, ``/root/``, ``/work/``, ``~/``), the folders the original
   contracts lived in (``shared/design/``, ``shared/reference/``), an absolute ``.md`` path;
5. a section of an unnamed "reference" (``(reference 6.1)``, ``section 7 of the reference``):
   a document that is not here either. Provider facts cite the provider's public pages by URL.

URLs are not paths (``https://…/x.md`` is a public page, not a file). The few allowances are
listed below, each with the reason it exists.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# This file is left out of the scan: its examples of bad references are bad on purpose.
THIS_FILE = Path(__file__).resolve().relative_to(REPO).as_posix()

TEXT_SUFFIXES = frozenset(
    {".py", ".md", ".js", ".mjs", ".html", ".css", ".toml", ".sh", ".txt", ".go", ".cfg"}
)
# Folders the walk skips when git is not available (they are gitignored or git's own).
NOT_THE_REPOSITORY = frozenset(
    {".git", ".venv", "build", "data", "__pycache__", ".mypy_cache", ".ruff_cache",
     ".pytest_cache", ".hypothesis", "node_modules"}
)  # fmt: skip

# -- allowances, each with its reason ----------------------------------------------------------

# Commands write their output under build/ (gitignored): the docs name those files so that a
# reader finds what a run produced (build/soak/report.md, build/tool_registry.json).
GENERATED_PREFIX = "build/"
# Output files the code writes into a folder the caller chooses (``--out``), named bare.
GENERATED_NAMES: Mapping[str, str] = {
    "report.md": "the soak's report, written into its --out folder (build/soak/ by default)",
    "latency.md": "scripts/bench latency's table, written into its --out folder",
    "failover.md": "scripts/bench failover's tables, written into its --out folder",
    "webrtc-memory.md": "scripts/bench webrtc --memory's table, written into its --out folder",
}
# Absolute paths that are not anyone's workspace.
OUTSIDE_PATHS_ALLOWED: Mapping[str, str] = {
    "/home/gateway/": "the container image's own user (the Dockerfile's useradd): its data dir",
    "~/.local/share/realtime-gateway": "GATEWAY_DATA_DIR's default, made at run time",
}
# Strings shaped like a climbing path that name no file: (citing file, string).
NOT_PATHS: Mapping[tuple[str, str], str] = {
    ("docs/tools.md", "../../admin"): "a hostile argument an HTTP tool percent-encodes",
}

# -- what a reference looks like -----------------------------------------------------------------

URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s)\]>\"'`]*|mailto:[^\s)\]>\"'`]*")
# Not inside a longer token, and not after a placeholder (``<out>/x.md``, ``{id}.md``, ``*.md``).
_START = r"(?<![\w.\-/<>{}*$%@~\\])"
DOCUMENT = re.compile(
    _START + r"(?P<path>(?:~?/)?(?:\.\.?/)*(?:[\w-][\w.-]*/)*[\w-][\w.-]*\.(?:md|txt|rst))(?![\w-])"
)
_NUMBER = r"\d+(?:\.\d+)*[a-z]?"
# The numbers right after a document's name, on its line; on the next only after "section".
SECTIONS_AFTER = re.compile(
    r"[`)\]]*(?:[ \t]*(?:sections?[ \t]+|§[ \t]*)?|\s*(?:sections?\s+|§\s*))(?P<numbers>"
    + _NUMBER
    + r"(?:(?:\s*,\s*|\s+and\s+|\s+to\s+|\s*[-–]\s*)"
    + _NUMBER
    + r")*)(?![\w.]*\w)"
)
LINK = re.compile(r"(?<!\\)!?\[[^\]\n]*\]\(\s*<?(?P<target>[^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
CLIMBING = re.compile(r"(?<![\w.\-/%])(?P<path>(?:\.\./)+[^\s`'\"()\[\]<>{},;|]*)")
OUTSIDE = re.compile(
    r"(?<![\w.\-/~])(?P<path>(?:/(?:home|Users|root|work)/|~/)[^\s`'\"()\[\]<>{},;|]*)"
)
ORIGINAL_CONTRACTS = re.compile(r"(?<![\w.-])(?:\.\./)*shared/(?:design|reference)\b[^\s`'\")]*")
UNNAMED_REFERENCE = re.compile(
    r"\breference,?\s+(?:sections?\s+)?\d+(?:\.\d+)*"
    r"|\bsections?\s+\d+(?:\.\d+)*(?:\s*(?:,|and)\s*\d+(?:\.\d+)*)*\s+of\s+the\s+reference\b",
    re.IGNORECASE,
)
HEADING = re.compile(r"^#{1,6}[ \t]+(?P<title>.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
NUMBERED = re.compile(r"(?P<number>" + _NUMBER + r")\.?(?:\s|$)")
NUMBER_IN_LIST = re.compile(_NUMBER)


@dataclass(frozen=True)
class Problem:
    path: str
    line: int
    reference: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reference!r}: {self.why}"


@dataclass(frozen=True)
class Repository:
    """What the repository contains: its files (posix paths from its root) and their texts."""

    texts: Mapping[str, str]  # every file; a binary one maps to ""

    @cached_property
    def files(self) -> frozenset[str]:
        return frozenset(self.texts)

    @cached_property
    def folders(self) -> frozenset[str]:
        parents = (path.split("/")[:-1] for path in self.files)
        return frozenset("/".join(parts[:n]) for parts in parents for n in range(1, len(parts) + 1))

    @cached_property
    def names(self) -> frozenset[str]:
        return frozenset(posixpath.basename(path) for path in self.files)

    def holds(self, path: str) -> bool:
        return path in self.files or path in self.folders

    def section_numbers(self, path: str) -> frozenset[str]:
        titles = (m["title"] for m in HEADING.finditer(self.texts.get(path, "")))
        return frozenset(m["number"] for t in titles if (m := NUMBERED.match(t)))

    def anchors(self, path: str) -> frozenset[str]:
        return frozenset(slug(m["title"]) for m in HEADING.finditer(self.texts.get(path, "")))


def slug(title: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces → ``-``."""
    plain = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", title).strip().lower()
    return re.sub(r"[^\w\- ]", "", plain).replace(" ", "-")


def climbs_out(path: str) -> bool:
    return path == ".." or path.startswith("../")


def resolve(citing: str, target: str) -> str:
    return posixpath.normpath(posixpath.join(posixpath.dirname(citing), target))


def _document_problem(citing: str, path: str, repo: Repository) -> tuple[str | None, str | None]:
    """(why it is a problem, or None; the document it names when that is one file here)."""
    if path.startswith(("/", "~")):
        return "an absolute path: a file outside the repository", None
    if "/" not in path:
        if path in repo.names or path in GENERATED_NAMES:
            owners = [f for f in repo.files if posixpath.basename(f) == path]
            return None, owners[0] if len(owners) == 1 else None
        return "no file of the repository has this name", None
    from_folder, from_root = resolve(citing, path), posixpath.normpath(path)
    if from_folder.startswith(GENERATED_PREFIX) or from_root.startswith(GENERATED_PREFIX):
        return None, None
    for candidate in (from_folder, from_root):
        if not climbs_out(candidate) and candidate in repo.files:
            return None, candidate
    if climbs_out(from_folder):
        return "climbs out of the repository", None
    return "the repository does not contain this document", None


def _section_problems(after: str, document: str, repo: Repository) -> Iterable[str]:
    match = SECTIONS_AFTER.match(after)
    if match is None or not document.endswith(".md"):
        return
    known = repo.section_numbers(document)
    for number in NUMBER_IN_LIST.findall(match["numbers"]):
        if number not in known:
            yield f"{document} has no section {number}"


def _link_problem(citing: str, target: str, repo: Repository) -> str | None:
    path, _, anchor = target.partition("#")
    if not path:
        document = citing
    else:
        document = resolve(citing, path)
        if climbs_out(document):
            return "the link climbs out of the repository"
        if document.startswith(GENERATED_PREFIX):
            return None
        if not repo.holds(document):
            return f"the link's file {document} is not in the repository"
    if anchor and document.endswith(".md") and anchor not in repo.anchors(document):
        return f"{document} has no heading with the anchor #{anchor}"
    return None


def problems_in(citing: str, text: str, repo: Repository) -> list[Problem]:
    """Every reference of ``text`` (the file ``citing``) to something the repository lacks."""
    text = URL.sub(lambda m: " " * len(m.group()), text)
    found: dict[tuple[int, str, str], Problem] = {}

    def report(offset: int, reference: str, why: str) -> None:
        line = text.count("\n", 0, offset) + 1
        found.setdefault((line, reference, why), Problem(citing, line, reference, why))

    for match in DOCUMENT.finditer(text):
        why, document = _document_problem(citing, match["path"], repo)
        if why is not None:
            report(match.start(), match["path"], why)
        elif document is not None:
            for problem in _section_problems(text[match.end() :], document, repo):
                report(match.start(), match["path"], problem)
    if citing.endswith(".md"):
        for match in LINK.finditer(text):
            if match["target"] and (why := _link_problem(citing, match["target"], repo)):
                report(match.start(), match["target"], why)
    for match in CLIMBING.finditer(text):
        path = match["path"]
        if climbs_out(resolve(citing, path)) and (citing, path) not in NOT_PATHS:
            report(match.start(), path, "climbs out of the repository")
    for match in OUTSIDE.finditer(text):
        if not match["path"].startswith(tuple(OUTSIDE_PATHS_ALLOWED)):
            report(
                match.start(), match["path"], "a home or workspace folder outside the repository"
            )
    for match in ORIGINAL_CONTRACTS.finditer(text):
        report(
            match.start(), match.group(), "the original contracts' folder, outside the repository"
        )
    for match in UNNAMED_REFERENCE.finditer(text):
        report(match.start(), match.group(), "a section of a reference the repository lacks")
    return sorted(found.values(), key=lambda p: (p.line, p.reference, p.why))


# -- the repository itself -----------------------------------------------------------------------


def listed_files(root: Path) -> list[str]:
    """Tracked files and new ones git does not ignore; without git, a walk of the tree."""
    try:
        listing = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout.decode()
        paths = [p for p in listing.split("\0") if p]
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        paths = []
        for folder, subfolders, names in os.walk(root):
            subfolders[:] = [
                s for s in subfolders if s not in NOT_THE_REPOSITORY and not s.endswith(".egg-info")
            ]
            paths += [(Path(folder) / n).relative_to(root).as_posix() for n in names]
    return sorted(p for p in paths if (root / p).is_file())  # a deleted, still-tracked file: gone


def is_text_kind(root: Path, path: str) -> bool:
    name = posixpath.basename(path)
    if posixpath.splitext(name)[1] in TEXT_SUFFIXES or name == "Dockerfile":
        return True
    if "." in name:
        return False
    with (root / path).open("rb") as file:
        return file.read(2) == b"#!"


def read_repository(root: Path) -> tuple[Repository, list[str]]:
    """The repository's contents, and the files to scan."""
    files = listed_files(root)
    scanned = [p for p in files if is_text_kind(root, p) and p != THIS_FILE]
    texts = dict.fromkeys(files, "")
    for path in scanned:
        texts[path] = (root / path).read_text(encoding="utf-8", errors="replace")
    return Repository(texts), scanned


def test_no_reference_leaves_the_repository() -> None:
    repo, scanned = read_repository(REPO)
    assert len(scanned) > 500, "the scan found too few files: is the listing broken?"
    assert {"README.md", "docs/protocol.md", "gateway/app.py"} <= set(scanned)
    problems = [p for path in scanned for p in problems_in(path, repo.texts[path], repo)]
    assert not problems, f"{len(problems)} references to what the repository lacks:\n" + "\n".join(
        map(str, problems)
    )


# -- the checker on synthetic text: it must match what it is meant to ---------------------------

SAMPLE = Repository(
    {
        "README.md": "# Gateway\n## The tour\n",
        "SECURITY.md": "# Security\n",
        "docs/protocol.md": "# Protocol\n## 6. Gateway → client events\n### 10.2a The socket\n",
        "docs/tools.md": "# Tools\n## 7. Execution rules\n### 7.2 Budgets\n",
        "docs/img/a.png": "",
        "tools/echo/doc.md": "# Echo\n",
        "transports/local/README.md": "# Local\n",
        "gateway/app.py": "",
    }
)


def reasons(citing: str, text: str) -> list[str]:
    return [f"{p.reference}: {p.why}" for p in problems_in(citing, text, SAMPLE)]


NO_SUCH_NAME = "no file of the repository has this name"
UNNAMED = "a section of a reference the repository lacks"


@pytest.mark.parametrize(
    ("citing", "text", "why"),
    [
        ("gateway/x.py", '"""Budgets (TOOLS.md section 4)."""', NO_SUCH_NAME),
        ("gateway/x.py", "# the layering of ARCHITECTURE.md", NO_SUCH_NAME),
        ("tests/t.py", "# (reference:gemini_live.md)", NO_SUCH_NAME),
        ("gateway/x.py", "# from ``shared/reference/openai_realtime.md``", "original contracts"),
        ("README.md", "See ../shared/design/PROTOCOL.md for the contract.", "climbs out"),
        ("README.md", "[the design](../shared/design/)", "the link climbs out"),
        ("tests/t.py", "# (reference/openai_realtime.md response.done)", "does not contain"),
        ("tests/t.py", "# GA order (reference 6.1)", UNNAMED),
        ("tests/t.py", "# Reference section 5: unordered", UNNAMED),
        ("fakes/f.py", "# what session.created carries (section 9.4 of the reference)", UNNAMED),
        ("fakes/f.py", "# as the reference, section 7, says", UNNAMED),
        ("docs/tools.md", "see [protocol](protocol.md#7-tools)", "no heading with the anchor"),
        ("docs/tools.md", "see [x](missing.md)", "missing.md is not in the repository"),
        ("docs/tools.md", "![plot](img/b.png)", "docs/img/b.png is not in the repository"),
        ("docs/tools.md", "the budgets (docs/tools.md section 4)", "has no section 4"),
        ("gateway/x.py", "# docs/protocol.md 10.2b says so", "has no section 10.2b"),
        ("gateway/x.py", "# written at /work/main/notes.txt", "an absolute path"),
        ("gateway/x.py", "# see /home/alice/plan", "home or workspace folder"),
        ("gateway/x.py", "# cf. ~/notes/x", "home or workspace folder"),
        ("docs/x.md", "[security](../../SECURITY.md)", "the link climbs out"),
        ("gateway/x.py", "# run ../../scripts/check.sh first", "climbs out of the repository"),
    ],
)
def test_each_kind_of_bad_reference_is_found(citing: str, text: str, why: str) -> None:
    found = reasons(citing, text)
    assert any(why in reason for reason in found), f"{why!r} not in {found} for {text!r}"


def test_what_is_found_is_named_precisely() -> None:
    assert reasons("gateway/x.py", "# see TOOLS.md section 4 and docs/x.md") == [
        "TOOLS.md: no file of the repository has this name",
        "docs/x.md: the repository does not contain this document",
    ]
    assert reasons("docs/tools.md", "[a](protocol.md#nope) (protocol.md 6 and 11)") == [
        "protocol.md: docs/protocol.md has no section 11",
        "protocol.md#nope: docs/protocol.md has no heading with the anchor #nope",
    ]
    assert reasons("README.md", "see ../x/y.md") == ["../x/y.md: climbs out of the repository"]
    assert reasons(
        "docs/tools.md", "(docs/tools.md\n    section 9) and docs/tools.md\n9. items"
    ) == ["docs/tools.md: docs/tools.md has no section 9"]


@pytest.mark.parametrize(
    ("citing", "text"),
    [
        (
            "gateway/x.py",
            '"""Budgets (docs/tools.md section 7.2, protocol.md sections 6 and 10.2a)',
        ),
        ("docs/tools.md", "[protocol](protocol.md#6-gateway--client-events), [t](#72-budgets)"),
        ("docs/tools.md", "see protocol.md 6, 10.2a; [img](img/a.png); [readme](../README.md)"),
        ("docs/x.md", "[security](../SECURITY.md) and [local](../transports/local/README.md)"),
        (
            "gateway/x.py",
            "# each tool's doc.md and SECURITY.md; the run writes build/soak/report.md",
        ),
        (
            "soak/r.py",
            '(out / "report.md").write_text(text)  # into <out>/latency.md, {id}.md, *.md',
        ),
        ("gateway/x.py", "# https://platform.openai.com/docs/x.md and https://a.b/../../c"),
        ("tests/js/t.mjs", 'import { x } from "../../gateway/app.py";'),
        ("gateway/x.py", "# the 0 dBFS reference: full scale; for reference on node A: 2 ms"),
        ("Dockerfile", "ENV GATEWAY_DATA_DIR=/home/gateway/data"),
        ("docs/tools.md", "`../../admin` arrives as `..%2F..%2Fadmin`"),
    ],
)
def test_what_the_repository_holds_passes(citing: str, text: str) -> None:
    assert reasons(citing, text) == []


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_listing_sees_new_files_and_skips_ignored_ones(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, timeout=60)
    (tmp_path / ".gitignore").write_text("build/\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "report.md").write_text("generated\n")
    (tmp_path / "notes.md").write_text("see TOOLS.md\n")
    (tmp_path / "run").write_text("#!/bin/sh\necho see ARCHITECTURE.md\n")
    (tmp_path / "data.bin").write_bytes(b"\x00\x01")
    repo, scanned = read_repository(tmp_path)
    assert scanned == ["notes.md", "run"]
    assert repo.files == {".gitignore", "data.bin", "notes.md", "run"}
    found = [p.reference for path in scanned for p in problems_in(path, repo.texts[path], repo)]
    assert found == ["TOOLS.md", "ARCHITECTURE.md"]


def test_without_git_the_walk_skips_what_git_would_ignore(tmp_path: Path) -> None:
    for folder in ("build", ".venv", "docs"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "x.md").write_text("see STYLE.md\n")
    repo, scanned = read_repository(tmp_path)  # tmp_path is no git repository: git fails
    assert scanned == ["docs/x.md"]
    assert [p.reference for p in problems_in("docs/x.md", repo.texts["docs/x.md"], repo)] == [
        "STYLE.md"
    ]
