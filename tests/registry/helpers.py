"""Small builders shared by the registry tests."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.engine import Engine

from atdp import (
    Event,
    EventMetadata,
    ModelRef,
    ReplayInfo,
    Reward,
    RewardSource,
    ScalarValue,
    Trajectory,
    VersionSpec,
    new_id,
    utcnow,
)
from registry import create_agent, create_tenant, grant_agent, transaction


def spec(instructions: str = "", model: str = "m") -> VersionSpec:
    from atdp import Harness

    return VersionSpec(
        model=ModelRef(engine="openai", model=model), harness=Harness(instructions=instructions)
    )


def seed_world(engine: Engine, tenants=("acme", "globex"), agent: str = "support-bot") -> None:
    with transaction(engine) as session:
        create_agent(session, agent, spec("Be helpful."), author="test")
        for tenant in tenants:
            create_tenant(session, tenant)
            grant_agent(session, tenant, agent)


def trajectory(
    tenant: str, agent: str = "support-bot", session: str = "s-1", at: datetime | None = None
) -> Trajectory:
    return Trajectory(
        id=new_id(), tenant=tenant, agent=agent, session=session, started_at=at or utcnow()
    )


def event(trajectory: Trajectory, seq: int, **changes) -> Event:
    fields = {
        "id": new_id(),
        "trajectory_id": trajectory.id,
        "seq": seq,
        "kind": "llm_call",
        "created_at": utcnow(),
        "metadata": EventMetadata(tenant=trajectory.tenant, session=trajectory.session),
        "replay": ReplayInfo(replay_class="deterministic"),
    }
    return Event(**{**fields, **changes})


def reward(trajectory: Trajectory, value: float, event: Event | None = None, **changes) -> Reward:
    fields = {
        "id": new_id(),
        "tenant": trajectory.tenant,
        "trajectory_id": trajectory.id,
        "event_id": event.id if event else None,
        "value": ScalarValue(value=value),
        "source": RewardSource.EXPLICIT,
        "created_at": utcnow(),
    }
    fields.update(changes)
    return Reward(**fields)
