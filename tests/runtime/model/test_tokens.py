"""A token's bytes: GPT-2's byte table maps back every byte, and a token that is part of a
UTF-8 character reports its own bytes, not those of U+FFFD."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from runtime.model.bytes import byte_level_table, byte_table
from runtime.model.tokens import TokenTable

TABLE = byte_table()
CHAR_OF = {byte: char for char, byte in TABLE.items()}


def test_the_table_is_gpt2s_byte_alphabet() -> None:
    from tokenizers import pre_tokenizers

    assert sorted(TABLE.values()) == list(range(256))
    assert set(TABLE) == set(pre_tokenizers.ByteLevel.alphabet())
    assert all(char.isprintable() and not char.isspace() for char in TABLE)


@given(st.binary())
def test_any_bytes_round_trip_through_their_printable_characters(data: bytes) -> None:
    written = "".join(CHAR_OF[byte] for byte in data)
    assert bytes(TABLE[char] for char in written) == data


class Vocabulary:
    """A tokenizer of two tokens: the two UTF-8 bytes of "é", one a token."""

    def __init__(self, decoder: object) -> None:
        self.backend_tokenizer = SimpleNamespace(decoder=decoder)
        self.pieces = [CHAR_OF[byte] for byte in "é".encode()]

    def __len__(self) -> int:
        return len(self.pieces)

    def convert_ids_to_tokens(self, token_id: int) -> str:
        return self.pieces[token_id]

    def decode(self, ids: list[int]) -> str:
        return bytes(TABLE[self.pieces[i]] for i in ids).decode(errors="replace")


def test_half_a_character_reports_its_own_byte() -> None:
    from tokenizers import decoders

    tokens = TokenTable(Vocabulary(decoders.ByteLevel()))
    assert tokens.byte_level == TABLE
    assert tokens.token(0) == ("\ufffd", [0xC3])
    assert tokens.token(1) == ("\ufffd", [0xA9])
    assert tokens.texts() == ["\ufffd", "\ufffd"]


def test_other_vocabularies_report_the_utf8_of_the_text() -> None:
    vocabulary = Vocabulary(decoder=None)
    assert byte_level_table(vocabulary) is None
    assert TokenTable(vocabulary).token(0) == ("\ufffd", list("\ufffd".encode()))
