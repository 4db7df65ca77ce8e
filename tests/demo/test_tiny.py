"""The tiny model: a real Qwen2 with a byte tokenizer, built locally and reproducibly."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("transformers")

from evoplane.demo.tiny import TinyModelSpec, byte_tokenizer, init_tiny  # noqa: E402

TOKENIZER = byte_tokenizer()


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_every_text_round_trips_one_token_per_byte(text: str) -> None:
    ids = TOKENIZER.encode(text, add_special_tokens=False)
    assert ids == list(text.encode("utf-8"))
    assert TOKENIZER.decode(ids) == text


def test_chat_template_writes_chatml_with_tool_names_and_calls() -> None:
    messages = [
        {"role": "system", "content": "Help."},
        {"role": "user", "content": "Where is order 7?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": '{"order_id": "7"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "shipped"},
    ]
    tools = [
        {"type": "function", "function": {"name": n, "parameters": {}}}
        for n in ("lookup_order", "refund")
    ]
    text = TOKENIZER.apply_chat_template(
        messages, tools=tools, add_generation_prompt=True, tokenize=False
    )
    assert text == (
        "<|im_start|>system\nHelp.\ntools: lookup_order,refund<|im_end|>\n"
        "<|im_start|>user\nWhere is order 7?<|im_end|>\n"
        '<|im_start|>assistant\n<tool_call>{"name": "lookup_order", "arguments": '
        '{"order_id": "7"}}</tool_call><|im_end|>\n'
        "<|im_start|>tool\nshipped<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    # Without a system message the tool list still reaches the model.
    bare = TOKENIZER.apply_chat_template(messages[1:2], tools=tools, tokenize=False)
    assert bare.startswith("<|im_start|>system\ntools: lookup_order,refund<|im_end|>\n")


def test_same_seed_same_weights_and_the_model_generates(tmp_path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    first = init_tiny(tmp_path / "a", TinyModelSpec(seed=3))
    second = init_tiny(tmp_path / "b", TinyModelSpec(seed=3))
    other = init_tiny(tmp_path / "c", TinyModelSpec(seed=4))
    weights = [(d / "model.safetensors").read_bytes() for d in (first, second, other)]
    assert weights[0] == weights[1] != weights[2]
    assert json.loads((first / "evoplane_tiny.json").read_text())["seed"] == 3

    tokenizer = AutoTokenizer.from_pretrained(first)
    model = AutoModelForCausalLM.from_pretrained(first)
    assert 0.5e6 < sum(p.numel() for p in model.parameters()) < 0.6e6
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, return_tensors="pt"
    )
    ids = prompt["input_ids"] if hasattr(prompt, "keys") else prompt
    out = model.generate(ids, max_new_tokens=5, do_sample=False)
    assert out.shape[1] > ids.shape[1]
    assert torch.equal(out[0, : ids.shape[1]], ids[0])
