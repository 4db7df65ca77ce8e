"""What a tool's refusals and its own description say one parameter must be.

A tool that refuses a call usually says why: a pattern the value must match, a closed set
it must come from, an example, a date layout, a type, or a parameter name it does not know.
This module takes JSON error bodies apart (FastAPI's 422 `detail`, `{"error": {...}}`,
`{"errors": [...]}`) and keeps the texts about one parameter: those whose structure names
it, or whose sentence does not plainly name another; `evolution.tool_schema.phrases` reads
each sentence. Pure functions: the operator hands it text and gets a `Statement` back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

from evolution.tool_schema.phrases import compiles, quoted_items, read_clause, read_names, scalar
from evolution.tool_schema.statement import Names, Statement, merged

__all__ = ["read_description", "read_refusal"]


def read_refusal(message: str | None, returned: object, names: Names) -> Statement:
    """What a refused call's error message and tool return say about the parameter."""
    pieces = [*_pieces(_decoded(message)), *_pieces(_decoded(returned))]
    return merged(_read_piece(piece, names) for piece in dict.fromkeys(pieces))


def read_description(text: str | None, names: Names, *, own: bool) -> Statement:
    """What a description says: all of the parameter's own (`own`), else only the
    sentences of the tool's description that name the parameter."""
    if not text:
        return Statement()
    clauses = _clauses(text)
    if not own:
        clauses = [c for c in clauses if any(_mentions(c, name) for name in names.ours)]
    return merged(read_clause(clause) for clause in clauses)


# -- pieces: the texts inside an error, and the parameter each one names ----------------


@dataclass(frozen=True)
class _Piece:
    """One error text, the parameter its structure names (if any), and its JSON context."""

    text: str
    field: str | None = None
    data: str = "{}"  # JSON of the structured keys around the text (pydantic's ctx, type)


_MESSAGE_KEYS = ("msg", "message", "detail", "error", "error_description", "reason", "title")
_NESTED_KEYS = ("detail", "error", "errors", "details", "violations", "fieldErrors")
_FIELD_KEYS = ("loc", "field", "param", "parameter", "path", "property", "argument")
_DATA_KEYS = ("type", "ctx", "input", "pattern", "enum", "allowed", "allowed_values", "example")


def _decoded(value: object) -> object:
    """A JSON body given as text, parsed; anything else as it is."""
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _pieces(value: object, depth: int = 0) -> Iterator[_Piece]:
    if depth > 4 or value is None:
        return
    if isinstance(value, str):
        yield _Piece(value)
    elif isinstance(value, list):
        for item in value:
            yield from _pieces(item, depth + 1)
    elif isinstance(value, dict):
        yield from _dict_pieces(value, depth)


def _dict_pieces(value: dict, depth: int) -> Iterator[_Piece]:
    field = _field(value)
    data = {key: value[key] for key in _DATA_KEYS if key in value}
    texts = [value[key] for key in _MESSAGE_KEYS if isinstance(value.get(key), str)]
    for text in texts or ([""] if data else []):
        yield _Piece(text, field, json.dumps(data, sort_keys=True, default=str))
    for key in _NESTED_KEYS:
        if isinstance(value.get(key), dict | list):
            yield from _pieces(value[key], depth + 1)


def _field(value: dict) -> str | None:
    """The parameter a structured error names: "emp_id", ["body", "emp_id"], "$.emp_id"."""
    for key in _FIELD_KEYS:
        named = value.get(key)
        if isinstance(named, list):
            named = next((n for n in reversed(named) if isinstance(n, str)), None)
        if isinstance(named, str) and (found := re.findall(r"[A-Za-z_][\w-]*", named)):
            return found[-1]
    return None


