"""Weight deployment when aliases move: SGLang servers load the version's weights (here the
named SGLang stand-in, since SGLang needs a GPU; tests/gpu runs the real server)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.evolution import EvolutionActivities
from activities.models import AliasChange, RollbackRequest
from atdp import ModelRef, VersionSpec
from registry import create_agent, current_aliases, register_version, transaction, upgrade
from tests.support.sglang_standin import SGLangStandIn

AGENT = "support-bot"


@pytest.fixture
def sglang() -> Iterator[SGLangStandIn]:
    with SGLangStandIn(model_path="/ckpt/base", weight_version="base") as server:
        server.checkpoints |= {"/ckpt/rl-1", "/ckpt/rl-2", "/ckpt/adapter-1"}
        yield server


@pytest.fixture
def activities(engine) -> EvolutionActivities:
    upgrade(engine)
    return EvolutionActivities(engine, None, replay=None)


def spec(server: SGLangStandIn, checkpoint: str | None, adapter: str | None = None):
    model = ModelRef(
        engine="sglang",
        base_url=server.base_url,
        model="tiny",
        checkpoint=checkpoint,
        adapter=adapter,
    )
    return VersionSpec(model=model)


def versions(engine, server: SGLangStandIn, *specs: VersionSpec) -> list[str]:
    with transaction(engine) as session:
        create_agent(session, AGENT, spec(server, None), author="test")
        made = [current_aliases(session, AGENT).stable]
        parent = made[0]
        for each in specs:
            parent = register_version(
                session, AGENT, each, parent_id=parent, author="test", reason="rl"
            ).id
            made.append(parent)
    return made


def move(activities, alias: str, version: str | None, weight: float | None = None):
    change = AliasChange(
        agent=AGENT, alias=alias, version_id=version, weight=weight, actor="test", reason="test"
    )
    return ActivityEnvironment().run(activities.move_alias, change)


def admin_posts(server: SGLangStandIn) -> list[str]:
    return [path for path, _ in server.admin_calls]


def test_promotion_loads_the_checkpoint_and_rollback_restores_the_previous(
    engine, activities, sglang
) -> None:
    base, first, second = versions(
        engine, sglang, spec(sglang, "/ckpt/rl-1"), spec(sglang, "/ckpt/rl-2")
    )
    move(activities, "stable", first)
    assert sglang.weight_version == first
    assert admin_posts(sglang) == [
        "/pause_generation",
        "/update_weights_from_disk",
        "/continue_generation",
    ]
    move(activities, "stable", first)  # a retried activity: already served, nothing sent
    assert len(sglang.admin_calls) == 3
    move(activities, "stable", second)
    assert sglang.weight_version == second
    ActivityEnvironment().run(activities.rollback, RollbackRequest(agent=AGENT, reason="regressed"))
    assert sglang.weight_version == first  # the previous stable's weights are back
    assert [body.get("model_path") for _, body in sglang.admin_calls if body.get("model_path")] == [
        "/ckpt/rl-1",
        "/ckpt/rl-2",
        "/ckpt/rl-1",
    ]


def test_a_lora_canary_shares_stable_server_and_a_full_weight_canary_may_not(
    engine, activities, sglang
) -> None:
    _, lora, full = versions(
        engine,
        sglang,
        spec(sglang, "/ckpt/adapter-1", adapter="support-bot@rl1"),
        spec(sglang, "/ckpt/rl-2"),
    )
    move(activities, "canary", lora, weight=0.25)
    assert sglang.adapters == {"support-bot@rl1": "/ckpt/adapter-1"}
    assert sglang.weight_version == "base"  # stable's weights untouched
    with pytest.raises(ApplicationError, match="full-weight canary on stable's SGLang"):
        move(activities, "canary", full, weight=0.25)
    with transaction(engine) as session:
        assert current_aliases(session, AGENT).canary == lora  # the refused move did not happen
    assert sglang.weight_version == "base"


def test_local_and_hosted_versions_need_no_deployment(engine, activities, sglang) -> None:
    local = VersionSpec(model=ModelRef(engine="local", checkpoint="/ckpt/rl-1", model="tiny"))
    _, version = versions(engine, sglang, local)
    move(activities, "stable", version)
    assert sglang.admin_calls == []
