"""A configured judge model reads users' corrections: its kind decides (after a category the
user picked), corrections group by what it says they are about, in any language, and a
garbled reply or a failed call keeps the offline reading.

The end-to-end test wires the analysis activity to a live gateway whose judge agent's
upstream is a stand-in model on loopback (no judge model runs on this machine): the calls
go through the gateway as evaluation traffic, under a key made for them and revoked after.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlmodel import select

from activities.evidence import read_window
from activities.evolution import EvolutionActivities
from activities.models import DecideRequest
from activities.operators import memory_operator
from atdp import Harness, ModelRef, VersionSpec, utcnow
from evolution.analysis import measure_window
from evolution.corrections import (
    JUDGE_PROMPT,
    CorrectionKind,
    JudgeReading,
    correction_groups,
    judge_with,
    parse_reading,
    read_corrections,
)
from evolution.decision import Action, PolicyConfig, decide
from evolution.window import FailureKind, WindowSpec, trajectory_window
from evoplane.scenarios.upstream import ModelServer
from proxy.config import GatewayConfig
from registry import (
    create_agent,
    create_db_engine,
    current_aliases,
    follow_up_turns,
    get_version,
    grant_agent,
    offered_tools,
    set_agent_settings,
    start_evolution,
    transaction,
    upgrade,
    window_rewards,
    window_trajectories,
)
from registry.tables import ApiKeyRow
from tests.evolution.window_helpers import AGENT, Recorder, feedback, store, trajectory, world
from tests.support.gateway import GatewayServer

FACT, INSTRUCTION, OTHER = (
    CorrectionKind.MISSING_FACT,
    CorrectionKind.INSTRUCTION,
    CorrectionKind.OTHER,
)


@given(
    kind=st.sampled_from(list(CorrectionKind)),
    about=st.text(st.characters(categories=["L", "Zs"]), max_size=40),
    before=st.sampled_from(["", "Sure! ", "```json\n", "Here is my reading: "]),
    after=st.sampled_from(["", "\n```", " Hope this helps."]),
)
def test_a_reading_is_found_in_the_reply_however_it_is_wrapped(kind, about, before, after):
    reply = before + json.dumps({"kind": kind.value, "about": about}) + after
    reading = parse_reading(reply)
    assert reading is not None and reading.kind is kind
    assert reading.about == " ".join(about.split()[:8])


@pytest.mark.parametrize(
    "reply", ["", "missing_fact", '{"kind": "complaint"}', "{not json}", '["instruction"]']
)
def test_a_reply_without_a_valid_reading_gives_none(reply) -> None:
    assert parse_reading(reply) is None


def test_a_failed_call_falls_back_and_a_large_window_is_bounded() -> None:
    asked: list[str] = []

    def complete(prompt: str) -> str:
        asked.append(prompt)
        if "boom" in prompt:
            raise ConnectionError("the judge is down")
        return '{"kind": "instruction", "about": "confirm the date"}'

    judge = judge_with(complete, limit=2)
    assert judge(["old", "boom", "new"]) == [
        None,  # over the limit: the oldest keeps the offline reading
        None,  # the call failed
        JudgeReading(INSTRUCTION, "confirm the date"),
    ]
    assert len(asked) == 2


# --- what the judge decides -------------------------------------------------------------

MINUTE = timedelta(minutes=1)
# A stand-in judge: what a model would say of each text (no judge model runs here).
READINGS = {
    "Bitte bestätigen Sie mir das Reisedatum.": ("instruction", "confirm the travel date"),
    "Can you repeat the date so I know you got it right?": (
        "instruction",
        "confirm the travel date",
    ),
    "Pouvez-vous me répéter la date du voyage ?": ("instruction", "confirm the travel date"),
    "That still isn't what I needed.": ("other", "unmet request"),
    "The lounge opens at six.": ("missing_fact", "lounge opening time"),
}


def recorded(engine):
    world(engine)
    base = utcnow() - 30 * MINUTE
    rec, trajectories, rewards = Recorder(), [], []
    for i, text in enumerate(READINGS):
        t = trajectory(("acme", "globex")[i % 2], base + i * MINUTE)
        answer = rec.llm_call(t)
        rec.user_message(t, text, answer)
        rewards += feedback(t, answer, thumbs="down")
        trajectories.append(t)
    store(engine, trajectories, rec.events, rewards)
    return WindowSpec(agent=AGENT, since=base - MINUTE)


def oracle(texts):
    return [JudgeReading(CorrectionKind(READINGS[t][0]), READINGS[t][1]) for t in texts]


def test_the_judge_groups_one_request_across_languages(engine) -> None:
    window = recorded(engine)
    with transaction(engine) as session:
        traffic = trajectory_window(window)
        parts = (
            window_trajectories(session, traffic),
            window_rewards(session, traffic),
            offered_tools(session, traffic),
            follow_up_turns(session, traffic),
        )
    offline = correction_groups(read_corrections(*parts))
    judged = correction_groups(read_corrections(*parts, judge=oracle))

    largest = lambda groups: max(len(g.members) for g in groups if g.kind is INSTRUCTION)  # noqa: E731
    assert largest(offline) < 3  # three languages share no word
    (request,) = [g for g in judged if g.kind is INSTRUCTION]
    assert len(request.members) == 3 and request.key == "confirm date travel"
    assert {g.kind for g in judged} == {INSTRUCTION, OTHER, FACT}


# --- the activity, through a live gateway ---------------------------------------------------


class OracleJudge:
    """A stand-in judge model served like any upstream: it answers from READINGS."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def reply(self, body: dict) -> dict:
        prompt = body["messages"][-1]["content"]
        self.prompts.append(prompt)
        kind, about = READINGS[next(t for t in READINGS if t in prompt)]
        return {"role": "assistant", "content": json.dumps({"kind": kind, "about": about})}