def _read_piece(piece: _Piece, names: Names) -> Statement:
    """Names are read from every piece; what the value must be, only from pieces about it."""
    data = json.loads(piece.data)
    named = [_read_named(piece, data), read_names(piece.text)]
    if piece.field is not None:
        if piece.field not in names.ours:
            return merged(named)
        return merged([*named, read_clause(piece.text), _read_data(data)])
    clauses = [c for c in _clauses(piece.text) if _about(c, names)]
    return merged([*named, *(read_clause(c) for c in clauses), _read_data(data)])


def _read_named(piece: _Piece, data: dict) -> Statement:
    """pydantic's and FastAPI's error types name a parameter it lacks or does not know."""
    kind = str(data.get("type", ""))
    if kind == "missing" or piece.text.strip().lower() == "field required":
        return Statement(missing=(piece.field,))
    if kind == "extra_forbidden" or "extra inputs are not permitted" in piece.text.lower():
        return Statement(unknown=(piece.field,))
    return Statement()


# pydantic error types: what the value must be, when the message does not say it in words.
_PYDANTIC_TYPES = {
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "string": "string",
    "list": "array",
    "dict": "object",
}
_PYDANTIC_FORMATS = {"date": "date", "datetime": "date-time", "uuid": "uuid", "time": "time"}


def _read_data(data: dict) -> Statement:
    """pydantic's `ctx` (pattern, expected), its error `type` and `input`, and the keys
    other error bodies use for the same (`pattern`, `enum`, `allowed_values`, `example`)."""
    ctx = data.get("ctx") if isinstance(data.get("ctx"), dict) else {}
    patterns = [p for p in (ctx.get("pattern"), data.get("pattern")) if isinstance(p, str)]
    expected = ctx.get("expected")
    enums = [quoted_items(expected)] if isinstance(expected, str) else []
    for key in ("enum", "allowed", "allowed_values"):
        if _listed(data.get(key)):
            enums.append(tuple(data[key]))
    head = str(data.get("type", "")).split("_")[0]
    refused = (data["input"],) if isinstance(data.get("input"), str | int | float) else ()
    example = (data["example"],) if isinstance(data.get("example"), str) else ()
    return Statement(
        patterns=tuple(p for p in patterns if compiles(p)),
        enums=tuple(e for e in enums if e),
        types=tuple(t for t in (_PYDANTIC_TYPES.get(head),) if t),
        formats=tuple(f for f in (_PYDANTIC_FORMATS.get(head),) if f),
        examples=example,
        refused=refused,
    )


def _listed(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(scalar(v) for v in value)


# -- clauses: which sentences are about the parameter ----------------------------------

_CLAUSE_BREAK = re.compile(
    r"\n+|;\s+|(?<=[a-z)\]'\"])(?<!\be\.g)(?<!\bi\.e)(?<!\betc)\.\s+(?=[A-Z])"
)


def _clauses(text: str) -> list[str]:
    """Lines, `;`-separated parts and sentences (a period inside "e.g." splits nothing)."""
    return [part.strip() for part in _CLAUSE_BREAK.split(text) if part.strip()]


def _about(clause: str, names: Names) -> bool:
    """A clause is about the parameter unless it plainly names another one and not ours."""
    if any(_mentions(clause, name) for name in names.ours):
        return True
    # jsonschema quotes the type or format it wanted ("is not a 'date'"): not a name
    bare = _QUOTED_KIND.sub("", clause)
    return not any(_names_plainly(bare, other) for other in names.others)


_QUOTED_KIND = re.compile(r"\bis not (?:a|of type)\s+'[^']*'")


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


def _names_plainly(text: str, name: str) -> bool:
    """`name: ...`, `'name'`, "parameter name": words that happen to be a name do not count."""
    quoted = rf"[`'\"]{re.escape(name)}[`'\"]"
    prefixed = rf"^\s*{re.escape(name)}\s*:"
    labelled = rf"\b(?:parameter|argument|field|property|param)\s+{re.escape(name)}\b"
    return any(re.search(p, text, re.IGNORECASE) for p in (quoted, prefixed, labelled))
