"""Memory: retrieval at the gateway (BM25) and the memory operator."""

from evolution.memory.retrieval import MemoryIndex, ScoredItem, tokenize

__all__ = ["MemoryIndex", "ScoredItem", "tokenize"]
