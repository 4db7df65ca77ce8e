"""A fact's topic: the key that facts and corrections about one thing share."""

from __future__ import annotations

import re

__all__ = ["topic"]

_TOPIC_TERMS = 3
_WORD = re.compile(r"[a-z][a-z0-9_]*")
_STOPWORDS = frozenset(
    """a about actually again also am an and any are as asked at be been but by can could did
    do does for from had has have he her his how i if in into is it its just me meant my no
    nope not of on only or our please said she should so than that the their them then there
    these they this those to too try us wanted was we were what when where which who why will
    with would wrong incorrect you your yes that's it's isn't don't doesn't""".split()
)


def topic(text: str) -> str:
    """A missing fact's topic: its first few key terms, lowercased and sorted.

    Deliberately simple and deterministic: "No, the refund window is 30 days" and "actually
    the refund window is 30 days for EU orders" both give "days refund window". Numbers are
    dropped (they are the fact, not its topic), and so are stopwords and correction words.
    """
    words = [w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _STOPWORDS]
    terms = sorted(dict.fromkeys(words[:_TOPIC_TERMS]))
    return " ".join(terms) or "unspecified"
