"""The window analysis on a busy agent's window in PostgreSQL: more corrected answers than
one statement takes parameters (65,535), so no read may bind the window's ids one by one."""

from __future__ import annotations

from datetime import timedelta

from activities.evidence import read_window
from atdp import utcnow
from evolution.analysis import measure_window
from evolution.window import WindowSpec
from registry import create_db_engine, transaction, upgrade, write_batch
from tests.conftest import postgres_schema_url
from tests.evolution.window_helpers import (
    AGENT,
    TENANTS,
    Recorder,
    implicit_correction,
    trajectory,
    world,
)

SESSIONS = 700
ANSWERS = 100  # per session: 70,000 corrected answers in all


def test_analysis_counts_more_corrections_than_a_statement_takes_parameters(
    postgres_schema: str,
) -> None:
    engine = create_db_engine(postgres_schema_url(postgres_schema))
    upgrade(engine)
    version = world(engine)
    start = utcnow() - timedelta(hours=1)
    recorder, rewards = Recorder(), []
    sessions = [
        trajectory(TENANTS[i % len(TENANTS)], start + timedelta(seconds=i), version=version)
        for i in range(SESSIONS)
    ]
    for session in sessions:
        for _ in range(ANSWERS):
            answer = recorder.llm_call(session, cost=0.001)
            rewards.append(implicit_correction(session, answer))
        # A correction that names a tool call is not a corrected answer.
        rewards.append(implicit_correction(session, recorder.tool_call(session, "lookup_order")))
    with transaction(engine) as session:  # COPY, as the capture writer writes
        write_batch(session, sessions, recorder.events, rewards)

    with transaction(engine) as session:
        stats = measure_window(read_window(session, WindowSpec(agent=AGENT, since=start)))

    assert stats.trajectories == SESSIONS
    assert stats.llm_calls == SESSIONS * ANSWERS
    assert stats.tool_calls == SESSIONS
    assert stats.correction_rate.successes == SESSIONS * ANSWERS
    assert stats.correction_rate.rate == 1.0
    engine.dispose()
