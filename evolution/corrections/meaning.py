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

__all__ = [
    "ASKED",
    "JOIN_SIMILARITY",
    "SAME_VALUES",
    "asked_note",
    "group_by_meaning",
    "join_nearest",
    "label",
    "signature",
    "terms",
]

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
ASKED = re.compile(r"⟦asked:([^⟧]*)⟧")


def terms(text: str) -> Counter[str]:
    """The content terms of `text` with their counts, values included whole."""
    return Counter(specifics(text)) + Counter(content_words(text))


def group_by_meaning(items: Sequence[T], text: Callable[[T], str]) -> list[list[T]]:
    """`items` grouped by what their texts mean, largest group first (ties: first seen)."""
    if not items:
        return []
    texts = [text(item) for item in items]
    similarity = _similarities([terms(t) for t in texts])
    _same_values(similarity, [signature(t) for t in texts])
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


def join_nearest(
    groups: list[list[T]], items: Sequence[T], text: Callable[[T], str]
) -> tuple[list[list[T]], list[T]]:
    """Add each of `items` to the group it is most like, as the agglomeration would have
    joined it: its average similarity to the group's members (values alike counting as
    `SAME_VALUES`) reaches `JOIN_SIMILARITY`. Linear in the number of items, where grouping
    them all would be quadratic. Returns the groups, largest first (ties: as given), each
    with the items that joined it before its own members, and the items that joined none.
    """
    if not groups or not items:
        return groups, list(items)
    members = [member for group in groups for member in group]
    member_texts, item_texts = [text(member) for member in members], [text(i) for i in items]
    member_bags, item_bags = [terms(t) for t in member_texts], [terms(t) for t in item_texts]
    documents = Counter(term for bag in [*member_bags, *item_bags] for term in bag)
    count = len(member_bags) + len(item_bags)
    vocabulary = {term: i for i, term in enumerate(sorted({t for bag in member_bags for t in bag}))}
    vectors = [_unit(bag, documents, count) for bag in member_bags]
    # Each group's members summed (a column per group): an item's dot product with a
    # column, over the group's size, is its average cosine similarity to the members.
    sums = np.zeros((max(1, len(vocabulary)), len(groups)))
    owner, start = [], 0
    for index, group in enumerate(groups):
        for vector in vectors[start : start + len(group)]:
            for term, weight in vector.items():
                sums[vocabulary[term], index] += weight
        owner += [index] * len(group)
        start += len(group)
    sizes = np.array([len(group) for group in groups], dtype=float)
    by_values: dict[frozenset[str], list[int]] = {}
    for index, member_text in enumerate(member_texts):
        if values := signature(member_text):
            by_values.setdefault(values, []).append(index)
    joined: list[list[T]] = [[] for _ in groups]
    alone: list[T] = []
    for item, item_text, bag in zip(items, item_texts, item_bags, strict=True):
        vector = _unit(bag, documents, count)
        total = np.zeros(len(groups))
        shares = np.zeros(len(groups), dtype=bool)  # a term beyond the frames in common
        for term, weight in vector.items():
            if term in vocabulary:
                total += weight * sums[vocabulary[term]]
                if term not in _FRAME_STEMS:
                    shares |= sums[vocabulary[term]] > 0
        total[~shares] = 0.0
        for index in by_values.get(signature(item_text), []):
            similar = sum(w * vectors[index].get(term, 0.0) for term, w in vector.items())
            total[owner[index]] += max(0.0, SAME_VALUES - similar)
        average = total / sizes
        best = int(np.argmax(average))
        if average[best] >= JOIN_SIMILARITY:
            joined[best].append(item)
        else:
            alone.append(item)
    merged = [[*extra, *group] for extra, group in zip(joined, groups, strict=True)]
    return sorted(merged, key=len, reverse=True), alone


def _unit(bag: Counter[str], documents: Counter[str], count: int) -> dict[str, float]:
    """A bag's TF-IDF weights over `count` bags (a frame word's a quarter), scaled to
    length 1."""
    weights = {
        term: (_FRAME_WEIGHT if term in _FRAME_STEMS else 1.0)
        * n
        * math.log(1 + count / documents[term])
        for term, n in bag.items()
    }
    norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
    return {term: w / norm for term, w in weights.items()}


def _similarities(bags: list[Counter[str]]) -> np.ndarray:
    """Cosine similarity of every pair, on TF-IDF weights over these bags; 0 for a pair
    that shares only frame words ("*nennen* Sie X", "*nennen* Sie Y" ask for different
    things, however rare the frame is among these bags and common their topics)."""
    vocabulary = {term: i for i, term in enumerate(sorted({t for bag in bags for t in bag}))}
    documents = Counter(term for bag in bags for term in bag)
    matrix = np.zeros((len(bags), max(1, len(vocabulary))))
    for row, bag in enumerate(bags):
        for term, weight in _unit(bag, documents, len(bags)).items():
            matrix[row, vocabulary[term]] = weight
    content = matrix.copy()
    for term, column in vocabulary.items():
        if term in _FRAME_STEMS:
            content[:, column] = 0.0
    return np.where(content @ content.T > 0.0, matrix @ matrix.T, 0.0)


def signature(text: str) -> frozenset[str]:
    """What makes two texts one in any language: the values they state, and what the
    agent gave back once they asked (`ASKED` in the text, "⟦asked: date time⟧")."""
    asked = {f"asked:{kind}" for found in ASKED.findall(text) for kind in found.split()}
    return specifics(ASKED.sub(" ", text)) | frozenset(asked)


def asked_note(kinds: Sequence[str]) -> str:
    """How a grouped text says what the agent gave back once asked (see `signature`)."""
    return f"⟦asked: {' '.join(kinds)}⟧" if kinds else ""


def _same_values(similarity: np.ndarray, values: list[frozenset[str]]) -> None:
    """Two statements of the same values ("8 hours", "8 Stunden") state one fact, in
    whatever language, and two requests that got the same back ask for one thing: they
    count as similar as two close paraphrases."""
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
