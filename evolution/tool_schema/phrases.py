"""What one sentence of an error or a description says of a value: a pattern, an example, a
closed set, a layout, a type or format, the value it refused, or a parameter name the tool
does not know or wants instead. Keyed on phrasing (plain English, jsonschema's and pydantic's
messages), never on a tool's or parameter's name."""

from __future__ import annotations

import json
import re

from evolution.tool_schema.layouts import is_layout, layouts
from evolution.tool_schema.statement import Statement

__all__ = ["compiles", "quoted_items", "read_clause", "read_names", "scalar"]


def read_clause(text: str) -> Statement:
    """What one sentence says of the value. A layout is read only outside the regexes the
    sentence spells out: in `^MMDD-\\d{3}$` the letters are the pattern's literal text."""
    patterns = _patterns(text)
    spelled = layouts(_outside(text, [span for span, _ in patterns]))
    examples = [e for e in _examples(text) if not is_layout(e)]
    return Statement(
        patterns=tuple(dict.fromkeys([*(p for _, p in patterns), *(p for p, _, _ in spelled)])),
        enums=tuple(dict.fromkeys(_enums(text))),
        formats=tuple(dict.fromkeys([*_formats(text), *(f for _, f, _ in spelled if f)])),
        types=tuple(dict.fromkeys(_types(text))),
        examples=tuple(dict.fromkeys(examples)),
        samples=tuple(dict.fromkeys(s for _, _, s in spelled)),
        refused=tuple(dict.fromkeys(_refused(text))),
    )


def scalar(value: object) -> bool:
    """A JSON string or number (a member a closed set may have)."""
    return isinstance(value, str | int | float) and not isinstance(value, bool)


def read_names(text: str) -> Statement:
    """Names the tool does not know or wants instead, read from the whole text."""
    return Statement(unknown=tuple(_unknown(text)), missing=tuple(_missing(text)))


# Quoted ('...', "...", `...`, /.../) or bare tokens.
_QUOTED = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`"
_TOKEN = rf"(?:{_QUOTED}|/[^/\s]+/|\S+)"


def _unquoted(token: str) -> str:
    if len(token) >= 2 and token[0] == token[-1] and token[0] in "'\"`/":
        return token[1:-1]
    return token


# -- patterns --------------------------------------------------------------------------

_PATTERN_CUE = re.compile(
    rf"\b(?:does not match|doesn't match|not matching|must match|should match|to match|"
    rf"matching|match(?:es)?|pattern|regexp?|regular expression)\b"
    rf"(?:\s+(?:the\s+)?(?:pattern|regexp?|regular expression))?\s*(?:is\s+|of\s+)?[:=]?\s*"
    rf"({_TOKEN})",
    re.IGNORECASE,
)
_ANCHORED = re.compile(rf"(?<!\S)({_QUOTED}|\^\S*\$)")
_REGEX_SIGNS = re.compile(r"[\^$\\\[\]{}()+*?|]")


def _patterns(text: str) -> list[tuple[tuple[int, int], str]]:
    """((start, end) of the token in the text, the regex it holds) for each pattern stated."""
    found = [*_PATTERN_CUE.finditer(text), *_ANCHORED.finditer(text)]
    held = ((m.span(1), _as_pattern(m.group(1))) for m in found)
    return [(span, pattern) for span, pattern in held if pattern]


def _outside(text: str, spans: list[tuple[int, int]]) -> str:
    """The text with each span blanked out, so nothing inside it is read again."""
    for start, end in spans:
        text = text[:start] + " " * (end - start) + text[end:]
    return text


def _as_pattern(token: str) -> str | None:
    """The regex a token holds, or None when it is a word ("must match the format")."""
    stripped = token.rstrip(".,;:)")
    for candidate in (stripped, token) if stripped.endswith("$") else (token,):
        pattern = _unrepr(_unquoted(candidate))
        if _REGEX_SIGNS.search(pattern) and compiles(pattern):
            return pattern
    return None


def _unrepr(pattern: str) -> str:
    """jsonschema quotes a pattern with repr(), doubling each backslash; undo it when every
    backslash is doubled (a regex that means a literal backslash is rare)."""
    if "\\\\" in pattern and "\\" not in pattern.replace("\\\\", ""):
        return pattern.replace("\\\\", "\\")
    return pattern


