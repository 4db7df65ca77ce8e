"""The values a message states: times, dates, amounts, codes, numbers, addresses.

Read by shape alone, in any language: a value is what carries digits or is an address, and
its kind is the shape (a time "19:30", a date "2026-03-14" or "3月14日", an amount "€40", a
code "BK-40213", a number with the word it counts, "30 kg"). Follow-ups are compared by
them (a value that contradicts the answer, one the answer should have given), and the
values one session alone states are abstracted to their kind before corrections are
grouped, so "always quote my reference BK-1" and "... BK-2" ask for one thing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from runtime.lexicon import fold

__all__ = ["Value", "abstracted", "asked_for", "placeholder", "values"]

_ADDRESS = (
    r"(?P<email>[\w.+-]+@[\w-]+(?:\.[\w-]+)+)"
    r"|(?P<host>https?://[^\s,;]+|(?<![\w@.])(?:[a-z0-9-]+\.)+[a-z]{2,}(?![\w.-]))"
)
# The letters a code is written in (Latin, Greek, Cyrillic): a code never swallows the
# unspaced script around it ("予約番号A1234です").
_L = "A-Za-z\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff"
_C = f"0-9{_L}"
_NUMERIC = (
    r"(?P<time>(?<!\d)\d{1,2}[:：h]\d{2}(?!\d)|(?<!\d)\d{1,2}\s?(?:am|pm)(?!\w))"
    r"|(?P<date>(?<!\d)\d{4}[-/.]\d{1,2}[-/.]\d{1,2}(?!\d)|(?<!\d)\d{1,2}[./]\d{1,2}[./]\d{2,4}(?!\d)"
    r"|\d{1,4}\s?年\s?\d{1,2}\s?月(?:\s?\d{1,2}\s?日)?|\d{1,2}\s?月\s?\d{1,2}\s?日)"
    r"|(?P<amount>[$€£¥₹₽₩]\s?\d[\d.,]*|\d[\d.,]*\s?(?:€|\$|£|eur|usd|gbp|chf|pln|zł|kr|円|元|руб)(?!\w))"
    rf"|(?P<code>(?<![{_C}-])(?=[{_C}-]*\d)(?=[{_C}-]*[{_L}])[{_C}](?:[{_C}-]*[{_C}])?(?![{_C}-])"
    rf"|(?<![{_C}-])\d+(?:[-/]\d+)+(?![{_C}-])|(?<![{_C}.,])\d{{5,}}(?![{_C}.,]))"
    rf"|(?P<number>(?<![{_C}.,])\d+(?:[.,]\d+)?)"
)
_VALUE = re.compile(f"{_ADDRESS}|{_NUMERIC}", re.IGNORECASE)
_QUOTED = re.compile(r"[\"“«„「『]([^\"”»“」』]{2,40})[\"”»“」』]")
_UNIT = re.compile(r"\s?([^\W\d_]{1,12})")
_BEFORE = re.compile(r"([^\W\d_]{2,12})\s?$")
_SPACED_CODE = re.compile(r"[^\W\d_]")


@dataclass(frozen=True)
class Value:
    """One value in a text: its kind, how it was written, a normal form to compare, and
    the word it counts ("kg" in "30 kg"; for a number without one, the word before it)."""

    kind: str
    text: str
    norm: str
    unit: str
    start: int
    end: int


def values(text: str) -> list[Value]:
    """Every value `text` states, in order."""
    found = [_value(match, text) for match in _VALUE.finditer(text)]
    found += [
        Value("name", m.group(1), fold(m.group(1)).strip(), "", m.start(), m.end())
        for m in _QUOTED.finditer(text)
        if not any(v.start <= m.start(1) < v.end for v in found)
    ]
    return sorted(found, key=lambda v: v.start)


def _value(match: re.Match[str], text: str) -> Value:
    kind = match.lastgroup or "number"
    written = match.group(0)
    norm = fold(written).rstrip(".,").replace(" ", "")
    if kind == "code" and not _SPACED_CODE.search(written):
        norm = re.sub(r"\D", "", norm) or norm
    unit = ""
    if kind == "number":
        after = _UNIT.match(text, match.end())
        before = _BEFORE.search(text[: match.start()])
        unit = fold(after.group(1) if after else before.group(1) if before else "")
        norm = norm.replace(",", ".")
    return Value(kind, written, norm, unit, match.start(), match.end())


def placeholder(kind: str) -> str:
    """What an abstracted value reads as: its kind, in angle brackets ("⟨code⟩")."""
    return f"⟨{kind}⟩"


def abstracted(text: str, own: Iterable[str]) -> str:
    """`text` with the values whose normal forms are in `own` written as their kind."""
    kept = set(own)
    if not kept:
        return text
    parts, last = [], 0
    for value in values(text):
        if value.norm in kept and value.start >= last:
            parts += [text[last : value.start], placeholder(value.kind)]
            last = value.end
    return "".join([*parts, text[last:]])


def asked_for(first: str, after: str) -> list[str]:
    """What the agent gave once a user asked for it, that its first answer did not: the
    values `after` states and `first` does not (one requirement, all of them), else the
    sentences of `after` that `first` does not hold. A replayed first answer that states
    these gives unasked what users had to ask for."""
    before = {v.norm for v in values(first)}
    added = [v.text for v in values(after) if v.norm not in before]
    if added:
        return [" ".join(dict.fromkeys(added))]
    known = {fold(s).strip() for s in _SENTENCE.split(first)}
    return [s.strip() for s in _SENTENCE.split(after) if s.strip() and fold(s).strip() not in known]


_SENTENCE = re.compile(r"(?<=[.!?。！？])\s*")