@pytest.fixture
def judge_upstream():
    oracle_judge = OracleJudge()
    with ModelServer({"judge-llm": oracle_judge}) as server:
        yield server, oracle_judge


def test_the_analysis_activity_asks_the_agents_judge_through_the_gateway(
    tmp_path, judge_upstream
) -> None:
    server, oracle_judge = judge_upstream
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    engine = create_db_engine(url)
    upgrade(engine)
    window = recorded(engine)
    judge_spec = VersionSpec(
        model=ModelRef(engine="openai", base_url=server.base_url, model="judge-llm"),
        harness=Harness(instructions=""),
    )
    with transaction(engine) as session:
        create_agent(session, "judge", judge_spec, author="test")
        grant_agent(session, "acme", "judge")
        set_agent_settings(session, AGENT, {"judge": {"agent": "judge"}})
        start_evolution(session, "evo-1", AGENT, scope={}, options={})
    config = GatewayConfig(database_url=url, spool_dir=tmp_path / "spool", catalog_ttl=0.2)
    with GatewayServer(config) as gateway:
        activities = EvolutionActivities(engine, None, None, gateway_url=gateway.base_url)
        decision = activities.decide(
            DecideRequest(
                evolution_id="evo-1",
                mlflow_run_id=None,
                window=window,
                policy=PolicyConfig(min_trajectories=1, min_cluster_trajectories=1),
            )
        )

    top = decision.target
    assert (top.kind, top.key, top.trajectories) == (
        FailureKind.INSTRUCTION,
        "confirm date travel",
        3,
    )
    assert sorted(p for p in oracle_judge.prompts) == sorted(
        JUDGE_PROMPT.format(text=text) for text in READINGS
    )
    with transaction(engine) as session:
        keys = session.exec(select(ApiKeyRow).where(ApiKeyRow.agents.is_not(None))).all()
        made = [k for k in keys if k.agents == ["judge"]]
        assert made and all(k.revoked_at is not None for k in made)  # made for it, revoked


# --- the memory operator reads as the analysis read -----------------------------------------

LOUNGE = {
    "The lounge opens at six.": ("missing_fact", "lounge opening time"),
    "Die Lounge öffnet um sechs Uhr.": ("missing_fact", "lounge opening time"),
    "Le salon ouvre à six heures.": ("missing_fact", "lounge opening time"),
}


def lounge_oracle(texts):
    return [JudgeReading(CorrectionKind(LOUNGE[t][0]), LOUNGE[t][1]) for t in texts]


def test_the_memory_operator_finds_the_judges_cluster_again(engine) -> None:
    world(engine)
    base = utcnow() - 30 * MINUTE
    rec, trajectories, rewards = Recorder(), [], []
    for i, text in enumerate(LOUNGE):
        t = trajectory(("acme", "globex")[i % 2], base + i * MINUTE)
        answer = rec.llm_call(t)
        rec.user_message(t, text, answer)
        rewards += feedback(t, answer, thumbs="down")
        trajectories.append(t)
    store(engine, trajectories, rec.events, rewards)
    window = WindowSpec(agent=AGENT, since=base - MINUTE)
    policy = PolicyConfig(min_trajectories=1, min_cluster_trajectories=1)
    with transaction(engine) as session:
        chosen = decide(measure_window(read_window(session, window), judge=lounge_oracle), policy)
        parent = get_version(session, current_aliases(session, AGENT).stable)
    assert chosen.action is Action.MEMORY and chosen.target.trajectories == 3

    def used(judge) -> int:
        with transaction(engine) as session:
            made = memory_operator(judge).run(session, parent, chosen, window)
        return made.evidence["corrections"]

    assert used(None) < 3  # read offline, the three languages share few words
    assert used(lounge_oracle) == 3  # the whole cluster the analysis chose
