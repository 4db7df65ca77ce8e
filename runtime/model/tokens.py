"""Each token's text and bytes, as the vocabulary has them: what a logprob entry reports
and what the tool-call guide reads."""

from __future__ import annotations

from typing import Any

from runtime.model.bytes import byte_level_table

__all__ = ["TokenTable"]


class TokenTable:
    """The text of each token id decoded alone, and its bytes; each made once, on first use.

    Args:
        tokenizer: a transformers tokenizer.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.byte_level = byte_level_table(tokenizer)  # char -> byte, for byte-level BPE
        self._known: dict[int, tuple[str, list[int]]] = {}
        self._texts: list[str] = []

    def token(self, token_id: int) -> tuple[str, list[int]]:
        """A token's text and its bytes."""
        known = self._known.get(token_id)
        if known is None:
            text = self.tokenizer.decode([token_id])
            known = self._known[token_id] = (text, self._bytes(token_id, text))
        return known

    def texts(self) -> list[str]:
        """The text of every token id, in id order."""
        if not self._texts:
            self._texts = [self.tokenizer.decode([i]) for i in range(len(self.tokenizer))]
        return self._texts

    def _bytes(self, token_id: int, text: str) -> list[int]:
        # A byte-level piece's characters are its bytes; a partial UTF-8 character decodes
        # to U+FFFD, so its text alone would not give them back.
        piece = self.tokenizer.convert_ids_to_tokens(token_id)
        table = self.byte_level
        if table and isinstance(piece, str) and all(char in table for char in piece):
            return [table[char] for char in piece]
        return list(text.encode())
