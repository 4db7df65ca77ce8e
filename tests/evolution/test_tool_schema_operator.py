"""The tool-schema operator on recorded windows (SQLite and PostgreSQL): the rule it learns
from successful calls or, when none succeeded, from the tool's refusals, the replay numbers
it reports, renames that round-trip through the gateway's overlays, and the cases where it
must refuse."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from activities.evidence import read_window
from activities.operators import tool_schema_operator
from atdp import EventKind, Observation, ToolSpec, utcnow
from evolution.analysis import measure_window
from evolution.decision import Action, DecisionRecord
from evolution.operators import OperatorError
from evolution.tool_schema import ToolSchemaConfig, infer_pattern, infer_rules
from evolution.window import FailureKind, WindowSpec
from registry import get_version, register_version, transaction
from runtime.version.overlays import apply_overlays, restore_response
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

    successes: argument dicts that worked; failures: (arguments, error) pairs, the error
    a message, or a JSON body the tool returned (then recorded with no message).
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
            said = {"message": message} if isinstance(message, str) else {"returned": message}
            rec.tool_call(t, tool, arguments=arguments, error_class="validation_error", **said)
        trajectories.append(t)
    store(engine, trajectories, rec.events)


def propose(engine, key: str, **options):
    """Analyse the window, aim a decision at cluster `key`, and run the operator."""
    spec = WindowSpec(agent=AGENT, since=utcnow() - 2 * HOUR)
    with transaction(engine) as session:
        stats = measure_window(read_window(session, spec))
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
        return parent, tool_schema_operator(**options).run(session, parent, decision, spec)


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
    # The tool's own example leads (its refusals state the rule); successes follow.
    assert prop["examples"] == ["ORD-000000", *sorted(good)[:2]]
    assert prop["description"].startswith("The order to look up.")
    assert tool.description.startswith(LOOKUP_DESCRIPTION)
    assert '"ORD-000000"' in tool.description and r"^ORD-\d{6}$" in tool.description
    assert tool.argument_map == {}
    evidence = candidate.evidence
    assert evidence["rule_source"] == "refusals"
    assert evidence["learned_from"] == "10 error messages and 12 successful calls"
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
    # The refusals say nothing of what the tool wants: the successes teach it.
    assert candidate.evidence["rule_source"] == "successful calls"


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
        stats = measure_window(read_window(session, spec))
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
        parent = get_version(session, stats.stable_version)
        candidate = operator.run(session, parent, decision, spec)

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


# -- learning from refusals when no call succeeded ----------------------------------------

EMPLOYEE_SCHEMA = {
    "type": "object",
    "properties": {"employee_id": {"type": "string", "description": "Whose record."}},
    "required": ["employee_id"],
}
EMPLOYEE_PATTERN = r"^EMP-\d{5}$"
EMPLOYEE_KEY = "lookup_employee.employee_id:validation_error"


def jsonschema_refusal(parameter: str, prop: dict, value: object) -> str:
    """How a tool that validates with jsonschema words its refusal: path, then message."""
    error = next(
        jsonschema.Draft202012Validator({"properties": {parameter: prop}}).iter_errors(
            {parameter: value}
        )
    )
    return f"{parameter}: {error.message}"


def test_every_call_refused_the_rule_is_learned_from_the_refusals(engine) -> None:
    """After a platform change every call fails; each refusal says what the tool wants."""
    world(engine)
    bad = [f"{10000 + 7 * i}" for i in range(6)] + [f"emp-{i:05d}" for i in range(6)]
    said = [
        lambda v: f"employee_id must match {EMPLOYEE_PATTERN}",
        lambda v: "employee_id: invalid employee id, must look like EMP-12345",
        lambda v: jsonschema_refusal("employee_id", {"pattern": EMPLOYEE_PATTERN}, v),
    ]
    failures = [({"employee_id": v}, said[i % 3](v)) for i, v in enumerate(bad)]
    record_window(
        engine, "lookup_employee", EMPLOYEE_SCHEMA, [], failures, description="Look up an employee."
    )

    parent, candidate = propose(engine, EMPLOYEE_KEY)

    tool = override(candidate, "lookup_employee")
    prop = tool.parameters["properties"]["employee_id"]
    assert prop["pattern"] == EMPLOYEE_PATTERN
    assert prop["examples"] == ["EMP-12345"]  # the tool's own example
    assert prop["description"].startswith("Whose record. `employee_id` must look like")
    assert tool.description.startswith("Look up an employee.") and '"EMP-12345"' in tool.description
    assert not [v for v in bad if is_valid(tool.parameters, {"employee_id": v})]
    assert all(is_valid(tool.parameters, {"employee_id": f"EMP-{n:05d}"}) for n in (0, 4711, 99999))
    evidence = candidate.evidence
    assert (evidence["successful_calls"], evidence["failing_calls"]) == (0, 12)
    assert evidence["rule_source"] == "refusals"
    assert evidence["learned_from"] == "12 error messages"
    assert (evidence["refused_said_wrong"], evidence["refused_said_wrong_rejected"]) == (12, 12)
    assert (evidence["error_examples"], evidence["error_examples_accepted"]) == (["EMP-12345"], 1)
    assert (evidence["failures_rejected_offered"], evidence["failures_rejected_candidate"]) == (
        0,
        12,
    )
    assert f'pattern "{EMPLOYEE_PATTERN}"'.replace("\\", "\\\\") in candidate.changes[0]
    assert candidate.changes[0].endswith("learned from 12 error messages")
    assert any(c.startswith("replay: 12 of 12 refused calls") for c in candidate.changes)
    assert "from 12 error messages" in candidate.summary
    assert parent.spec.tools.tools == {}


def test_fastapi_422_bodies_are_read_as_the_tool_returned_them(engine) -> None:
    """The tool is a FastAPI service: its refusals are real 422 bodies, recorded as returns."""
    from fastapi import FastAPI, Query
    from fastapi.testclient import TestClient

    service = FastAPI()

    @service.get("/employees")
    def employee(employee_id: str = Query(pattern=EMPLOYEE_PATTERN)) -> dict:
        return {"employee_id": employee_id}

    client = TestClient(service)
    bad = [f"{20000 + i}" for i in range(8)]
    bodies = [client.get("/employees", params={"employee_id": v}) for v in bad]
    assert {b.status_code for b in bodies} == {422}
    world(engine)
    failures = [({"employee_id": v}, b.json()) for v, b in zip(bad, bodies, strict=True)]
    record_window(engine, "lookup_employee", EMPLOYEE_SCHEMA, [], failures)

    _, candidate = propose(engine, EMPLOYEE_KEY)

    parameters = override(candidate, "lookup_employee").parameters
    assert parameters["properties"]["employee_id"]["pattern"] == EMPLOYEE_PATTERN
    assert candidate.evidence["failures_rejected_candidate"] == 8
    assert (
        client.get(
            "/employees",
            params={"employee_id": parameters["properties"]["employee_id"]["examples"][0]},
        ).status_code
        == 200
    )


def test_a_closed_set_from_jsonschema_refusals(engine) -> None:
    world(engine)
    schema = {"type": "object", "properties": {"cabin": {"type": "string"}}}
    cabins = ["economy", "premium", "business"]
    bad = ["coach", "first", "Economy", "eco"] * 2
    failures = [({"cabin": v}, jsonschema_refusal("cabin", {"enum": cabins}, v)) for v in bad]
    record_window(engine, "book_flight", schema, [], failures)

    _, candidate = propose(engine, "book_flight.cabin:validation_error")

    prop = override(candidate, "book_flight").parameters["properties"]["cabin"]
    assert prop["enum"] == cabins
    assert '`cabin` must be one of: "economy", "premium", "business".' in prop["description"]
    assert candidate.evidence["refused_said_wrong_rejected"] == 8


def test_a_date_layout_named_in_the_refusals(engine) -> None:
    world(engine)
    schema = {"type": "object", "properties": {"travel_date": {"type": "string"}}}
    bad = ["2026-03-01", "2026-03-02", "03/01/2026", "next friday"]
    failures = [({"travel_date": v}, "travel_date: expected format DD.MM.YYYY") for v in bad]
    record_window(engine, "book_train", schema, [], failures)

    _, candidate = propose(engine, "book_train.travel_date:validation_error")

    parameters = override(candidate, "book_train").parameters
    prop = parameters["properties"]["travel_date"]
    assert prop["pattern"] == r"^\d{2}\.\d{2}\.\d{4}$"
    assert prop["examples"] == ["31.01.2026"]  # a sample of the stated layout
    assert not any(is_valid(parameters, {"travel_date": v}) for v in bad)
    # the layout's sample and a value made from its pattern
    assert candidate.evidence["stated_values_accepted"] == candidate.evidence["stated_values"] == 2


def test_the_rule_from_refusals_is_combined_with_the_few_successes(engine) -> None:
    world(engine)
    good = ["EMP-00001", "EMP-31337"]
    bad = [f"{n}" for n in range(40000, 40006)]
    failures = [({"employee_id": v}, "employee_id: unknown format, e.g. EMP-12345") for v in bad]
    record_window(
        engine, "lookup_employee", EMPLOYEE_SCHEMA, [{"employee_id": v} for v in good], failures
    )

    _, candidate = propose(engine, EMPLOYEE_KEY)  # 2 successes < min_successes (3)

    prop = override(candidate, "lookup_employee").parameters["properties"]["employee_id"]
    assert prop["pattern"] == EMPLOYEE_PATTERN
    assert prop["examples"] == ["EMP-12345", *good]
    assert candidate.evidence["learned_from"] == "6 error messages and 2 successful calls"
    assert candidate.evidence["successes_valid_candidate"] == 2


def test_successes_that_break_what_the_refusals_say_are_a_contradiction(engine) -> None:
    world(engine)
    failures = [
        ({"employee_id": f"{n}"}, f"employee_id must match {EMPLOYEE_PATTERN}") for n in range(5)
    ]
    record_window(engine, "lookup_employee", EMPLOYEE_SCHEMA, [{"employee_id": "X-9"}], failures)

    with pytest.raises(OperatorError, match="successful values break what the tool says"):
        propose(engine, EMPLOYEE_KEY)


def test_the_description_speaks_when_the_refusals_do_not(engine) -> None:
    world(engine)
    schema = {
        "type": "object",
        "properties": {
            "employee_id": {"type": "string", "description": "Staff number, e.g. EMP-12345."}
        },
    }
    failures = [({"employee_id": f"{n}"}, "employee_id: invalid employee") for n in range(5)]
    record_window(engine, "lookup_employee", schema, [], failures)

    _, candidate = propose(engine, EMPLOYEE_KEY)

    prop = override(candidate, "lookup_employee").parameters["properties"]["employee_id"]
    assert prop["pattern"] == EMPLOYEE_PATTERN
    assert candidate.evidence["rule_source"] == "description"
    assert candidate.evidence["learned_from"].startswith(
        "the tool's description (its 5 error messages"
    )


PATIENT_SCHEMA = {
    "type": "object",
    "properties": {"patient": {"type": "string", "description": "Who."}, "day": {"type": "string"}},
    "required": ["patient"],
}


@pytest.mark.parametrize(
    "said",
    [
        "unknown parameter 'patient'; missing required field 'patient_id'",
        "Additional properties are not allowed ('patient' was unexpected)\n"
        "'patient_id' is a required property",
        "got an unexpected keyword argument 'patient'. Did you mean 'patient_id'?",
    ],
)
def test_a_parameter_the_tool_now_knows_by_another_name(engine, said: str) -> None:
    """The tool refuses the agent's name and asks for another: the model is shown the
    tool's name, and no argument map turns it back into the refused one."""
    world(engine)
    failures = [({"patient": f"P-{n}", "day": "2026-03-01"}, said) for n in range(6)]
    record_window(engine, "book_visit", PATIENT_SCHEMA, [], failures)

    _, candidate = propose(engine, "book_visit.patient:validation_error")

    tool = override(candidate, "book_visit")
    assert set(tool.parameters["properties"]) == {"patient_id", "day"}
    assert tool.parameters["properties"]["patient_id"]["description"] == "Who."
    assert tool.parameters["required"] == ["patient_id"]
    assert tool.argument_map == {}
    assert candidate.evidence["renamed_by_tool"] == ["patient", "patient_id"]
    assert candidate.evidence["failures_rejected_candidate"] == 6
    assert any("no argument map" in change for change in candidate.changes)
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "book me in"}],
        "tools": [
            {"type": "function", "function": {"name": "book_visit", "parameters": PATIENT_SCHEMA}}
        ],
    }
    overlaid = apply_overlays(body, candidate.spec)
    sent = overlaid.body["tools"][0]["function"]["parameters"]
    assert set(sent["properties"]) == {"patient_id", "day"}
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "book_visit", "arguments": '{"patient_id": "P-1"}'},
    }
    response = {"choices": [{"message": {"role": "assistant", "tool_calls": [call]}}]}
    restored = restore_response(response, overlaid)
    arguments = restored["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(arguments) == {"patient_id": "P-1"}  # the agent passes the tool's name on


def test_a_parameter_the_tool_says_is_missing_becomes_required(engine) -> None:
    """The model leaves out a parameter the offered schema calls optional; the tool refuses."""
    world(engine)
    schema = {
        "type": "object",
        "properties": {"employee_id": {"type": "string"}, "name": {"type": "string"}},
    }
    failures = [({"name": n}, "missing required parameter 'employee_id'") for n in "ABCD"]
    record_window(engine, "lookup_employee", schema, [], failures)

    _, candidate = propose(engine, EMPLOYEE_KEY)

    tool = override(candidate, "lookup_employee")
    assert tool.parameters["required"] == ["employee_id"]
    assert candidate.evidence["required_by_tool"] is True and candidate.evidence["rule"] == {}
    assert candidate.evidence["failures_rejected_candidate"] == 4
    assert "lookup_employee.employee_id: required, as the tool says" in candidate.changes


def test_an_unknown_parameter_with_no_replacement_named_is_refused(engine) -> None:
    world(engine)
    failures = [({"patient": f"P-{n}"}, "unknown parameter 'patient'") for n in range(4)]
    record_window(engine, "book_visit", PATIENT_SCHEMA, [], failures)

    with pytest.raises(OperatorError, match="refuses book_visit.patient as an unknown parameter"):
        propose(engine, "book_visit.patient:validation_error")


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
