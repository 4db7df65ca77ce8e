"""The skill scenario end to end on the real stack (Temporal dev server, PostgreSQL, MLflow,
and the gateway, worker and control API processes `evoplane up` runs): managers walk an
onboarding agent through a four-step procedure and every one of them has to tell it, at the
third step, what it left out. The control plane sees only that traffic; it must diagnose a
`skill`, distil it, gate it and promote it, and fresh onboardings must then go right first
time."""

from __future__ import annotations

import asyncio

import pytest

from evoplane.demo.stack import stack
from evoplane.scenarios.catalog import by_name
from evoplane.scenarios.runner import ScenarioResult, run_scenarios
from evoplane.settings import Settings

pytestmark = [pytest.mark.temporal, pytest.mark.slow, pytest.mark.timeout(480)]


def play(settings: Settings) -> list[ScenarioResult]:
    env = {
        "EVOPLANE_DATA_DIR": str(settings.data_dir),
        "EVOPLANE_DATABASE_URL": settings.registry_url,
    }
    with stack(settings) as endpoints:
        return run_scenarios(endpoints, by_name(["procedure_guided"]), settings_env=env, seed=3)


async def test_a_procedure_users_keep_guiding_becomes_a_promoted_skill(
    stack_settings: Settings,
) -> None:
    (result,) = await asyncio.to_thread(play, stack_settings)
    assert result.passed, result.why
    (evolution,) = result.evolutions
    assert (evolution.action, evolution.outcome) == ("skill", "promoted"), evolution.reason
    assert evolution.before <= 0.5 <= 0.9 <= evolution.after
    assert evolution.gates[0] == "replay:pass", evolution.gates
