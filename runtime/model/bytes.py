"""GPT-2's byte table: how byte-level BPE vocabularies write every byte as a printable
character, so a token's text in the vocabulary maps back to its exact bytes."""

from __future__ import annotations

from typing import Any

__all__ = ["byte_level_table", "byte_table"]

# The bytes GPT-2 writes as themselves; every other byte gets a character from 256 on.
_PRINTABLE = frozenset(
    {*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)}
)


def byte_table() -> dict[str, int]:
    """GPT-2's printable-character -> byte map: printable bytes keep their character, the
    others take the characters from 256 on, in byte order."""
    table: dict[str, int] = {}
    shifted = 0
    for byte in range(256):
        if byte in _PRINTABLE:
            table[chr(byte)] = byte
        else:
            table[chr(256 + shifted)] = byte
            shifted += 1
    return table


def byte_level_table(tokenizer: Any) -> dict[str, int] | None:
    """`byte_table()` when `tokenizer`'s vocabulary is byte-level BPE; None otherwise."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if type(getattr(backend, "decoder", None)).__name__ != "ByteLevel":
        return None
    return byte_table()
