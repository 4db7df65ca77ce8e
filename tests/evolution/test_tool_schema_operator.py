"""The tool-schema operator on recorded windows (SQLite and PostgreSQL): the rule it learns
from successful calls, the replay numbers it reports, renames that round-trip through the
gateway's overlays, and the cases where it must refuse."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atdp import EventKind, Observation, ToolSpec, utcnow
from evolution.analysis import analyse_window
from evolution.decision import Action, DecisionRecord
from evolution.operators import OperatorError
from evolution.tool_schema import (
    ToolSchemaConfig,
    infer_pattern,
    infer_rules,
    propose_tool_schema,
    tool_schema_operator,
)
from evolution.window import FailureKind, WindowSpec
from proxy.overlays import apply_overlays, restore_response
from registry import get_version, register_version, transaction
from tests.evolution.window_helpers import AGENT, Recorder, store, trajectory, world

HOUR = timedelta(hours=1)
LOOKUP_SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string", "description": "The order to look up."}},
    "required": ["order_id"],
}
LOOKUP_DESCRIPTION = "Look up an order."


class ToolRecorder(Recorder):
    """A recorder whose llm calls offer tools with their full schemas."""

    def offer(self, trajectory, name: str, parameters: dict, description: str = ""):
        tool = ToolSpec(name=name, description=description or None, parameters=parameters)
        return self._event(trajectory, EventKind.LLM_CALL, observation=Observation(tools=[tool]))


def record_window(engine, tool: str, schema: dict, successes: list, failures: list, **kw) -> None:
    """One trajectory per call: the model is offered `tool`, then the agent calls it.

    successes: argument dicts that worked; failures: (arguments, error message) pairs.
    """
    base = utcnow() - HOUR
    rec = ToolRecorder()
    trajectories = []
    calls = [(args, None) for args in successes] + list(failures)
    for i, (arguments, message) in enumerate(calls):
        t = trajectory(("acme", "globex")[i % 2], base + i * timedelta(seconds=30))
        rec.offer(t, tool, schema, kw.get("description", ""))
        if message is None:
            rec.tool_call(t, tool, arguments=arguments, returned={"ok": True})
        else:
            rec.tool_call(
                t, tool, arguments=arguments, error_class="validation_error", message=message
            )
        trajectories.append(t)
    store(engine, trajectories, rec.events)


def propose(engine, key: str, **options):
    """Analyse the window, aim a decision at cluster `key`, and run the operator."""
    spec = WindowSpec(agent=AGENT, since=utcnow() - 2 * HOUR)
    with transaction(engine) as session:
        stats = analyse_window(session, spec)
        target = next(
            c for c in stats.failures if c.kind is FailureKind.TOOL_ARGUMENT and c.key == key
        )
        decision = DecisionRecord(
            action=Action.TOOL_SCHEMA,
            reason="test",
            target=target,
            scores=[],
            signals={},
            window=spec,
            stable_version=stats.stable_version,
        )
        parent = get_version(session, options.pop("parent", stats.stable_version))
        return parent, propose_tool_schema(session, parent, decision, spec, **options)


def orders_window(engine, successes: int = 12) -> tuple[list[str], list[str]]:
    """Bare numbers fail where "ORD-" numbers succeed; one failure has the right shape."""
    good = [f"ORD-{100000 + 7 * i:06d}" for i in range(successes)]
    bad = [f"{200000 + i:06d}" for i in range(9)] + ["ORD-999999"]
    message = "order_id: invalid order id, expected like ORD-000000"
    record_window(
        engine,
        "lookup_order",
        LOOKUP_SCHEMA,
        [{"order_id": v} for v in good],
        [({"order_id": v}, message) for v in bad],
        description=LOOKUP_DESCRIPTION,
    )
    return good, bad


def override(candidate, tool: str):
    return candidate.spec.tools.tools[tool]


def is_valid(schema: dict, arguments: dict) -> bool:
    cls = jsonschema.Draft202012Validator
    return cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(arguments)


# -- the pattern case -------------------------------------------------------------------


def test_learns_the_order_id_pattern_and_proves_it_by_replay(engine) -> None:
    world(engine)
    good, bad = orders_window(engine)

    parent, candidate = propose(engine, "lookup_order.order_id:validation_error")

    tool = override(candidate, "lookup_order")
    prop = tool.parameters["properties"]["order_id"]
    assert prop["pattern"] == r"^ORD-\d{6}$"
    assert all(is_valid(tool.parameters, {"order_id": v}) for v in good)
    assert [v for v in bad if is_valid(tool.parameters, {"order_id": v})] == ["ORD-999999"]
    assert prop["examples"] == sorted(good)[:3]
    assert prop["description"].startswith("The order to look up.")
    assert tool.description.startswith(LOOKUP_DESCRIPTION)
    assert '"ORD-100000"' in tool.description and r"^ORD-\d{6}$" in tool.description
    assert "expected like ORD-000000" in tool.description  # the tool's own words, as a hint
    assert tool.argument_map == {}
    evidence = candidate.evidence
    assert (evidence["successful_calls"], evidence["failing_calls"]) == (12, 10)
    assert (evidence["successes_valid_candidate"], evidence["failures_rejected_candidate"]) == (
        12,
        9,
    )
    assert (evidence["successes_valid_offered"], evidence["failures_rejected_offered"]) == (12, 0)
    assert "12 of 12 successful calls validate; 9 of 10 failing calls" in evidence["replay"]
    assert any("12 of 12" in change for change in candidate.changes)
    # the parent is untouched; only this tool changed
    assert parent.spec.tools.tools == {}
    assert candidate.spec.model_dump(exclude={"tools"}) == parent.spec.model_dump(exclude={"tools"})


def test_is_deterministic_and_idempotent(engine) -> None:
    world(engine)
    orders_window(engine)
    key = "lookup_order.order_id:validation_error"

    _, first = propose(engine, key)
    _, again = propose(engine, key)
    with transaction(engine) as session:
        child = register_version(session, AGENT, first.spec, author="test", reason="test").id
    _, on_itself = propose(engine, key, parent=child)

    assert again == first
    assert on_itself.spec.content_hash() == first.spec.content_hash()


def test_merges_with_an_existing_override_of_the_tool(engine) -> None:
    stable = world(engine)
    orders_window(engine)
    with transaction(engine) as session:
        spec = get_version(session, stable).spec
        tools = {
            "lookup_order": {"description": "Find an order by id."},
            "refund": {"description": "Refund an order."},
        }
        spec = spec.model_validate({**spec.model_dump(mode="json"), "tools": {"tools": tools}})
        parent = register_version(session, AGENT, spec, author="test", reason="test").id

    _, candidate = propose(engine, "lookup_order.order_id:validation_error", parent=parent)

    assert override(candidate, "refund").description == "Refund an order."
    assert override(candidate, "lookup_order").description.startswith("Find an order by id. ")


# -- enum and date ----------------------------------------------------------------------


def test_a_small_closed_set_becomes_an_enum(engine) -> None:
    world(engine)
    schema = {"type": "object", "properties": {"status": {"type": "string"}}}
    good = ["open", "closed", "pending"] * 3
    bad = ["Closed", "done", "in progress"]
    record_window(
        engine,
        "set_status",
        schema,
        [{"status": v} for v in good],
        [({"status": v}, "status: invalid value") for v in bad],
    )

    _, candidate = propose(engine, "set_status.status:validation_error")

    prop = override(candidate, "set_status").parameters["properties"]["status"]
    assert prop["enum"] == ["closed", "open", "pending"]
    assert "pattern" not in prop
    assert '`status` must be one of: "closed", "open", "pending".' in prop["description"]
    assert candidate.evidence["failures_rejected_candidate"] == 3


def test_dates_get_a_format_and_an_example(engine) -> None:
    world(engine)
    schema = {"type": "object", "properties": {"day": {"type": "string"}}, "required": ["day"]}
    good = [f"2024-05-{d:02d}" for d in range(1, 8)]
    bad = ["05/01/2024", "tomorrow", "2024-5-1"]
    record_window(
        engine,
        "book_visit",
        schema,
        [{"day": v} for v in good],
        [({"day": v}, "day: not a valid date") for v in bad],
    )

    _, candidate = propose(engine, "book_visit.day:validation_error")

    parameters = override(candidate, "book_visit").parameters
    prop = parameters["properties"]["day"]
    assert (prop["format"], prop["pattern"]) == ("date", r"^\d{4}-\d{2}-\d{2}$")
    assert '"2024-05-01"' in prop["description"] and "format date" in prop["description"]
    assert not any(is_valid(parameters, {"day": v}) for v in bad)
    assert not is_valid(parameters, {"day": "2024-02-30"})  # the format, not just the shape
    assert candidate.evidence["failures_rejected_candidate"] == 3


# -- renaming an ambiguous parameter ----------------------------------------------------

ID_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "Which one."},
        "customer_id": {"type": "string"},
    },
    "required": ["id"],
}


def ids_window(engine) -> None:
    """The model puts customer ids into `id`, which wants an order id."""
    good = [{"id": f"ORD-{100 + i:03d}", "customer_id": f"CUS-{i:04d}"} for i in range(6)]
    bad = [({"id": f"CUS-{i:04d}"}, "id: expected an order id like ORD-123") for i in range(4)]
    record_window(engine, "lookup_order", ID_SCHEMA, good, bad)


def test_an_ambiguous_id_is_renamed_and_round_trips_through_the_gateway(engine) -> None:
    world(engine)
    ids_window(engine)

    _, candidate = propose(engine, "lookup_order.id:validation_error")

    tool = override(candidate, "lookup_order")
    assert tool.argument_map == {"order_id": "id"}
    assert set(tool.parameters["properties"]) == {"order_id", "customer_id"}
    assert tool.parameters["required"] == ["order_id"]
    assert tool.parameters["properties"]["order_id"]["pattern"] == r"^ORD-\d{3}$"
    assert candidate.evidence["renamed"] == "order_id"
    assert candidate.evidence["failures_rejected_candidate"] == 4
    assert candidate.evidence["successes_valid_candidate"] == 6

    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "where is my order?"}],
        "tools": [
            {"type": "function", "function": {"name": "lookup_order", "parameters": ID_SCHEMA}}
        ],
    }
    overlaid = apply_overlays(body, candidate.spec)
    sent = overlaid.body["tools"][0]["function"]["parameters"]
    assert "order_id" in sent["properties"] and "id" not in sent["properties"]
    model_args = {"order_id": "ORD-777", "customer_id": "CUS-0001"}
    assert is_valid(sent, model_args)
    response = {
        "choices": [
            {
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {
                                "name": "lookup_order",
                                "arguments": json.dumps(model_args),
                            },
                        }
                    ],
                },
            }
        ]
    }
    restored = restore_response(response, overlaid)
    call = restored["choices"][0]["message"]["tool_calls"][0]["function"]
    assert json.loads(call["arguments"]) == {"id": "ORD-777", "customer_id": "CUS-0001"}
    assert body["tools"][0]["function"]["parameters"] == ID_SCHEMA  # the agent's own is untouched


def test_renaming_is_an_option(engine) -> None:
    world(engine)
    ids_window(engine)
    spec = WindowSpec(agent=AGENT, since=utcnow() - 2 * HOUR)
    operator = tool_schema_operator(ToolSchemaConfig(rename=False))
    with transaction(engine) as session:
        stats = analyse_window(session, spec)
        target = next(c for c in stats.failures if c.key == "lookup_order.id:validation_error")
        decision = DecisionRecord(
            action=Action.TOOL_SCHEMA,
            reason="test",
            target=target,
            scores=[],
            signals={},
            window=spec,
            stable_version=stats.stable_version,
        )
        candidate = operator(session, get_version(session, stats.stable_version), decision, spec)

    tool = override(candidate, "lookup_order")
    assert tool.argument_map == {}
    assert set(tool.parameters["properties"]) == {"id", "customer_id"}
    assert candidate.evidence["renamed"] is None


# -- refusals -------------------------------------------------------------------------


def test_refuses_without_successful_calls_to_learn_from(engine) -> None:
    world(engine)
    bad = [({"order_id": f"{i:06d}"}, "order_id: invalid") for i in range(6)]
    record_window(engine, "lookup_order", LOOKUP_SCHEMA, [], bad)

    with pytest.raises(OperatorError, match="only 0 successful calls of lookup_order"):
        propose(engine, "lookup_order.order_id:validation_error")


def test_refuses_when_no_rule_separates_failures_from_successes(engine) -> None:
    world(engine)
    good = [f"ORD-{i:06d}" for i in range(5)]
    bad = [f"ORD-{900000 + i:06d}" for i in range(3)]  # the right shape: not a format problem
    record_window(
        engine,
        "lookup_order",
        LOOKUP_SCHEMA,
        [{"order_id": v} for v in good],
        [({"order_id": v}, "order_id: invalid order") for v in bad],
    )

    with pytest.raises(OperatorError, match="no rule learned"):
        propose(engine, "lookup_order.order_id:validation_error")


# -- the rule learner, on generated values ----------------------------------------------


@settings(max_examples=60)
@given(
    prefix=st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1, max_size=4),
    separator=st.sampled_from("-_/:#."),
    width=st.integers(3, 8),
    numbers=st.lists(st.integers(0, 10**3 - 1), min_size=2, max_size=15, unique=True),
)
def test_inferred_id_patterns_match_every_success_and_reject_bare_numbers(
    prefix: str, separator: str, width: int, numbers: list[int]
) -> None:
    ids = [f"{prefix}{separator}{n:0{width}d}" for n in numbers]

    pattern = infer_pattern(ids)

    assert pattern is not None
    assert all(re.fullmatch(pattern, value) for value in ids)
    assert not any(re.search(pattern, f"{n:0{width}d}") for n in numbers)
    assert (
        pattern
        == f"^{re.escape(prefix)}{re.escape(separator).replace(chr(92) + '-', '-')}\\d{{{width}}}$"
    )


@settings(max_examples=80)
@given(values=st.lists(st.one_of(st.text(max_size=12), st.integers()), min_size=1, max_size=12))
def test_every_inferred_rule_accepts_every_value_it_was_learned_from(values: list) -> None:
    for rule in infer_rules(values):
        schema = {"type": "object", "properties": {"p": rule}}
        assert all(is_valid(schema, {"p": value}) for value in values), rule
