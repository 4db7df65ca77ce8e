"""The replay engine and its scorers, against a deterministic upstream whose answers depend on
the request: deterministic and approximate replay, divergence, simulators, the window."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atdp import ChatMessage, DecodingParams, Event, EventKind, Observation, ReplayInfo, ToolCall
from evolution.gates import GateConfig, Verdict, judge_replay
from evolution.replay import (
    SERVED_TOOLS,
    RecordedOutcome,
    RecordedTrajectory,
    ReplayedTrajectory,
    RequiredFacts,
    ScoringContext,
    ToolCallsSucceeded,
    ToolCallsValid,
    ToolOutput,
    ToolResult,
    combine,
    replay_trajectory,
    replay_window,
    request_body,
    score_replay,
)
from tests.evolution.replay_helpers import (
    LOOKUP_ORDER,
    FactModel,
    Recorder,
    chat_message,
    record,
    tool_spec,
)
from tests.registry.helpers import trajectory

SHIPPED = json.dumps({"status": "shipped"})


def shipped(name: str, arguments: str) -> str:
    return SHIPPED


async def order_then_question() -> list[Event]:
    """A recorded conversation: an order lookup (a tool call), then a question."""
    return await record(
        FactModel(),
        ["Where is order A-1?", "What is the refund window?"],
        system="You are a support agent.\nfact: refund window = 30 days",
        tools=[LOOKUP_ORDER],
        run_tool=shipped,
    )


# --- request_body --------------------------------------------------------------------------

_text = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)))
_call = st.builds(
    ToolCall, id=_text, name=st.from_regex(r"[a-z_]{1,12}", fullmatch=True), arguments=_text
)
_message = st.one_of(
    st.builds(ChatMessage, role=st.sampled_from(["system", "user", "developer"]), content=_text),
    st.builds(
        ChatMessage,
        role=st.just("assistant"),
        content=st.none() | _text,
        tool_calls=st.lists(_call, max_size=3),
    ),
    st.builds(ChatMessage, role=st.just("tool"), content=_text, tool_call_id=_text),
)


@settings(max_examples=60, deadline=None)
@given(messages=st.lists(_message, max_size=6), temperature=st.none() | st.floats(0, 2))
def test_request_body_round_trips_the_recorded_observation(messages, temperature):
    recorder = Recorder(trajectory("acme"))
    event = recorder.add(
        EventKind.LLM_CALL,
        ReplayInfo(replay_class="deterministic"),
        observation=Observation(messages=messages, tools=[tool_spec(LOOKUP_ORDER)]),
        decoding=DecodingParams(temperature=temperature, seed=3, stop=["\n\n"]),
    )
    body = request_body(event)
    assert [chat_message(m) for m in body["messages"]] == messages
    assert body["tools"] == [LOOKUP_ORDER]
    assert body["seed"] == 3 and body["stop"] == ["\n\n"]
    assert body.get("temperature") == temperature
    assert "model" not in body


def test_request_body_refuses_an_event_that_is_not_an_llm_call():
    recorder = Recorder(trajectory("acme"))
    event = recorder.add(EventKind.USER_MESSAGE, ReplayInfo(replay_class="deterministic"))
    with pytest.raises(ValueError, match="not a recorded llm_call"):
        request_body(event)


# --- deterministic -------------------------------------------------------------------------


async def test_deterministic_replay_on_the_same_version_reproduces_every_action():
    events = await order_then_question()
    served = FactModel()
    replayed = await replay_trajectory(events, served, mode="deterministic")
    llm_calls = [e for e in events if e.kind is EventKind.LLM_CALL]
    assert [step.event_id for step in replayed.steps] == [e.id for e in llm_calls]
    assert all(step.matched for step in replayed.steps)
    assert replayed.reproduced and replayed.stopped_reason is None  # user messages don't stop
    assert served.requests == [request_body(e) for e in llm_calls]
    # The repeated tool call keeps its recorded result.
    (result,) = replayed.steps[0].tool_results
    assert (result.tool, result.output, result.error) == ("lookup_order", SHIPPED, None)


async def test_deterministic_replay_on_a_changed_version_does_not_match():
    events = await order_then_question()
    replayed = await replay_trajectory(events, FactModel(id_format="int"), mode="deterministic")
    assert [step.matched for step in replayed.steps] == [False, True, True]
    assert not replayed.reproduced
    assert replayed.steps[0].tool_results == []  # what the new call would get is unknown


# --- approximate ---------------------------------------------------------------------------


async def test_approximate_replay_substitutes_recorded_tool_outputs_while_calls_match():
    events = await order_then_question()
    served = FactModel(call_prefix="new")
    simulated: list[tuple[str, str]] = []
    replayed = await replay_trajectory(
        events, served, mode="approximate", tool_simulator=lambda *a: simulated.append(a) or ""
    )
    assert replayed.reproduced and replayed.diverged_at is None
    after_call = served.requests[1]["messages"]
    assert after_call[-1] == {"role": "tool", "tool_call_id": "new_2", "content": SHIPPED}
    assert after_call[-2]["tool_calls"][0]["id"] == "new_2"
    assert served.requests[2]["messages"][-1]["content"] == "What is the refund window?"
    assert simulated == []
    assert replayed.steps[0].tool_results == [
        ToolResult(
            call_id="new_2",
            tool="lookup_order",
            arguments='{"order_id": "A-1"}',
            output=SHIPPED,
        )
    ]


async def test_approximate_replay_follows_the_new_answers_not_the_recorded_ones():
    events = await record(FactModel(), ["What is the refund window?", "Thanks"], system="Be brief.")
    served = FactModel(facts={"refund window": "30 days"})
    replayed = await replay_trajectory(events, served, mode="approximate")
    assert [step.matched for step in replayed.steps] == [False, True]
    assert served.requests[1]["messages"][-2]["content"] == "The refund window is 30 days."
    assert served.requests[1]["messages"][-1]["content"] == "Thanks"


async def test_approximate_replay_stops_at_divergence_without_a_simulator():
    events = await order_then_question()
    served = FactModel(id_format="int")
    replayed = await replay_trajectory(events, served, mode="approximate")
    assert replayed.diverged_at == 0 and len(replayed.steps) == 1
    assert "diverged at step 0" in replayed.stopped_reason
    assert len(served.requests) == 1


async def test_approximate_replay_continues_with_the_tool_simulator_on_divergence():
    events = await order_then_question()
    seen: list[tuple[str, str]] = []

    async def simulator(name: str, arguments: str) -> str:
        seen.append((name, json.loads(arguments)))
        return json.dumps({"status": "simulated"})

    served = FactModel(id_format="int")
    replayed = await replay_trajectory(events, served, mode="approximate", tool_simulator=simulator)
    assert seen == [("lookup_order", {"order_id": 1})]
    assert replayed.diverged_at is None and replayed.stopped_reason is None
    assert [step.simulated for step in replayed.steps] == [True, False, False]
    assert served.requests[1]["messages"][-1]["content"] == '{"status": "simulated"}'
    assert served.requests[2]["messages"][-1]["content"] == "What is the refund window?"
    (result,) = replayed.steps[0].tool_results
    assert result.simulated and result.arguments == '{"order_id": 1}' and result.error is None


async def test_a_simulator_that_declines_the_tool_stops_the_replay_at_the_divergence():
    events = await order_then_question()
    asked: list[str] = []

    def only_refunds(name: str, arguments: str) -> str | None:
        asked.append(name)
        return "refunded" if name == "refund" else None

    replayed = await replay_trajectory(
        events, FactModel(id_format="int"), mode="approximate", tool_simulator=only_refunds
    )
    assert asked == ["lookup_order"]
    assert replayed.diverged_at == 0 and len(replayed.steps) == 1
    assert "the tool simulator does not simulate it" in replayed.stopped_reason
    assert replayed.steps[0].tool_results == []


async def test_a_simulator_is_never_called_while_the_calls_match():
    events = await order_then_question()
    calls: list[str] = []
    replayed = await replay_trajectory(
        events,
        FactModel(call_prefix="new"),
        mode="approximate",
        tool_simulator=lambda name, arguments: calls.append(name) or "never",
    )
    assert replayed.reproduced and calls == []


async def test_a_simulated_tool_turn_still_receives_the_users_next_message():
    events = await record(
        FactModel(uses_tools=False),
        ["Where is order A-1?", "What is the refund window?"],
        tools=[LOOKUP_ORDER],
    )
    served = FactModel()
    replayed = await replay_trajectory(events, served, mode="approximate", tool_simulator=shipped)
    assert [step.simulated for step in replayed.steps] == [True, False]
    tool_output, user = served.requests[1]["messages"][-2:]
    assert tool_output == {"role": "tool", "tool_call_id": "call_1", "content": SHIPPED}
    assert user == {"role": "user", "content": "What is the refund window?"}


@pytest.mark.parametrize("mode", ["deterministic", "approximate"])
async def test_a_non_replayable_event_stops_the_replay_with_its_reason(mode):
    events = await record(
        FactModel(),
        ["Where is order A-1?"],
        tools=[LOOKUP_ORDER],
        run_tool=shipped,
        tool_replay=ReplayInfo(replay_class="non_replayable", reason="sends the customer a mail"),
    )
    replayed = await replay_trajectory(events, FactModel(), mode=mode)
    assert len(replayed.steps) == 1  # the call after the side effect is not served
    assert "sends the customer a mail" in replayed.stopped_reason
    assert not replayed.reproduced


# --- scorers -------------------------------------------------------------------------------


async def _scores(scorer, events, served, context=ScoringContext(), mode="deterministic"):
    replayed = await replay_trajectory(events, served, mode=mode)
    return await scorer.score(replayed, events, context)


async def test_tool_calls_valid_checks_arguments_against_the_offered_schema():
    events = await order_then_question()
    assert await _scores(ToolCallsValid(), events, FactModel()) == 1.0
    assert await _scores(ToolCallsValid(), events, FactModel(id_format="int")) == 0.0
    no_tools = await record(FactModel(), ["What is the refund window?"])
    assert await _scores(ToolCallsValid(), no_tools, FactModel()) is None


async def test_tool_calls_valid_fails_a_tool_that_was_not_offered():
    events = await order_then_question()

    async def calls_unoffered(body):
        call = {"id": "c", "type": "function", "function": {"name": "delete_order"}}
        call["function"]["arguments"] = json.dumps({"order_id": "A-1"})
        return {"choices": [{"message": {"role": "assistant", "tool_calls": [call]}}]}

    replayed = await replay_trajectory(events, calls_unoffered, mode="deterministic")
    assert await ToolCallsValid().score(replayed, events, ScoringContext()) == 0.0


async def test_tool_calls_valid_judges_against_the_tools_the_version_presented():
    """A version that renames a parameter the agent's own schema still spells the old way
    (the tool now wants the new name) is judged by what it showed the model."""
    events = await order_then_question()
    renamed = {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "parameters": {
                "type": "object",
                "properties": {"order_ref": {"type": "string"}},
                "required": ["order_ref"],
            },
        },
    }

    async def calls_with_the_new_name(body):
        call = {"id": "c", "type": "function", "function": {"name": "lookup_order"}}
        call["function"]["arguments"] = json.dumps({"order_ref": "A-1"})
        message = {"role": "assistant", "tool_calls": [call]}
        return {"choices": [{"message": message}], SERVED_TOOLS: [renamed]}

    replayed = await replay_trajectory(events, calls_with_the_new_name, mode="deterministic")
    assert await ToolCallsValid().score(replayed, events, ScoringContext()) == 1.0
    without = [s.model_copy(update={"response": {"choices": s.response["choices"]}})
               for s in replayed.steps]  # fmt: skip
    stale = replayed.model_copy(update={"steps": without})
    assert await ToolCallsValid().score(stale, events, ScoringContext()) == 0.0


def failing_lookup(name: str, arguments: str) -> str:
    return "Error: order_id must look like A-1"


async def test_tool_calls_succeeded_counts_what_the_tools_answered():
    refused = await record(
        FactModel(),
        ["Where is order A-1?"],
        tools=[LOOKUP_ORDER],
        run_tool=failing_lookup,
    )
    scorer = ToolCallsSucceeded()
    # The same call again gets the recorded refusal; a new call what the simulator says.
    assert await _scores(scorer, refused, FactModel(), mode="approximate") == 0.0
    assert await _scores(scorer, await order_then_question(), FactModel()) == 1.0

    async def scored(simulator) -> float | None:
        replayed = await replay_trajectory(
            refused, FactModel(id_format="int"), mode="approximate", tool_simulator=simulator
        )
        return await scorer.score(replayed, refused, ScoringContext())

    assert await scored(lambda name, arguments: ToolOutput(output="ok")) == 1.0
    assert await scored(lambda name, arguments: ToolOutput(output="no", error="invalid")) == 0.0
    assert await scored(None) is None  # stopped at the divergence: no tool answered
    no_tools = await record(FactModel(), ["What is the refund window?"])
    assert await _scores(scorer, no_tools, FactModel()) is None


async def test_required_facts_scores_the_fraction_stated_in_the_final_answer():
    events = await record(FactModel(), ["What is the refund window?"])
    knows = FactModel(facts={"refund window": "30 Days"})
    assert await _scores(RequiredFacts(["30 days"]), events, knows) == 1.0
    assert await _scores(RequiredFacts(["30 days", "receipt"]), events, knows) == 0.5
    assert await _scores(RequiredFacts(["30 days"]), events, FactModel()) == 0.0
    from_context = ScoringContext(required_facts=["refund window"])
    assert await _scores(RequiredFacts(), events, FactModel(), from_context) == 1.0
    assert await _scores(RequiredFacts(), events, FactModel()) is None


async def test_recorded_outcome_carries_over_only_when_the_replay_reproduced_the_recording():
    events = await record(FactModel(), ["What is the refund window?"])
    knows = FactModel(facts={"refund window": "30 days"})
    rewarded = ScoringContext(recorded_reward=0.8, recorded_success=False)
    assert await _scores(RecordedOutcome(), events, FactModel(), rewarded) == 0.8
    failed = ScoringContext(recorded_success=False)
    assert await _scores(RecordedOutcome(), events, FactModel(), failed) == 0.0
    assert await _scores(RecordedOutcome(), events, knows, failed) is None


def test_combine_is_the_mean_of_the_opinions_given():
    assert combine([1.0, None, 0.5]) == 0.75
    assert combine([None, None]) is None
    assert combine([]) is None


async def test_score_replay_reports_each_scorer_and_refuses_out_of_range_scores():
    events = await record(FactModel(), ["What is the refund window?"])
    replayed = await replay_trajectory(events, FactModel(), mode="deterministic")
    context = ScoringContext(recorded_success=True, required_facts=["refund window"])
    score = await score_replay(replayed, events, [RecordedOutcome(), ToolCallsValid()], context)
    assert score.scores == {"recorded_outcome": 1.0, "tool_calls_valid": None}
    assert score.combined == 1.0

    class Broken:
        name = "broken"

        async def score(self, replayed, recorded, context):
            return 2.0

    with pytest.raises(ValueError, match="scorer broken returned 2.0"):
        await score_replay(replayed, events, [Broken()], context)


def test_a_replayed_trajectory_is_frozen():
    replayed = ReplayedTrajectory(trajectory_id=trajectory("acme").id, mode="approximate", steps=[])
    with pytest.raises(ValueError):
        replayed.diverged_at = 1


# --- the window ----------------------------------------------------------------------------


async def window() -> list[RecordedTrajectory]:
    """Past failures (the refund window was unknown) and known successes (warranty in the
    prompt), over two tenants, recorded on stable."""
    items = []
    for index, tenant in enumerate(["acme", "globex", "acme"]):
        failure = await record(FactModel(), ["What is the refund window?"], tenant=tenant)
        context = ScoringContext(recorded_success=False, required_facts=["30 days"])
        items.append(RecordedTrajectory(failure, False, tenant, context))
        success = await record(
            FactModel(),
            [f"Hello ({index}). What is the warranty?"],
            tenant=tenant,
            system="fact: warranty = 2 years",
        )
        context = ScoringContext(recorded_success=True, required_facts=["2 years"])
        items.append(RecordedTrajectory(success, True, tenant, context))
    return items


async def test_replay_window_shows_a_candidate_that_knows_the_fact_fixes_past_failures():
    progress: list[tuple[int, int]] = []
    result = await replay_window(
        await window(),
        FactModel(),
        FactModel(facts={"refund window": "30 days"}),
        [RecordedOutcome(), RequiredFacts()],
        concurrency=2,
        progress=lambda done, total: progress.append((done, total)),
    )
    assert len(result.cases) == 6 and result.skipped == {}
    failures = [case for case in result.cases if not case.recorded_success]
    assert all(case.candidate_score > case.baseline_score for case in failures)
    successes = [case for case in result.cases if case.recorded_success]
    assert all(case.candidate_score == case.baseline_score == 1.0 for case in successes)
    assert progress[-1] == (6, 6) and len(progress) == 6

    verdict = judge_replay(result.cases, GateConfig(replay_min_cases=3))
    assert verdict.verdict is Verdict.PASS, verdict.reason
    assert sorted(verdict.fixed) == sorted(case.trajectory_id for case in failures)


async def test_replay_window_fails_the_gate_for_a_candidate_that_forgets():
    forgets = FactModel()

    async def candidate(body):  # drops the system prompt, so the warranty is forgotten
        return await forgets(
            {**body, "messages": [m for m in body["messages"] if m["role"] != "system"]}
        )

    result = await replay_window(
        await window(), FactModel(), candidate, [RecordedOutcome(), RequiredFacts()]
    )
    verdict = judge_replay(result.cases, GateConfig(replay_min_cases=3))
    assert verdict.verdict is Verdict.FAIL
    assert len(verdict.broken) == 3


async def test_replay_window_skips_and_counts_trajectories_no_scorer_judged():
    items = await window()
    plain = [(item.events, item.recorded_success, item.tenant) for item in items]
    knows = FactModel(facts={"refund window": "30 days"})
    result = await replay_window(plain, FactModel(), knows, [RecordedOutcome()])
    # The candidate changes the failures' answers: the recorded outcome says nothing of them.
    assert len(result.cases) == 3 and all(case.recorded_success for case in result.cases)
    assert len(result.skipped) == 3
    assert all("the candidate" in reason for reason in result.skipped.values())
