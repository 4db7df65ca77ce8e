"""The scenario suite's CI subset end to end, on the real stack: Temporal dev server,
PostgreSQL, MLflow, and the gateway, worker and control API processes `evoplane up` runs.

Three worlds the control plane was not built on, each with a failure the demo never shows:
a fact every clinic's patients correct through a streaming agent's feedback widget, an
identity API whose every call is refused (only the refusals say the format), and travellers
who ask in their own words, with a plain score of 0, for something the instructions never
say. The whole suite (`evoplane bench scenarios`) is a benchmark: benchmarks/RESULTS.md.
"""

from __future__ import annotations

import asyncio

import pytest

from evoplane.demo.stack import stack
from evoplane.scenarios.catalog import CI_SUBSET, by_name
from evoplane.scenarios.runner import ScenarioResult, run_scenarios
from evoplane.settings import Settings

pytestmark = [pytest.mark.temporal, pytest.mark.slow, pytest.mark.timeout(480)]


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
