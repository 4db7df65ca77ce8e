"""The verifiable tool-call reward, and the pair of rewards a weights job uses."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from activities.training import job_rewards
from evolution.rl.rewards import ToolCallReward
from evolution.rl.samples import RecordedPrompt
from evolution.rl.settings import TrainingSettings


def _tool(name: str, required: str) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {
                "type": "object",
                "properties": {required: {"type": "string"}},
                "required": [required],
            },
        },
    }


PROMPT = RecordedPrompt(
    event_id="e1",
    tenant="acme",
    messages=[{"role": "user", "content": "cancel order 42"}],
    tools=[_tool("cancel_order", "order_id"), _tool("lookup_order", "order_id")],
    reference={"name": "cancel_order", "arguments": {"order_id": "42"}},
)


def call(name: str, arguments: dict | str) -> str:
    payload = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return f'<tool_call>{{"name": "{name}", "arguments": {payload}}}</tool_call>'


RIGHT = call("cancel_order", {"order_id": "42"})
WRONG_TOOL = call("lookup_order", {"order_id": "42"})
BROKEN = [
    "I will cancel it.",
    call("loncel_order", {"order_id": "42"}),  # a blended name: no such tool
    call("cancel_order", {"id": "42"}),  # the right tool, arguments off its schema
    call("lookup_order", {"id": "42"}),  # a wrong tool, arguments off its schema
    call("cancel_order", '{"order_id": '),  # not JSON
    RIGHT + RIGHT,  # two calls
    "Sure. " + RIGHT,  # text beside the call
]


@pytest.mark.parametrize("credit", [0.0, 0.1, 0.5])
def test_right_wrong_and_broken_calls_are_told_apart(credit) -> None:
    reward = ToolCallReward(format_credit=credit)
    assert reward(PROMPT, RIGHT) == 1.0
    assert reward(PROMPT, WRONG_TOOL) == credit
    assert [reward(PROMPT, text) for text in BROKEN] == [0.0] * len(BROKEN)


def test_matching_arguments_gives_other_values_only_the_format_credit() -> None:
    reward = ToolCallReward(match_arguments=True, format_credit=0.1)
    assert reward(PROMPT, RIGHT) == 1.0
    assert reward(PROMPT, call("cancel_order", {"order_id": "43"})) == 0.1


# The demo's release 2: the platform's cancel_order takes `id`; a tool-schema version shows
# the model `order_id` again and renames it back (`argument_map` model name -> agent's).
RENAMED = replace(
    PROMPT,
    tools=[_tool("cancel_order", "order_id"), _tool("lookup_order", "order_id")],
    agent_tools=[
        _tool("cancel_order", "id"),
        _tool("lookup_order", "order_id"),
        _tool("refund", "order_id"),  # the agent's, blocked by the version: never offered
    ],
    argument_maps={"cancel_order": {"order_id": "id"}},
)


@pytest.mark.parametrize("credit", [0.0, 0.1])
def test_a_call_is_judged_as_the_agent_receives_it(credit) -> None:
    reward = ToolCallReward(format_credit=credit)
    assert reward(RENAMED, RIGHT) == 1.0  # renamed to `id` on its way to the agent
    # Written in the agent's own name: no map renames it, and the agent's tool accepts it.
    assert reward(RENAMED, call("cancel_order", {"id": "42"})) == 1.0
    assert reward(RENAMED, WRONG_TOOL) == credit
    assert reward(RENAMED, call("cancel_order", {"ref": "42"})) == 0.0
    assert reward(RENAMED, call("lookup_order", {"id": "42"})) == 0.0  # no map for it
    assert reward(RENAMED, call("refund", {"order_id": "42"})) == 0.0  # the gateway drops it
    # Matching arguments compares both calls under the agent's names.
    matching = ToolCallReward(match_arguments=True, format_credit=0.1)
    assert matching(RENAMED, call("cancel_order", {"id": "42"})) == 1.0
    assert matching(RENAMED, call("cancel_order", {"id": "43"})) == 0.1


def test_a_prompt_without_a_reference_earns_nothing() -> None:
    unlabelled = replace(PROMPT, reference=None)
    assert ToolCallReward(format_credit=0.1)(unlabelled, RIGHT) == 0.0


@given(st.text(max_size=80))
def test_any_text_is_scored_in_the_unit_interval(text) -> None:
    assert ToolCallReward(format_credit=0.1)(PROMPT, text) in {0.0, 0.1, 1.0}


def test_a_weights_job_trains_with_format_credit_and_measures_strictly() -> None:
    training, held_out = job_rewards(TrainingSettings(format_credit=0.25))
    assert training(PROMPT, WRONG_TOOL) == 0.25
    assert held_out(PROMPT, WRONG_TOOL) == 0.0
    assert training(PROMPT, RIGHT) == held_out(PROMPT, RIGHT) == 1.0
