"""Group corrections that mean the same thing, however each user worded them.

Offline and deterministic: each correction becomes a weighted bag of its content terms
(lowercased, accents folded, light suffix stemming, stopwords of the common European
languages dropped, values such as "30 kg" or a host name kept whole), weighted by how rare
a term is among the corrections being grouped (TF-IDF over the window). Groups form by
average-link agglomeration on cosine similarity: two corrections that share an informative
term ("date", "fasting", the same address) come together, and one word in common with a
single member of a group is not enough to join it.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from evolution.corrections.classify import specifics
from evolution.corrections.words import STOPWORDS, WORD, content_words, folded, stem

__all__ = ["JOIN_SIMILARITY", "SAME_VALUES", "group_by_meaning", "label", "terms"]

T = TypeVar("T")

# Average cosine similarity at which two groups become one. Paraphrases of one request
# share an informative term or two among five or six (cosine about 0.15-0.3); unrelated
# requests share none (0).
JOIN_SIMILARITY = 0.1
# The similarity of two texts that assert the same values.
SAME_VALUES = 0.5
# Verbs that frame a request ("please *mention* the X", "*sagen* Sie X"): two requests that
# share only their frame ask for different things, so a frame word weighs a quarter.
_FRAMES = frozenset(
    """mention tell say give show write add list state put use provide explain include
    keep make let ask send repeat confirm check remind note quote use
    nennen nenne nennt sagen sage sag geben gib gebe zeigen zeig zeige schreiben schreib
    angeben erwähnen erwähne bestätigen bestätige
    indiquer indiquez indique dire dites donner donnez montrer montrez écrire écrivez
    mentionner mentionnez confirmer confirmez préciser précisez
    incluir incluye incluya decir dime di dar da mostrar muestra escribir escribe indicar
    indica mencionar menciona confirmar confirma""".split()
)
_FRAME_WEIGHT = 0.25


def terms(text: str) -> Counter[str]:
    """The content terms of `text` with their counts, values included whole."""
    return Counter(specifics(text)) + Counter(content_words(text))


def group_by_meaning(items: Sequence[T], text: Callable[[T], str]) -> list[list[T]]:
    """`items` grouped by what their texts mean, largest group first (ties: first seen)."""
    if not items:
        return []
    texts = [text(item) for item in items]
    similarity = _similarities([terms(t) for t in texts])
    _same_values(similarity, [specifics(t) for t in texts])
    groups = [[index] for index in range(len(items))]
    while len(groups) > 1:
        np.fill_diagonal(similarity, -1.0)
        first, second = np.unravel_index(int(np.argmax(similarity)), similarity.shape)
        if similarity[first, second] < JOIN_SIMILARITY:
            break
        first, second = sorted((int(first), int(second)))
        similarity = _merged(similarity, first, second, len(groups[first]), len(groups[second]))
        groups[first] = sorted(groups[first] + groups.pop(second))
    groups.sort(key=lambda members: (-len(members), members[0]))
    return [[items[index] for index in members] for members in groups]


def _similarities(bags: list[Counter[str]]) -> np.ndarray:
    """Cosine similarity of every pair, on TF-IDF weights over these bags."""
    vocabulary = {term: i for i, term in enumerate(sorted({t for bag in bags for t in bag}))}
    documents = Counter(term for bag in bags for term in bag)
    matrix = np.zeros((len(bags), max(1, len(vocabulary))))
    for row, bag in enumerate(bags):
        for term, count in bag.items():
            weight = _FRAME_WEIGHT if term in _FRAME_STEMS else 1.0
            idf = math.log(1 + len(bags) / documents[term])
            matrix[row, vocabulary[term]] = weight * count * idf
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix /= np.where(norms == 0, 1.0, norms)
    return matrix @ matrix.T


def _same_values(similarity: np.ndarray, values: list[frozenset[str]]) -> None:
    """Two statements of the same values ("8 hours", "8 Stunden") state one fact, in
    whatever language: they count as similar as two close paraphrases."""
    for i, first in enumerate(values):
        for j in range(i + 1, len(values)):
            if first and first == values[j]:
                similarity[i, j] = similarity[j, i] = max(similarity[i, j], SAME_VALUES)


def _merged(similarity: np.ndarray, first: int, second: int, a: int, b: int) -> np.ndarray:
    """Average linkage after merging group `second` (b members) into `first` (a members)."""
    combined = (a * similarity[first] + b * similarity[second]) / (a + b)
    similarity[first, :] = combined
    similarity[:, first] = combined
    keep = [i for i in range(similarity.shape[0]) if i != second]
    return similarity[np.ix_(keep, keep)]


def label(texts: Sequence[str], size: int = 3) -> str:
    """A group's name: its most widespread words (values left out), alphabetical, each as
    users most often wrote it."""
    spread: Counter[str] = Counter()
    written: dict[str, Counter[str]] = {}
    for text in texts:
        seen = set()
        for word in WORD.findall(folded(_without_values(text))):
            if len(word) > 2 and word not in STOPWORDS:
                root = stem(word)
                written.setdefault(root, Counter())[word] += 1
                seen.add(root)
        spread.update(seen)
    top = sorted(spread.items(), key=lambda pair: (-pair[1], pair[0]))[:size]
    words = [written[root].most_common(1)[0][0] for root, _ in top]
    return " ".join(sorted(words)) or "unspecified"


def _without_values(text: str) -> str:
    for value in specifics(text):
        text = re.sub(re.escape(value), " ", text, flags=re.IGNORECASE)
    return text


_FRAME_STEMS = frozenset(stem(folded(word)) for word in _FRAMES)
