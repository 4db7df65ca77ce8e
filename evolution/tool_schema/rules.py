"""Rules a parameter's values follow, as JSON Schema keywords, learned from values or from
what the tool says (`evolution.tool_schema.errors`).

A rule is a small keyword set (`enum`, `pattern`, `format`, `type`) that every value it was
learned from satisfies; the operator tries them strictest first and keeps the first that
replay proves safe.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import date

import jsonschema

from evolution.tool_schema.config import ToolSchemaConfig
from evolution.tool_schema.statement import Statement

__all__ = [
    "claims",
    "example_of",
    "infer_pattern",
    "infer_rules",
    "stated_rules",
    "template_pattern",
    "value_format",
]

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


# -- rules from what the tool says ----------------------------------------------------

# Formats the validator checks; naming another would prove nothing on replay.
_CHECKED_FORMATS = frozenset(jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers)


def stated_rules(stated: Statement, values: Sequence[object] = ()) -> list[dict]:
    """JSON Schema keyword sets that what the tool says allows, strictest first.

    A stated closed set comes first, then each stated pattern (the most often stated
    first) and one inferred from the examples it gave and the successful `values`, each
    with a format when one is stated or every example has it; then the format or the type
    alone.
    """
    typed = {"type": stated.types[0]} if stated.types else {}
    rules: list[dict] = [{"enum": list(items)} for items in stated.enums]
    if typed and typed["type"] != "string":
        return _distinct([*rules, typed])
    strings = [v for v in (*stated.examples, *values) if isinstance(v, str)]
    fmt = _stated_format(stated) or value_format(strings)
    # the examples with the successful values, else alone (a success may break them)
    templates = [template_pattern(strings), template_pattern(list(stated.examples))]
    string = {"type": "string"}
    for pattern in dict.fromkeys([*stated.patterns, *(t for t in templates if t)]):
        if fmt:
            rules.append({**string, "format": fmt, "pattern": pattern})
        rules.append({**string, "pattern": pattern})
    if fmt:
        rules.append({**string, "format": fmt})
    return _distinct([*rules, *([typed] if typed else [])])


def claims(stated: Statement) -> list[dict]:
    """Each thing a statement asserts about a value, as a schema the value must satisfy;
    its examples count as a pattern only when it states none."""
    found = [{"enum": list(items)} for items in stated.enums]
    found += [{"type": "string", "pattern": p} for p in stated.patterns]
    template = None if stated.patterns else template_pattern(list(stated.examples))
    found += [{"type": "string", "pattern": template}] if template else []
    found += [{"type": "string", "format": f} for f in stated.formats if f in _CHECKED_FORMATS]
    return found + [{"type": t} for t in stated.types]


def _stated_format(stated: Statement) -> str | None:
    return next((f for f in stated.formats if f in _CHECKED_FORMATS), None)


def _distinct(rules: list[dict]) -> list[dict]:
    unique = {json.dumps(rule, sort_keys=True): rule for rule in reversed(rules)}
    return list(reversed(unique.values()))


def template_pattern(examples: Sequence[str]) -> str | None:
    """The pattern examples share (`infer_pattern`); a single example is a template whose
    digits stand for any digit and whose letters stand for themselves ("EMP-12345" ->
    ^EMP-\\d{5}$). None for a single example without digits: one word generalises to nothing."""
    distinct = list(dict.fromkeys(examples))
    if len(distinct) == 1:
        shifted = "".join(str((int(c) + 1) % 10) if c.isdigit() else c for c in distinct[0])
        distinct.append(shifted)
    return infer_pattern(distinct) if len(distinct) >= 2 else None


# What a pattern's example is made of: an atom and how often it repeats.
_ATOM = re.compile(
    r"(\\[dw]|\\.|\[(?:\\.|[^\]\\])+\]|\.|[^\\()|?*+{}\[\]^$])(\{(\d+)(?:,\d*)?\}|[+*?])?"
)
_FORMAT_EXAMPLES = {
    "date": "2026-01-31",
    "email": "name@example.com",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
}


def example_of(rule: dict) -> object | None:
    """A value the rule accepts, for rules the tool stated without one: the first of an
    enum, a format's usual example, or one made from a plain pattern (atoms, classes and
    counts; no groups or alternatives). None when no value could be made and checked."""
    if rule.get("enum"):
        return rule["enum"][0]
    # a format's usual example reads better than a made one ("2026-01-31", not "1111-11-11")
    pattern, fmt = rule.get("pattern"), rule.get("format")
    candidates = [_FORMAT_EXAMPLES.get(fmt)] if fmt else []
    if pattern:
        candidates += [*_FORMAT_EXAMPLES.values(), _made(pattern)]
    check = jsonschema.Draft202012Validator(
        rule, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    return next((c for c in candidates if c is not None and check.is_valid(c)), None)


def _made(pattern: str) -> str | None:
    body = pattern.removeprefix("^").removesuffix("$")
    made, end = [], 0
    for match in _ATOM.finditer(body):
        if match.start() != end:
            return None
        end = match.end()
        char = _atom_char(match.group(1))
        if char is None:
            return None
        made.append(char * _count(match.group(2), match.group(3)))
    return "".join(made) if end == len(body) else None


def _atom_char(atom: str) -> str | None:
    if atom in ("\\d", "[0-9]") or atom.startswith("[\\d"):
        return "1"
    if atom == "\\w" or atom == ".":
        return "a"
    if atom.startswith("\\"):
        return atom[1] if not atom[1].isalnum() else None
    if atom.startswith("["):
        inner = atom[1:-1]
        return None if inner.startswith("^") or inner.startswith("\\") else inner[0]
    return atom


def _count(quantifier: str | None, times: str | None) -> int:
    if times is not None:
        return int(times)
    return 0 if quantifier in ("*", "?") else 1