def compiles(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


# -- examples --------------------------------------------------------------------------

# A strong cue announces an example outright; "like" and "looks like" also begin ordinary
# prose ("it looks like you..."), so what follows them counts only when it looks like a value.
_STRONG_CUE = (
    r"\be\.g\.|\beg\b|\bfor (?:example|instance)\b|\bsuch as\b|\bi\.e\."
    r"|\b(?:examples?|sample(?: values?)?)\s*[:=]"
)
_EXAMPLE_CUE = re.compile(
    rf"(?:({_STRONG_CUE})|\b(?:look(?:s|ing)? like|formatted like|in the form(?: of)?|like)\b)"
    r"\s*[:,]?\s*",
    re.IGNORECASE,
)
_VALUE_TOKEN = rf"(?:{_QUOTED}|[^\s,]+)"
_LIST_JOIN = re.compile(r"\s*(?:,\s*(?:or\b|and\b)?|\bor\b|\band\b)\s*")
_VALUE_SIGN = re.compile(r"\d|[-_@/.:#+]\w|^[A-Z]{2,}$")
_NOT_VALUES = frozenset(
    "a an the one any this that valid proper correct value values similar etc others more"
    " following below above in of".split()
)


def _examples(text: str) -> list[str]:
    found: list[str] = []
    for match in _EXAMPLE_CUE.finditer(text):
        rest = text[match.end() :]
        values = _values_after(rest)
        signed = [v for v in values if _VALUE_SIGN.search(v)]
        # Plain words count after a strong cue when quoted or listed, and only when no
        # listed value looks like one: "such as economy or premium", not "e.g. EMP-12345
        # or similar", nor pydantic's "e.g. be exact dates".
        listed = rest[:1] in "'\"`" or len(values) >= 2
        words = values if match.group(1) and listed and not signed else []
        found += [v for v in signed or words if _may_be_value(v)]
    return found


def _values_after(text: str) -> list[str]:
    """The values listed at the start of `text` ("A, B or C", quoted or bare), up to the
    first value that ends the sentence or is not joined to the next."""
    values: list[str] = []
    rest = text
    while match := re.match(_VALUE_TOKEN, rest):
        value, ended = _value_of(match.group(0))
        values.append(value)
        rest = rest[match.end() :]
        joined = _LIST_JOIN.match(rest)
        if ended or joined is None:
            break
        rest = rest[joined.end() :]
    return [v for v in values if v]


def _value_of(token: str) -> tuple[str, bool]:
    """A token's value, and whether punctuation after it ends the list."""
    if _unquoted(token) != token:
        return _unquoted(token), False
    value = token.rstrip(".;:!?)]")
    return value.lstrip("(["), value != token


def _may_be_value(value: str) -> bool:
    return value.lower() not in _NOT_VALUES and not value.startswith("^")


# -- closed sets -----------------------------------------------------------------------

_ENUM_CUE = re.compile(
    r"\b(?:one of(?: the following)?|(?:allowed|valid|possible|accepted|permitted|supported)"
    r" (?:values?|options?|choices)(?: are| is| include)?|(?:must|should) be either"
    r"|choose from|(?:allowed|options|choices)(?=\s*:))\s*[:=]?\s*",
    re.IGNORECASE,
)
# pydantic's Literal and Enum errors: Input should be 'economy', 'premium' or 'business'
_QUOTED_CHOICES = re.compile(
    rf"\b(?:should|must) be\s+((?:{_QUOTED})(?:\s*,\s*(?:{_QUOTED}))*\s*,?\s*or\s+(?:{_QUOTED}))"
)
_BRACKETS = {"[": "]", "(": ")", "{": "}"}


def _enums(text: str) -> list[tuple]:
    found = [quoted_items(m.group(1)) for m in _QUOTED_CHOICES.finditer(text)]
    for match in _ENUM_CUE.finditer(text):
        rest = text[match.end() :]
        if rest[:1] in _BRACKETS:
            found.append(_bracketed(rest))
            continue
        listed = tuple(v for v in _values_after(rest) if _may_be_value(v))
        found.append(listed if len(listed) >= 2 else ())  # "one of them" lists nothing
    return [items for items in found if items]


def quoted_items(text: str) -> tuple:
    return tuple(_unquoted(m.group(0)) for m in re.finditer(_QUOTED, text))


def _bracketed(text: str) -> tuple:
    """The items of a JSON or Python list at the start of `text`: [1, 2] or ['a', 'b']."""
    end = text.find(_BRACKETS[text[0]])
    if end < 0:
        return ()
    inner = text[1:end]
    items = re.findall(rf"{_QUOTED}|[^,\s][^,]*", inner)
    return tuple(_item(item.strip()) for item in items if item.strip())


def _item(token: str) -> object:
    if _unquoted(token) != token:
        return _unquoted(token)
    try:
        value = json.loads(token)
    except ValueError:
        return token
    return value if scalar(value) else token


# -- types and formats -----------------------------------------------------------------

_TYPE_WORDS = {
    "integer": "integer",
    "int": "integer",
    "number": "number",
    "float": "number",
    "decimal": "number",
    "boolean": "boolean",
    "bool": "boolean",
    "string": "string",
    "str": "string",
    "array": "array",
    "list": "array",
    "object": "object",
}
_TYPE_CUE = re.compile(
    r"\bis not of type\s+'(\w+)'"
    r"|\b(?:must|should) be\s+(?:an?\s+|of type\s+|a valid\s+)?(\w+)\b"
    r"|\bexpected\s+(?:an?\s+|type\s+)?(\w+)\b"
    r"|\bnot an?\s+(?:valid\s+)?(\w+)\b",
    re.IGNORECASE,
)
_FORMAT_NAMES = ("date-time", "date", "time", "email", "uuid", "ipv4", "ipv6", "uri")
_FORMAT_CUE = re.compile(
    rf"\bis not a\s+'({'|'.join(_FORMAT_NAMES)})'"
    rf"|\bformat\s*(?:is\s+|of\s+)?[:=]?\s*['\"`]?({'|'.join(_FORMAT_NAMES)})\b(?![-/.\w])",
    re.IGNORECASE,
)
_FORMAT_WORDS = re.compile(
    r"\b(ISO[- ]?8601 date|ISO date)\b|\b(valid )?(e-?mail address)\b|\b(UUID)\b", re.IGNORECASE
)


def _types(text: str) -> list[str]:
    words = (next(g for g in m.groups() if g) for m in _TYPE_CUE.finditer(text))
    return [_TYPE_WORDS[w.lower()] for w in words if w.lower() in _TYPE_WORDS]


def _formats(text: str) -> list[str]:
    found = [next(g for g in m.groups() if g).lower() for m in _FORMAT_CUE.finditer(text)]
    for match in _FORMAT_WORDS.finditer(text):
        date_, _, email, uuid_ = match.groups()
        found.append("date" if date_ else "email" if email else "uuid")
    return found


# -- refused values and names ----------------------------------------------------------

# jsonschema starts its messages with the refused value: '12/03/2026' does not match '...'
_QUOTED_VALUE = re.compile(
    rf"(?:^|:)\s*({_QUOTED})\s+(?:does not match|is not one of|is not of type|is not a\b"
    r"|is not valid|is too (?:long|short))"
)
_GOT_VALUE = re.compile(rf"\b(?:got|received|invalid value)\s*[:=]?\s*({_QUOTED})", re.I)
# A name is quoted, or looks like an identifier (snake_case, camelCase), or ends the clause:
# "required field must match" names no field "must".
_NAME = (
    r"(?:[`'\"]([A-Za-z_][\w-]*)[`'\"]"
    r"|(?-i:([A-Za-z_]\w*(?:_|[a-z][A-Z])\w*|[A-Za-z_]\w*(?=[.,;:)]|\s*$))))"
)
_UNKNOWN = re.compile(
    rf"\b(?:unknown|unexpected|unrecognized|unrecognised|extra|unsupported)\s+(?:keyword\s+)?"
    rf"(?:parameter|argument|field|property|key|input|attribute)s?\s*[:=]?\s*{_NAME}"
    rf"|[`'\"]([A-Za-z_][\w-]*)[`'\"]\s+is not an?\s+(?:valid|known|recognized|allowed)\s+"
    rf"(?:parameter|argument|field|property)",
    re.IGNORECASE,
)
_UNEXPECTED_LIST = re.compile(r"\(((?:'[^']+'(?:,\s*)?)+)\s+(?:was|were) unexpected\)")
_MISSING = re.compile(
    rf"\b(?:missing|requires?|required)\s+(?:\d+\s+)?(?:required\s+)?(?:positional\s+)?"
    rf"(?:parameter|argument|field|property|key)s?\s*[:=]?\s*{_NAME}"
    rf"|[`'\"]([A-Za-z_][\w-]*)[`'\"]\s+is (?:a )?(?:required|missing)"
    rf"|\b(?:parameter|argument|field|property)\s+{_NAME}\s+is (?:required|missing)"
    rf"|\bdid you mean\s+{_NAME}|\buse\s+[`'\"]([A-Za-z_][\w-]*)[`'\"]\s+instead",
    re.IGNORECASE,
)


def _refused(text: str) -> list[str]:
    found = [_unquoted(m.group(1)) for m in _QUOTED_VALUE.finditer(text)]
    return found + [_unquoted(m.group(1)) for m in _GOT_VALUE.finditer(text)]


def _unknown(text: str) -> list[str]:
    found = [next(g for g in m.groups() if g) for m in _UNKNOWN.finditer(text)]
    for match in _UNEXPECTED_LIST.finditer(text):
        found += quoted_items(match.group(1))
    return found


def _missing(text: str) -> list[str]:
    return [next(g for g in m.groups() if g) for m in _MISSING.finditer(text)]
