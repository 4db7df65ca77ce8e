"""Serving and training render a request to the same token ids (no train/serve skew).

The same recorded requests, in the shapes agents send (a developer message, content parts,
tools, an assistant's tool call and its result), go through the local engine's rendering
and the RL policy's; the ids must be equal, or a model is trained on other prompts than it
is served with.
"""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from evolution.rl.policy import Policy  # noqa: E402
from evoplane.demo.tiny import TinyModelSpec, init_tiny  # noqa: E402
from proxy.engines.local import load_model, prompt_ids  # noqa: E402
from runtime.model import template_message  # noqa: E402

LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup_order",
        "description": "Find an order.",
        "parameters": {"type": "object", "properties": {"id": {"type": "string"}}},
    },
}
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "lookup_order", "arguments": '{"id": "A-17"}'},
}
REQUESTS = [
    {
        "messages": [
            {"role": "developer", "content": "Answer in one sentence."},
            {"role": "user", "content": "Where is my order?"},
        ]
    },
    {
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "You help Acme's shop."}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Is this "},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
                    {"type": "text", "text": "parcel mine?"},
                ],
            },
        ]
    },
    {
        "messages": [
            {"role": "user", "content": "Where is A-17?"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "shipped"}'},
        ],
        "tools": [LOOKUP],
    },
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return init_tiny(tmp_path_factory.mktemp("tiny"), TinyModelSpec(seed=5))


@pytest.mark.parametrize("request_body", REQUESTS, ids=["developer", "parts", "tool_result"])
def test_serving_and_training_render_a_request_alike(checkpoint, request_body) -> None:
    served = prompt_ids(load_model(checkpoint), request_body)
    trained = Policy.load(checkpoint).prompt_ids(
        request_body["messages"], request_body.get("tools")
    )
    assert served == trained


def test_the_shapes_templates_do_not_know_are_mapped(checkpoint) -> None:
    loaded = load_model(checkpoint)
    developer, parts, _ = REQUESTS
    as_system = [{**developer["messages"][0], "role": "system"}, developer["messages"][1]]
    assert prompt_ids(loaded, developer) == prompt_ids(loaded, {"messages": as_system})
    joined = template_message(parts["messages"][1])["content"]
    assert joined == "Is this parcel mine?"
