"""The scripted upstream's context-dependent behaviours that replay and operator tests rely
on: seeded sampling, schema-following tool arguments, answers from the system prompt."""

from __future__ import annotations

import json

from tests.support.upstream import Behaviour, completion


def reply(body: dict, behaviour: Behaviour) -> dict:
    return completion(body, "c", "scripted-model", behaviour)["choices"][0]["message"]


def text(body: dict, behaviour: Behaviour) -> str:
    return reply(body, behaviour)["content"]


QUESTION = {"messages": [{"role": "user", "content": "hello"}]}
SAMPLING = Behaviour(sampling=True)


def test_seeded_sampling_is_a_function_of_the_seed_and_the_context() -> None:
    seeded = {**QUESTION, "temperature": 0.7, "seed": 1}
    assert text(seeded, SAMPLING) == text(seeded, SAMPLING)
    assert text(seeded, SAMPLING).startswith("echo: hello ~ ")
    assert text({**seeded, "seed": 2}, SAMPLING) != text(seeded, SAMPLING)
    assert text({**seeded, "model": "other"}, SAMPLING) != text(seeded, SAMPLING)
    other_context = {**seeded, "messages": [{"role": "user", "content": "hello!"}]}
    assert text(other_context, SAMPLING).split(" ~ ")[1] != text(seeded, SAMPLING).split(" ~ ")[1]
    unseeded = {**QUESTION, "temperature": 0.7}
    assert len({text(unseeded, SAMPLING) for _ in range(5)}) > 1
    assert text(QUESTION, SAMPLING) == "echo: hello"  # greedy decoding samples nothing
    assert text(seeded, Behaviour()) == "echo: hello"  # off unless asked for


def tool_request(arguments: dict, parameters: dict) -> dict:
    tool = {"type": "function", "function": {"name": "book", "parameters": parameters}}
    content = f"call book with {json.dumps(arguments)}"
    return {"messages": [{"role": "user", "content": content}], "tools": [tool]}


def arguments(body: dict, behaviour: Behaviour = Behaviour(follows_schema=True)) -> dict:
    return json.loads(reply(body, behaviour)["tool_calls"][0]["function"]["arguments"])


def schema(**properties: dict) -> dict:
    return {"type": "object", "properties": properties}


def test_tool_arguments_follow_what_the_schema_describes() -> None:
    described = schema(
        order_id={"type": "string", "examples": ["ORD-100000"]},
        ref={"type": "string", "description": 'The ref, e.g. "R/0001".'},
        status={"type": "string", "enum": ["in_progress", "closed"]},
        day={"type": "string", "format": "date"},
        note={"type": "string", "pattern": "^N[0-9]+$"},
    )
    given = {"order_id": "123456", "ref": "7", "status": "In Progress", "day": "05/01/2024"}
    assert arguments(tool_request({**given, "note": "12"}, described)) == {
        "order_id": "ORD-123456",
        "ref": "R/7",
        "status": "in_progress",
        "day": "2024-05-01",
        "note": "12",  # a bare regex is not read
    }
    plain = schema(order_id={"type": "string"}, day={"type": "string"})
    assert arguments(tool_request(given, plain)) == given  # nothing to follow: as asked
    assert arguments(tool_request(given, described), Behaviour()) == given  # off by default


def test_an_argument_the_schema_renamed_goes_to_the_one_matching_parameter() -> None:
    renamed = schema(order_id={"type": "string"}, customer_id={"type": "string"})
    asked = {"id": "A-1", "customer_id": "C-1"}
    assert arguments(tool_request(asked, renamed)) == {"order_id": "A-1", "customer_id": "C-1"}
    ambiguous = {"id": "A-1"}  # order_id or customer_id: left as asked
    assert arguments(tool_request(ambiguous, renamed)) == {"id": "A-1"}


def test_after_a_tool_result_the_model_answers_in_text() -> None:
    body = tool_request({"id": "A-1"}, schema(id={"type": "string"}))
    call = reply(body, Behaviour())["tool_calls"][0]
    body["messages"] += [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "shipped"},
    ]
    assert "tool_calls" not in reply(body, Behaviour())


def test_fact_answers_come_from_the_system_prompt() -> None:
    facts = Behaviour(answers="facts")
    system = "You help Acme.\nOur opening hours are 9 to 5.\n- The refund window is 30 days."
    asked = {
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": "How long is the refund window?"},
        ]
    }
    assert text(asked, facts) == "The refund window is 30 days."
    asked["messages"][-1]["content"] = "What are the opening hours?"
    assert text(asked, facts) == "Our opening hours are 9 to 5."
    asked["messages"][-1]["content"] = "Do you ship to Mars?"
    assert text(asked, facts) == "I don't know."
