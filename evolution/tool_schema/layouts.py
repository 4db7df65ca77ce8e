"""Date and time layouts a tool spells out ("YYYY-MM-DD", "DD.MM.YYYY", "HH:mm"), read as a
pattern, a JSON Schema format when the layout is ISO's date, and a sample value."""

from __future__ import annotations

import re

__all__ = ["is_layout", "layouts"]

_PART = r"(?:YYYY|yyyy|YY|yy|MM|mm|DD|dd|HH|hh|SS|ss|M|D|d)"
# A whole token: not a piece of a value that goes on past a separator ("Mss-0001").
_LAYOUT = re.compile(rf"(?<![\w])(?<!\w[-/.:#_]){_PART}(?:[-/.:T ]?{_PART})+(?![\w])(?![-/.:#_]\w)")
_LAYOUT_PARTS = re.compile(r"YYYY|yyyy|YY|yy|MM|mm|DD|dd|HH|hh|SS|ss|M|D|d|.")
# The moment a layout's sample shows: 31 January 2026, 13:45:30.
_SAMPLE = {"y4": "2026", "y2": "26", "month": "01", "day": "31", "hour": "13", "minute": "45"}
_SAMPLE |= {"second": "30", "month1": "1", "day1": "31"}
# The field each kind of part spells, whatever its width.
_FIELD = {"y4": "year", "y2": "year", "month1": "month", "day1": "day"}


def layouts(text: str) -> list[tuple[str, str | None, str]]:
    """(pattern, format, sample) for each date or time layout the text spells out."""
    found = []
    for match in _LAYOUT.finditer(text):
        parts = _layout_parts(match.group(0))
        if parts is not None:
            found.append(_layout_rule(parts))
    return found


def is_layout(token: str) -> bool:
    return _LAYOUT.fullmatch(token) is not None and _layout_parts(token) is not None


def _layout_parts(layout: str) -> list[tuple[str, str]] | None:
    """(kind, text) parts; None unless it has two date or time parts, one of two letters,
    and names each field once ("MMM" is a word, not a month beside a month)."""
    parts: list[tuple[str, str]] = []
    for text in _LAYOUT_PARTS.findall(layout):
        if len(text) == 1 and text not in "MDd":
            parts.append(("sep", text))
            continue
        after_hour = any(kind == "hour" for kind, _ in parts)
        parts.append((_layout_kind(text, after_hour), text))
    fields_ = [_FIELD.get(kind, kind) for kind, _ in parts if kind != "sep"]
    if len(fields_) < 2 or len(set(fields_)) < len(fields_):
        return None
    if not any(len(text) >= 2 for kind, text in parts if kind != "sep"):
        return None
    return parts


def _layout_kind(text: str, after_hour: bool) -> str:
    upper = text.upper()
    if upper.startswith("Y"):
        return "y4" if len(text) == 4 else "y2"
    if upper == "MM":
        return "minute" if after_hour else "month"
    if upper == "M":
        return "month1"
    if upper == "DD":
        return "day"
    if upper == "D":
        return "day1"
    return {"HH": "hour", "SS": "second"}[upper]


def _layout_rule(parts: list[tuple[str, str]]) -> tuple[str, str | None, str]:
    regex = "".join(_layout_regex(kind, text) for kind, text in parts)
    sample = "".join(text if kind == "sep" else _SAMPLE[kind] for kind, text in parts)
    iso_date = [kind for kind, _ in parts] == ["y4", "sep", "month", "sep", "day"]
    is_date = iso_date and all(text == "-" for kind, text in parts if kind == "sep")
    return f"^{regex}$", "date" if is_date else None, sample


def _layout_regex(kind: str, text: str) -> str:
    if kind == "sep":
        return re.escape(text).replace("\\-", "-")
    if kind in ("month1", "day1"):
        return r"\d{1,2}"
    return rf"\d{{{len(text)}}}"
