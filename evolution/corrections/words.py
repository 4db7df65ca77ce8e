"""Words as the corrections' readers count them: lowercased, accents folded, lightly
stemmed, without the stopwords of the languages users most often write."""

from __future__ import annotations

import re
import unicodedata

__all__ = ["STOPWORDS", "WORD", "content_words", "folded", "stem"]

WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
STOPWORDS = frozenset(
    """a about after again all also am an and any are as at back be because been before
    being but by can can't could did didn't do does doesn't don't for from get got had has
    have having he her here him his how i i'd i'm if in into is isn't it it's its just know
    let like me more my need needs next no not now of off ok okay on once one only or other
    our out over please right same say she should so some still such than thank thanks that
    that's the their them then there these they thing this those time to too told try up us
    very was way we were what when where which while who why will with would yes yet you
    your you're answer answers reply replies response said tell want wanted wrong correct
    actually always never sure hi hello hey hmm nope nah incorrect falsch faux
    aber alle als am an auch auf aus bei bin bis bitte da das dass dem den der des die doch
    du ein eine einen einer es für hat haben ich ihr im immer in ist ja kann mein meine mich
    mir mit muss nach nicht nein noch nur oder schon sie sind so um und uns von vor war was
    wie wir wird zu zum zur über
    au aux avec ce ces cette dans de des du elle en est et il ils je la le les leur mais me
    mes moi mon ne non nous on ou par pas plus pour qu que qui sa se ses son sur ta te toi ton
    tu un une vous votre s'il plaît toujours jamais
    al con de del el en es esta este la las lo los me mi no para pero por que se si su un una
    y yo siempre nunca favor
    pouvez pourriez peux pouvoir können könnten kannst puede puedes podria podrías potresti
    dis dites""".split()
)
_SUFFIXES = ("ing", "ed", "es", "s")
_UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\u0e00-\u0e7f]+")


def folded(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(char for char in decomposed if not unicodedata.combining(char))


def stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> list[str]:
    """The stems of the words that carry meaning (three letters or more, not stopwords);
    in scripts written without spaces (Chinese, Japanese, Thai), their character pairs."""
    spaced = _UNSPACED.sub(" ", folded(text))
    found = [stem(w) for w in WORD.findall(spaced) if len(w) > 2 and w not in STOPWORDS]
    for run in _UNSPACED.findall(folded(text)):
        found += [run[i : i + 2] for i in range(len(run) - 1)] or [run]
    return found
