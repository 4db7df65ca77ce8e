"""Harness cases may be tool calls: a routing mistake users blamed on the tool it used is
replayed with its tools, and the harness that makes the model choose the right one wins.

The upstream is the scenario suite's scripted model in its helpdesk world, where two
sign-in tools are described alike: it picks either, until its instructions name the
user's situation (a lesson taken from the users' own complaints).
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from datetime import timedelta

import pytest
import sqlalchemy as sa

from activities.operators import make_harness_operator, read_harness_cases
from atdp import ChatMessage, MessageAction, Observation, ToolCall, ToolSpec, utcnow
from evolution.decision import Action, DecisionRecord
from evolution.window import WindowSpec
from evoplane.scenarios.model import ScriptedModel
from evoplane.scenarios.upstream import ModelServer
from evoplane.scenarios.worlds.helpdesk import helpdesk
from registry import create_db_engine, current_aliases, get_version, transaction, upgrade
from tests.evolution.window_helpers import AGENT, Recorder, feedback, store, trajectory, world

dspy = pytest.importorskip("dspy")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

COMPLAINT = "You reset my password but the problem is my two-factor app."


@pytest.fixture
def registry(tmp_path) -> Iterator[sa.Engine]:
    engine = create_db_engine(f"sqlite:///{tmp_path / 'registry.db'}")
    upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def desk():
    """The world and its model, served like any OpenAI-compatible upstream."""
    world_ = helpdesk(vague_tools=True)
    with ModelServer({"desk-llm": ScriptedModel(world_, noise=0.0)}) as server:
        yield world_, server


def called(rec: Recorder, t, world_, task, tool: str):
    """The llm call that answered `task` with a call of `tool`, as the gateway records it."""
    call = rec.llm_call(t)
    specs = [
        ToolSpec(name=s["function"]["name"], description=s["function"]["description"],
                 parameters=s["function"]["parameters"])
        for s in world_.tool_specs()
    ]  # fmt: skip
    recorded = call.model_copy(
        update={
            "observation": Observation(
                messages=[ChatMessage(role="user", content=task.text)], tools=specs
            ),
            "action": MessageAction(
                tool_calls=[ToolCall(id=f"c{len(rec.events)}", name=tool, arguments="{}")]
            ),
        }
    )
    rec.events[rec.events.index(call)] = recorded
    return recorded


def routing_window(engine, world_) -> WindowSpec:
    """Authenticator resets sent to the password tool (users complained), and password
    resets that went right."""
    base, rec, trajectories, rewards = utcnow(), Recorder(), [], []
    rng = random.Random(4)
    for i in range(8):
        task = world_.remember(world_.kinds["authenticator"].make(rng, "acme"))
        t = trajectory("acme", base - timedelta(minutes=40 - i))
        call = called(rec, t, world_, task, "reset_login")
        rec.user_message(t, COMPLAINT, call)
        rewards += feedback(t, call, thumbs="down")
        trajectories.append(t)
    for i in range(4):
        task = world_.remember(world_.kinds["password"].make(rng, "globex"))
        t = trajectory("globex", base - timedelta(minutes=20 - i))
        call = called(rec, t, world_, task, "reset_login")
        rewards += feedback(t, call, thumbs="up")
        trajectories.append(t)
    store(engine, trajectories, rec.events, rewards)
    return WindowSpec(agent=AGENT, since=base - timedelta(hours=1), until=base)


def test_a_tool_routing_failure_is_fixed_by_the_harness_that_routes_right(registry, desk):
    world_, server = desk
    world(registry)
    window = routing_window(registry, world_)
    with transaction(registry) as session:
        cases = read_harness_cases(session, window)
        parent = get_version(session, current_aliases(session, AGENT).stable)
    blamed = [c for c in cases if c.tool_case and not c.succeeded]
    assert len(blamed) == 8 and all(c.recorded_tools == ["reset_login"] for c in blamed)
    assert all(len(c.tools) == 3 for c in blamed)

    def lm_factory(version_id: str):
        return dspy.LM("openai/desk-llm", api_base=server.base_url, api_key="k", cache=False)

    operator = make_harness_operator(lm_factory, max_bootstrapped_demos=0, max_labeled_demos=0)
    decided = DecisionRecord(
        action=Action.HARNESS, reason="test", target=None, scores=[], signals={},
        window=window, stable_version=parent.id,
    )  # fmt: skip
    with transaction(registry) as session:
        candidate = operator.run(session, parent, decided, window)

    evidence = candidate.evidence
    assert evidence["failures"]["after"] == 1.0 > evidence["failures"]["before"]
    assert COMPLAINT in candidate.spec.harness.instructions
