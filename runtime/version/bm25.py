"""Okapi BM25 over words, else over the subwords of long words: the lexical ranking memory
and skill retrieval share.

Pure Python, no model downloads: it runs anywhere the gateway runs. Embedding retrieval
can be added behind the indexes' same `search` signatures.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence

__all__ = ["Bm25", "subwords", "tokenize"]

_WORD = re.compile(r"\w+", re.UNICODE)
# Words so common in support conversations that they only add noise to the ranking.
_STOPWORDS = frozenset(
    "a an and are as at be by can do does for from how i in is it me my of on or our the "
    "this to was what when where which who why will with you your".split()
)


# A question that shares no word with any item is matched again by the 5-grams of its long
# words, so a word inside a compound or with another ending still finds its item: "Gepäck"
# in "Freigepäck", "refund" in "refunds". Word matches come first and are left as they are.
_SUBWORD = 5
_SUBWORD_FROM = 6


def tokenize(text: str) -> list[str]:
    """Lowercased word tokens without stopwords."""
    return [token for token in _WORD.findall(text.lower()) if token not in _STOPWORDS]


def subwords(text: str) -> list[str]:
    """The 5-grams of the longer words of `text`."""
    return [
        word[i : i + _SUBWORD]
        for word in tokenize(text)
        if len(word) >= _SUBWORD_FROM
        for i in range(len(word) - _SUBWORD + 1)
    ]


class Bm25:
    """Okapi BM25 over documents given as term lists, scored term at a time over each
    term's postings: a query costs what its terms' documents do, not the whole index."""

    def __init__(self, documents: Sequence[list[str]], k1: float, b: float) -> None:
        docs = [Counter(terms) for terms in documents]
        lengths = [sum(doc.values()) for doc in docs]
        average = (sum(lengths) / len(lengths)) if lengths else 0.0
        self._postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for index, doc in enumerate(docs):
            for term, count in doc.items():
                self._postings[term].append((index, count))
        n = len(docs)
        # The "+1" variant of IDF keeps every weight positive, even for very common terms.
        self._idf = {
            t: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for t, p in self._postings.items()
        }
        self._norms = [k1 * (1 - b + b * length / (average or 1.0)) for length in lengths]
        self._k1 = k1

    def ranked(self, query: list[str]) -> list[tuple[float, int]]:
        """(score, document index) of every document with a positive score, best first."""
        scores: dict[int, float] = defaultdict(float)
        for term in set(query) & self._idf.keys():
            idf = self._idf[term]
            for index, count in self._postings[term]:
                scores[index] += idf * count * (self._k1 + 1) / (count + self._norms[index])
        ranked = [(score, index) for index, score in scores.items() if score > 0]
        return sorted(ranked, key=lambda pair: (-pair[0], pair[1]))
