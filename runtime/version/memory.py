"""Which memory items a request gets: BM25 over their content (`runtime.version.bm25`), by
words, else by subwords; the index the gateway, the replay gate and the memory operator share.
Embedding retrieval can be added behind the same `search` signature.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from runtime.version.bm25 import Bm25, subwords, tokenize

__all__ = ["MemoryIndex", "RetrievableItem", "ScoredItem"]


class RetrievableItem(Protocol):
    """What retrieval reads of a memory item (`registry.MemoryItem` is one): its content, to
    match and inject, and its id, to fingerprint what was retrieved."""

    @property
    def id(self) -> uuid.UUID: ...

    @property
    def content(self) -> str: ...


@dataclass(frozen=True)
class ScoredItem:
    item: RetrievableItem
    score: float


class MemoryIndex:
    """BM25 over memory items' content, by words, else by subwords; built once per memory
    snapshot, searched per request.

    Args:
        k1: term-frequency saturation; b: length normalisation (the usual 1.2 and 0.75).
    """

    def __init__(
        self, items: Sequence[RetrievableItem], *, k1: float = 1.2, b: float = 0.75
    ) -> None:
        self._items = list(items)
        self._words = Bm25([tokenize(item.content) for item in self._items], k1, b)
        self._subwords = Bm25([subwords(item.content) for item in self._items], k1, b)

    def __len__(self) -> int:
        return len(self._items)

    def search(self, query: str, k: int) -> list[ScoredItem]:
        """The top `k` items with a positive score, best first; ties keep index order."""
        if k <= 0:
            return []
        ranked = self._words.ranked(tokenize(query)) or self._subwords.ranked(subwords(query))
        return [ScoredItem(self._items[i], score) for score, i in ranked[:k]]
