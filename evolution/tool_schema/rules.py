"""Rules a parameter's values follow, as JSON Schema keywords, learned from the values.

A rule is a small keyword set (`enum`, `pattern`, `format`) that every value it was learned
from satisfies; the operator tries them strictest first and keeps the first that replay
proves safe.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import date

from evolution.tool_schema.config import ToolSchemaConfig

__all__ = ["infer_pattern", "infer_rules", "value_format"]

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_TOKEN = re.compile(r"[A-Z]+|[a-z]+|[0-9]+|.", re.DOTALL)
_CLASSES = {"upper": "[A-Z]", "lower": "[a-z]", "digit": r"\d"}


def infer_rules(values: Sequence[object], config: ToolSchemaConfig | None = None) -> list[dict]:
    """JSON Schema keyword sets that every value satisfies, strictest first.

    The caller tries them in order and keeps the first that replay proves safe, so a
    closed set beats a pattern, and a pattern with a format beats either alone.
    """
    config = config or ToolSchemaConfig()
    distinct = list(dict.fromkeys(json.dumps(v, sort_keys=True) for v in values))
    rules: list[dict] = []
    if len(distinct) <= config.max_enum and len(values) >= config.enum_repeats * len(distinct):
        rules.append({"enum": sorted((json.loads(v) for v in distinct), key=json.dumps)})
    if values and all(isinstance(v, str) for v in values):
        strings = [str(v) for v in values]
        fmt, pattern = value_format(strings), infer_pattern(strings)
        typed = {"type": "string"}
        if fmt and pattern:
            rules.append({**typed, "format": fmt, "pattern": pattern})
        if pattern:
            rules.append({**typed, "pattern": pattern})
        if fmt:
            rules.append({**typed, "format": fmt})
    return rules


def value_format(values: Sequence[str]) -> str | None:
    """A JSON Schema format every value has (one the validator can check)."""
    if not values:
        return None
    if all(_DATE.match(v) and _is_date(v) for v in values):
        return "date"
    if all(_UUID.match(v) for v in values):
        return "uuid"
    if all(_EMAIL.match(v) for v in values):
        return "email"
    return None


def _is_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def infer_pattern(values: Sequence[str]) -> str | None:
    """An anchored regex for values that share one shape: "ORD-123456" -> ^ORD-\\d{6}$.

    Values are read as runs of upper-case letters, lower-case letters, digits and single
    other characters; all values must have the same runs. Letters that never vary stay
    literal (a prefix); digits and varying letters become classes, with an exact length
    when every value agrees and `+` otherwise, so longer ids of the same shape still pass.
    None when the values have no shared shape or are too few to generalise from (two).
    """
    if len(set(values)) < 2:
        return None
    shapes = [_tokens(value) for value in values]
    first = shapes[0]
    if any([kind for kind, _ in shape] != [kind for kind, _ in first] for shape in shapes):
        return None
    parts = [_part([shape[i][1] for shape in shapes], first[i][0]) for i in range(len(first))]
    return "^" + "".join(parts) + "$"


def _tokens(value: str) -> list[tuple[str, str]]:
    """(kind, text) runs; other characters are their own kind, so separators must match."""
    return [(_kind(text), text) for text in _TOKEN.findall(value)]


def _kind(text: str) -> str:
    if text.isdigit() and text.isascii():
        return "digit"
    if text.isascii() and text.isalpha():
        return "upper" if text.isupper() else "lower"
    return "literal:" + text


def _part(texts: list[str], kind: str) -> str:
    if kind.startswith("literal:") or (kind != "digit" and len(set(texts)) == 1):
        return _literal(texts[0])
    lengths = {len(text) for text in texts}
    size = lengths.pop() if len(lengths) == 1 else None
    return _CLASSES[kind] + ("+" if size is None else "" if size == 1 else f"{{{size}}}")


def _literal(text: str) -> str:
    # A hyphen outside a character class is literal; leaving it bare keeps "ORD-" readable.
    return re.escape(text).replace("\\-", "-")
