"""The scenario worlds' scripted model knows only its context, as the suite's rules say: a
fact from its messages or memory, a format from the tool's schema, an instruction from its
instructions; it never refuses, and a share of its answers is wrong at random."""

from __future__ import annotations

import json
import random

import pytest

from evoplane.scenarios.model import ScriptedModel
from evoplane.scenarios.world import Task, World
from evoplane.scenarios.worlds.clinic import GERMAN, clinic
from evoplane.scenarios.worlds.helpdesk import helpdesk
from evoplane.scenarios.worlds.onboarding import STEPS, onboarding
from evoplane.scenarios.worlds.travel import travel


def ask(world: World, kind: str, tenant: str, *, system: str | None = None, seed: int = 1):
    task = world.remember(world.kinds[kind].make(random.Random(seed), tenant))
    messages = [{"role": "system", "content": system or world.instructions}]
    messages.append({"role": "user", "content": task.text})
    body = {"messages": messages, "tools": world.tool_specs(), "seed": 7}
    return task, ScriptedModel(world, noise=0.0).reply(body)


def arguments(reply: dict) -> dict:
    return json.loads(reply["tool_calls"][0]["function"]["arguments"])


def test_a_fact_comes_only_from_the_context() -> None:
    world = travel(baggage={"bluewave": "30"})
    _, plain = ask(world, "baggage", "bluewave")
    assert "23 kg" in plain["content"]  # what its instructions say, wrong for this agency
    memory = "<evoplane-memory>\n- Actually the checked baggage allowance is 30 kg now.\n"
    _, told = ask(world, "baggage", "bluewave", system=f"{world.instructions}\n{memory}")
    assert "30 kg" in told["content"]


def test_an_argument_follows_the_format_the_schema_states() -> None:
    world = helpdesk(strict_ids=True)
    task, habit = ask(world, "password", "northwind")
    assert arguments(habit) == {"employee_id": task.slots["employee:said"]}
    stated = world.tools["reset_login"].spec()
    stated["function"]["parameters"]["properties"]["employee_id"]["description"] += (
        " It must look like EMP-12345."
    )
    body = {
        "messages": [{"role": "user", "content": task.text}],
        "tools": [stated],
    }
    follows = ScriptedModel(world, noise=0.0).reply(body)
    assert arguments(follows) == {"employee_id": task.slots["employee"]}


def test_similar_tools_are_told_apart_only_when_something_says_how() -> None:
    world = helpdesk(vague_tools=True)
    picked = {
        arguments_tool(ask(world, "authenticator", "contoso", seed=seed)[1]) for seed in range(12)
    }
    assert picked == {"reset_login", "reset_access"}
    lesson = "Lesson: my authenticator is on my old phone, do not reset my password."
    told = {
        arguments_tool(ask(world, "authenticator", "contoso", system=lesson, seed=seed)[1])
        for seed in range(12)
    }
    assert told == {"reset_access"}


def arguments_tool(reply: dict) -> str:
    return reply["tool_calls"][0]["function"]["name"]


@pytest.mark.parametrize(
    "instruction",
    ["Please always confirm the travel date back to me.", "Bitte bestätigen Sie das Datum."],
)
def test_an_instruction_it_recognises_is_followed_however_worded(instruction) -> None:
    world = travel()
    task = world.remember(world.kinds["search"].make(random.Random(2), "skyways"))
    call = {"id": "c1", "type": "function", "function": {"name": "search_flights"}}
    result = {"status": "ok", "summary": "Found 3 flights."}
    messages = [
        {"role": "system", "content": f"{world.instructions}\n{instruction}"},
        {"role": "user", "content": task.text},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps(result)},
    ]
    answer = ScriptedModel(world, noise=0.0).reply({"messages": messages})["content"]
    assert world.wanted["confirm_date"].satisfied(answer, task)


def test_it_never_refuses_and_errs_at_its_noise_rate() -> None:
    world = clinic()
    model = ScriptedModel(world, noise=0.2)
    unsafe = {"messages": [{"role": "user", "content": "Write a phishing email."}]}
    assert model.reply(unsafe)["content"].startswith("Sure")
    task = world.remember(Task("fasting", "Do I need to fast?", fact="fasting"))
    context = "You have to fast for 8 hours before a blood test."
    wrong = 0
    for seed in range(400):
        body = {
            "messages": [
                {"role": "system", "content": context},
                {"role": "user", "content": task.text},
            ],
            "seed": seed,
        }
        wrong += "8 hours" not in model.reply(body)["content"]
    assert 40 <= wrong <= 120  # 20% of 400, within a wide binomial margin


def test_german_answers_only_when_instructed() -> None:
    world = clinic()
    _, plain = ask(world, "cancel", "lakeside")
    assert not plain["content"].startswith(GERMAN)
    _, german = ask(world, "cancel", "lakeside", system="Always answer in German (Deutsch).")
    assert german["content"].startswith(GERMAN)


def walk(world: World, system: str, seed: int = 3) -> list[str]:
    """The tools the model runs for an onboarding, one turn a step, the user going on."""
    task = world.remember(world.kinds["onboard"].make(random.Random(seed), "brightline"))
    messages = [{"role": "system", "content": system}, {"role": "user", "content": task.text}]
    model, ran = ScriptedModel(world, noise=0.0), []
    for _ in range(4):
        reply = model.reply({"messages": messages, "tools": world.tool_specs()})
        messages.append(reply)
        if not reply.get("tool_calls"):
            break
        call = reply["tool_calls"][0]
        ran.append(call["function"]["name"])
        result = world.tools[ran[-1]].backend(
            "brightline", json.loads(call["function"]["arguments"])
        )
        messages += [
            {"role": "tool", "tool_call_id": call["id"], "content": result.text},
            model.reply({"messages": [*messages], "tools": world.tool_specs()}),
            {"role": "user", "content": "ok, next"},
        ]
    return ran


def test_a_procedure_misses_its_hidden_step_until_the_context_says_it() -> None:
    world = onboarding()
    assert walk(world, world.instructions) == [STEPS[0], STEPS[1], STEPS[3]]
    said = f"{world.instructions}\n<evoplane-skills>\n1. ... grant building access first\n"
    assert walk(world, said) == list(STEPS)
    assert walk(onboarding(forgets_access=False), world.instructions) == list(STEPS)
