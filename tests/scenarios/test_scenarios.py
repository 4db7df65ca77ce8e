"""The scenario suite's CI subset end to end, on the real stack: Temporal dev server,
PostgreSQL, MLflow, and the gateway, worker and control API processes `evoplane up` runs.

Five worlds the control plane was not built on, each with a failure the demo never shows:
a fact every clinic's patients correct through a streaming agent's feedback widget, an
identity API whose every call is refused (only the refusals say the format), travellers
who ask in their own words, with a plain score of 0, for something the instructions never
say, and managers who walk an onboarding agent through a four-step procedure and every one
of them has to tell it, at the third step, what it left out (a `skill`, distilled from
that guidance and promoted: fresh onboardings then go right first time), and restaurant
guests who write Japanese and never rate or report anything, and ask back, in varied
words, for the date and time their table was booked for (a harness fix found from their
follow-ups alone, with no score: "success unknown" is not what the window says). The first three
teams each speak another protocol (the clinic's agent Anthropic's Messages API, the
travel agent the Responses API, the helpdesk's chat completions): each evolution is
diagnosed and gated from that protocol's traffic alone. The whole suite
(`evoplane bench scenarios`) is a benchmark: benchmarks/RESULTS.md.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlmodel import select

from atdp import EventKind, protocol_request
from evoplane.scenarios.catalog import CI_SUBSET, by_name
from evoplane.scenarios.runner import ScenarioResult, run_scenarios
from evoplane.settings import Settings
from evoplane.simulation.stack import stack
from registry import create_db_engine, transaction
from registry.tables import EventRow, TrajectoryRow

pytestmark = [pytest.mark.temporal, pytest.mark.slow, pytest.mark.timeout(600)]


def play(settings: Settings) -> list[ScenarioResult]:
    env = {
        "EVOPLANE_DATA_DIR": str(settings.data_dir),
        "EVOPLANE_DATABASE_URL": settings.registry_url,
    }
    with stack(settings) as endpoints:
        return run_scenarios(endpoints, by_name(list(CI_SUBSET)), settings_env=env, seed=3)


async def test_the_ci_subset_of_scenarios_passes_on_the_real_stack(
    stack_settings: Settings,
) -> None:
    results = await asyncio.to_thread(play, stack_settings)

    assert [r.name for r in results] == list(CI_SUBSET)
    failed = [f"{r.name}: {r.why}" for r in results if not r.passed]
    assert not failed, "\n".join(failed)
    for result in results:
        (evolution,) = result.evolutions
        assert evolution.outcome == "promoted", evolution.reason
        assert evolution.before <= 0.5 <= 0.9 <= evolution.after
        # The replay gate ran (with the generic safety suite, judged against the parent).
        assert evolution.gates[0] == "replay:pass", evolution.gates
        assert (evolution.action == "skill") == (result.name == "procedure_guided"), result.name
    assert protocols(stack_settings.registry_url) == {
        "fact-shared": {"messages"},
        "tool-format-none": {"chat"},
        "instruction-free-text": {"responses"},
        "procedure-guided": {"chat"},
        "asked-back-silent": {"chat"},
    }


def protocols(url: str) -> dict[str, set[str]]:
    """The protocols each scenario's user traffic came in on (by agent-name prefix)."""
    engine = create_db_engine(url)
    found: dict[str, set[str]] = {}
    with transaction(engine) as session:
        rows = session.exec(
            select(TrajectoryRow.agent, EventRow.body)
            .join(EventRow, EventRow.trajectory_id == TrajectoryRow.id)
            .where(EventRow.kind == EventKind.LLM_CALL.value, EventRow.traffic == "user")
        )
        for agent, body in rows:
            data = (body.get("observation") or {}).get("data")
            found.setdefault(agent.rsplit("-", 1)[0], set()).add(protocol_request(data)[0])
    engine.dispose()
    return found
