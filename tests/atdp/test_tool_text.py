"""The tool-call guide: while a call's head is written, only offered names can come out."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from atdp.tool_text import TOOL_CALL_OPEN, ToolCallGuide, offered_tool_names, parse_tool_calls

OPENING = f'{TOOL_CALL_OPEN}{{"name": "'
ASCII = ["\n", *(chr(c) for c in range(32, 127))]

names = st.lists(st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True), min_size=1, max_size=5)
# Single characters, so every text can be written, plus longer pieces as real vocabularies
# have (some crossing the closing quote).
extra_pieces = st.lists(st.text(alphabet='abcdeklnoprstu_",: ', min_size=2, max_size=6))


@given(names, extra_pieces, st.text(alphabet=ASCII, max_size=20), st.data())
def test_any_walk_through_allowed_tokens_writes_an_offered_name(offered, extra, said, data):
    pieces = ASCII + extra
    guide = ToolCallGuide(offered, pieces)
    text = said + TOOL_CALL_OPEN
    for _ in range(100):
        allowed = guide.allowed(text)
        if allowed is None:
            break
        text += pieces[data.draw(st.sampled_from(allowed))]
    else:
        pytest.fail(f"still inside a call's head after 100 tokens: {text!r}")
    head = text[len(said) + len(TOOL_CALL_OPEN) :]
    opening = next(o for o in ('{"name": "', '\n{"name": "') if head.startswith(o))
    name, rest = head[len(opening) :].split('"', 1)
    assert name in offered and rest.startswith(', "arguments": ')


@given(names)
def test_every_offered_name_can_be_written_and_closed(offered) -> None:
    guide = ToolCallGuide(offered, ASCII)
    for name in offered:
        text = TOOL_CALL_OPEN
        for char in f'{{"name": "{name}", "arguments": ':
            allowed = guide.allowed(text)
            assert allowed is not None and ASCII.index(char) in allowed, (name, text)
            text += char
        assert guide.allowed(text) is None
        _, calls = parse_tool_calls(text + '{"x": 1}}</tool_call>')
        assert calls[0]["function"]["name"] == name


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Your order has shipped.",
        OPENING + 'lookup_order", "arguments": ',  # the arguments are the model's own
        OPENING + 'lookup_order", "arguments": {"order_id": "',
        '<tool_call>{"arguments": {}, "name": "',  # off the form: written unguided
        OPENING + "zzz",
        OPENING + 'escalate", "arguments": {}}</tool_call> Done.',
    ],
)
def test_outside_a_calls_head_nothing_is_constrained(text) -> None:
    assert ToolCallGuide(["lookup_order", "escalate"], ASCII).allowed(text) is None


def test_a_guide_without_names_constrains_nothing() -> None:
    guide = ToolCallGuide([], ASCII)
    assert not guide.active and guide.allowed(TOOL_CALL_OPEN) is None


def test_a_head_only_continues_toward_offered_names() -> None:
    pieces = [*ASCII, '",', "ord", '{"']
    guide = ToolCallGuide(["lookup_order", "cancel_order"], pieces)
    assert sorted(pieces[i] for i in guide.allowed("Sure." + TOOL_CALL_OPEN)) == [
        "\n",
        "{",
        '{"',
    ]
    assert [pieces[i] for i in guide.allowed(TOOL_CALL_OPEN + '{"na')] == ["m"]
    assert sorted(pieces[i] for i in guide.allowed(OPENING)) == ["c", "l"]
    assert [pieces[i] for i in guide.allowed(OPENING + "lookup_")] == ["o", "ord"]
    assert sorted(pieces[i] for i in guide.allowed(OPENING + "lookup_order")) == ['"', '",']


def test_restrict_masks_only_the_rows_inside_a_name() -> None:
    torch = pytest.importorskip("torch")
    guide = ToolCallGuide(["lookup_order"], ASCII)
    logits = torch.zeros(2, len(ASCII) + 3)  # models' logits may be wider than the vocabulary
    restricted = guide.restrict(logits, [OPENING + "look", "plain text"])
    assert torch.isfinite(restricted[0]).tolist() == [p == "u" for p in ASCII] + [False] * 3
    assert torch.equal(restricted[1], logits[1])
    assert guide.restrict(logits, ["plain", "text"]) is logits


def _tool(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {}}}


@pytest.mark.parametrize(
    ("tools", "choice", "expected"),
    [
        ([_tool("a"), _tool("b")], None, ["a", "b"]),
        ([_tool("a"), _tool("b")], "auto", ["a", "b"]),
        ([_tool("a"), _tool("b")], "required", ["a", "b"]),
        ([_tool("a"), _tool("b")], {"type": "function", "function": {"name": "b"}}, ["b"]),
        ([_tool("a"), {"type": "function"}, "junk"], None, ["a"]),
        (None, None, []),
    ],
)
def test_offered_tool_names(tools, choice, expected) -> None:
    assert offered_tool_names(tools, choice) == expected
