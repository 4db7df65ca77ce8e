"""The committed demo checkpoint is what `python -m evoplane.demo.warm_start` makes.

Its provenance names the script version, the config and seed it ran with and the hash of
the demonstrations it trained on; the data is re-derived here from the script and hashed
again, so a change to the demo's world that the checkpoint never saw fails this test (run
the script again and commit its output). The checkpoint must load and write a well-formed
call for a demo prompt.
"""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from evoplane.demo import warm_start, world
from evoplane.demo.warm_start import DEFAULT_OUT, PROVENANCE, SCRIPT_VERSION, WarmStartConfig

pytestmark = pytest.mark.skipif(
    not (DEFAULT_OUT / PROVENANCE).exists(), reason="the demo checkpoint is not built"
)


@pytest.fixture(scope="module")
def provenance() -> dict:
    return json.loads((DEFAULT_OUT / PROVENANCE).read_text())


def test_the_checkpoint_was_made_by_this_script_with_its_defaults(provenance: dict) -> None:
    from evoplane.demo.tiny import TinyModelSpec

    config = WarmStartConfig()
    assert provenance["script"] == "evoplane.demo.warm_start"
    assert provenance["script_version"] == SCRIPT_VERSION
    assert provenance["seed"] == config.seed
    assert provenance["config"] == json.loads(json.dumps(asdict(config)))
    assert provenance["tiny_model"] == asdict(TinyModelSpec(seed=config.seed))
    weights = json.loads((DEFAULT_OUT / "config.json").read_text())
    spec = TinyModelSpec(seed=config.seed)
    assert (weights["hidden_size"], weights["num_hidden_layers"]) == (
        spec.hidden_size,
        spec.layers,
    )


def test_the_training_data_hashes_to_the_recorded_hash(provenance: dict) -> None:
    config = WarmStartConfig()
    demos = warm_start.demonstrations(config.demonstrations, config.seed)
    assert warm_start.data_hash(demos) == provenance["data_sha256"]


def test_the_checkpoint_writes_a_well_formed_call_for_a_demo_prompt() -> None:
    import torch

    from atdp.tool_text import parse_tool_calls
    from evolution.rl.policy import Policy
    from evoplane.demo.tools import Platform

    torch.set_num_threads(1)
    policy = Policy.load(DEFAULT_OUT)
    body = {
        "messages": [
            {"role": "system", "content": world.agent_system("acme")},
            {"role": "user", "content": "Please refund my order."},
        ],
        "tools": Platform().specs(world.tools_of("acme")),
    }
    view = warm_start.model_view(body, world.BASE_INSTRUCTIONS, [], [])
    (completion,) = policy.sample(
        policy.prompt_ids(view["messages"], view["tools"]), 1, max_new_tokens=96, temperature=0
    )
    content, calls = parse_tool_calls(completion.text)
    assert not (content or "").strip() and len(calls) == 1, completion.text
    assert calls[0]["function"]["name"] == "refund"
    assert json.loads(calls[0]["function"]["arguments"]) == {"order_id": "latest"}
