"""Plain functions decide: nothing under evolution/ builds SQL or touches registry tables;
it reads through the registry's functions (window queries in `registry.windows`)."""

from __future__ import annotations

import ast
from pathlib import Path

import evolution

_SQL = ("sqlmodel", "sqlalchemy", "registry.tables")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_evolution_imports_no_sql() -> None:
    root = Path(evolution.__file__).parent
    offending = {
        str(path.relative_to(root)): sorted(
            name for name in _imports(path) if name.startswith(_SQL)
        )
        for path in root.rglob("*.py")
    }
    assert {path: names for path, names in offending.items() if names} == {}
