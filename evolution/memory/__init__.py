"""Memory: retrieval at the gateway (BM25) and, with E4, the memory operator."""

from evolution.memory.retrieval import MemoryIndex, ScoredItem, tokenize

__all__ = ["MemoryIndex", "ScoredItem", "tokenize"]
