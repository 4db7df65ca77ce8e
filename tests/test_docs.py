"""The README and the manual name only files that exist, all inside the repository.

`make docs` (mkdocs --strict) catches a broken link between pages; the files they name in
code formatting (`proxy/gateway.py`, `tests/...`) are checked here, so a file renamed or
deleted is not cited on.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = re.compile(r"`([^`\n]+)`")
# A repository path: its first part a top-level folder, e.g. `registry/windows.py`, `docs/`.
TOP_LEVEL = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith("."))
REPO_PATH = re.compile(rf"^(?:{'|'.join(map(re.escape, TOP_LEVEL))})/[\w./-]*$")
UP = re.compile(r"(?<![\w./])(?:\.\./)+[\w./-]*")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]


def cited_paths(text: str) -> list[str]:
    """Repository paths named in code formatting (placeholders such as `<agent>` skipped)."""
    words = (word.strip("(),;:") for span in CODE.findall(text) for word in span.split())
    return [word for word in words if REPO_PATH.match(word) and "..." not in word]


def test_every_path_the_docs_cite_exists() -> None:
    missing = [
        f"{page.relative_to(ROOT)}: {path}"
        for page in PAGES
        for path in cited_paths(page.read_text())
        if not (ROOT / path).exists()
    ]
    assert not missing, "\n".join(missing)


def test_no_page_points_outside_the_repository() -> None:
    outside = [
        f"{page.relative_to(ROOT)}: {path}"
        for page in PAGES
        for path in UP.findall(page.read_text())
        if not (page.parent / path).resolve().is_relative_to(ROOT)
    ]
    assert not outside, "\n".join(outside)


def test_the_path_finder_finds_paths_and_only_paths() -> None:
    text = "see `proxy/gateway.py` (`runtime/model/`), `tools/call`, `GET /v1/models`, `a.py`"
    assert cited_paths(text) == ["proxy/gateway.py", "runtime/model/"]
