"""Builders for windows of recorded traffic: trajectories, the events the gateway records,
and the rewards it harvests, shaped as the gateway and /v1/feedback shape them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy.engine import Engine

from atdp import (
    BinaryValue,
    CategoricalValue,
    ChatMessage,
    Event,
    EventKind,
    EventMetadata,
    Observation,
    Outcome,
    OutcomeStatus,
    ReplayInfo,
    Reward,
    RewardSource,
    ScalarValue,
    ToolCall,
    ToolCallAction,
    ToolSpec,
    Traffic,
    Trajectory,
    TrajectoryOutcome,
    VersionRefs,
    new_id,
)
from evolution.decision import Action, DecisionRecord
from evolution.window import FailureCluster, FailureKind, WindowSpec
from registry import (
    add_rewards,
    current_aliases,
    insert_events,
    record_trajectory,
    register_version,
    transaction,
)
from tests.registry.helpers import seed_world, spec

AGENT = "support-bot"
TENANTS = ("acme", "globex", "initech")


def world(engine: Engine) -> str:
    """An agent serving three tenants; returns its first (stable) version id."""
    seed_world(engine, tenants=TENANTS, agent=AGENT)
    with transaction(engine) as session:
        return current_aliases(session, AGENT).stable


def new_version(engine: Engine, instructions: str) -> str:
    with transaction(engine) as session:
        return register_version(session, AGENT, spec(instructions), author="test", reason="test").id


def trajectory(
    tenant: str,
    at: datetime,
    *,
    task_type: str | None = None,
    version: str | None = None,
    status: OutcomeStatus | None = None,
    session: str | None = None,
) -> Trajectory:
    return Trajectory(
        id=new_id(),
        tenant=tenant,
        agent=AGENT,
        session=session or f"s-{uuid.uuid4().hex[:8]}",
        task_type=task_type,
        versions=VersionRefs(agent_version_id=version),
        started_at=at,
        outcome=TrajectoryOutcome(status=status) if status else None,
    )


class Recorder:
    """Appends events to trajectories in order, the way the capture writer does."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._seq: dict[uuid.UUID, int] = {}

    def _event(self, trajectory: Trajectory, kind: EventKind, **fields) -> Event:
        seq = self._seq.get(trajectory.id, 0)
        self._seq[trajectory.id] = seq + 1
        traffic = fields.pop("traffic", Traffic.USER)
        cost = fields.pop("cost", None)
        event = Event(
            id=new_id(),
            trajectory_id=trajectory.id,
            seq=seq,
            kind=kind,
            created_at=trajectory.started_at + timedelta(seconds=seq),
            metadata=EventMetadata(
                tenant=trajectory.tenant,
                session=trajectory.session,
                traffic=traffic,
                cost_usd=cost,
            ),
            replay=ReplayInfo(replay_class="approximate", reason="test"),
            **fields,
        )
        self.events.append(event)
        return event

    def llm_call(
        self,
        trajectory: Trajectory,
        *,
        tools: Sequence[str] = (),
        cost: float | None = None,
        traffic: Traffic = Traffic.USER,
    ) -> Event:
        return self._event(
            trajectory,
            EventKind.LLM_CALL,
            observation=Observation(
                messages=[ChatMessage(role="user", content="help me")],
                tools=[ToolSpec(name=name) for name in tools],
            ),
            cost=cost,
            traffic=traffic,
        )

    def tool_call(
        self,
        trajectory: Trajectory,
        tool: str,
        *,
        arguments: dict | None = None,
        error_class: str | None = None,
        success: bool | None = None,
        message: str | None = None,
        returned: object = None,
        call_id: str | None = None,
        parent: Event | None = None,
    ) -> Event:
        failed = error_class is not None or success is False
        return self._event(
            trajectory,
            EventKind.TOOL_CALL,
            parent_id=parent.id if parent else None,
            action=ToolCallAction(
                call=ToolCall(
                    id=call_id or f"call-{uuid.uuid4().hex[:8]}",
                    name=tool,
                    arguments=json.dumps(arguments or {}),
                )
            ),
            outcome=Outcome(
                tool_return=returned,
                error_class=error_class,
                error_message=message,
                success=not failed if success is None else success,
            ),
        )

    def opening(self, trajectory: Trajectory, text: str) -> Event:
        """The user's first message of a trajectory (it answers no call)."""
        return self._event(
            trajectory,
            EventKind.USER_MESSAGE,
            observation=Observation(messages=[ChatMessage(role="user", content=text)]),
        )

    def user_message(self, trajectory: Trajectory, text: str, parent: Event) -> Event:
        return self._event(
            trajectory,
            EventKind.USER_MESSAGE,
            parent_id=parent.id,
            observation=Observation(messages=[ChatMessage(role="user", content=text)]),
        )


def _reward(trajectory: Trajectory, event: Event | None, **fields) -> Reward:
    values = {
        "id": new_id(),
        "tenant": trajectory.tenant,
        "trajectory_id": trajectory.id,
        "event_id": event.id if event else None,
        "source": RewardSource.EXPLICIT,
        "created_at": trajectory.started_at + timedelta(minutes=5),
    }
    values.update(fields)
    return Reward(**values)


def score(trajectory: Trajectory, value: float) -> Reward:
    """An explicit scalar judgement of the whole trajectory."""
    return _reward(trajectory, None, name="user_feedback", value=ScalarValue(value=value))


def task_success(trajectory: Trajectory, success: bool) -> Reward:
    """What /v1/events records for a reported task outcome."""
    return _reward(
        trajectory,
        None,
        name="task_success",
        value=BinaryValue(value=success),
        source=RewardSource.TEST,
    )


def implicit_correction(trajectory: Trajectory, llm_call: Event, *, regenerate=False) -> Reward:
    """What proxy.signals records when the next turn corrects (or regenerates) an answer."""
    critique = (
        "the same prompt was sent again (regenerate)"
        if regenerate
        else "the next user turn corrects the answer"
    )
    return _reward(
        trajectory,
        llm_call,
        name="user_accepted",
        value=BinaryValue(value=False),
        critique=critique,
        source=RewardSource.IMPLICIT_NEXT_TURN,
        confidence=0.4 if regenerate else 0.5,
    )


def feedback(
    trajectory: Trajectory,
    event: Event | None = None,
    *,
    thumbs: str | None = None,
    category: str | None = None,
    critique: str | None = None,
    correction: str | None = None,
) -> list[Reward]:
    """The rewards one /v1/feedback report becomes (same target, same time)."""
    at = trajectory.started_at + timedelta(minutes=7)
    common = {"created_at": at, "critique": critique}
    rewards = []
    if thumbs is not None:
        rewards.append(
            _reward(
                trajectory,
                event,
                name="user_feedback",
                value=BinaryValue(value=thumbs == "up"),
                **common,
            )
        )
    if category is not None:
        rewards.append(
            _reward(
                trajectory,
                event,
                name="user_feedback",
                value=CategoricalValue(value=category),
                **common,
            )
        )
    if correction:
        rewards.append(
            _reward(
                trajectory,
                event,
                name="correction",
                value=BinaryValue(value=False),
                critique=correction,
                created_at=at,
            )
        )
    return rewards


def store(
    engine: Engine,
    trajectories: Sequence[Trajectory],
    events: Sequence[Event] = (),
    rewards: Sequence[Reward] = (),
) -> None:
    with transaction(engine) as session:
        for item in trajectories:
            record_trajectory(session, item)
        insert_events(session, list(events))
        add_rewards(session, list(rewards))


def failure_cluster(kind: FailureKind, key: str, **fields) -> FailureCluster:
    """A cluster of one failing trajectory of tenant acme, `fields` aside."""
    shape = dict(count=1, trajectories=1, share=0.1, tenants=["acme"], task_types=["unknown"])
    shape |= dict(tool_setups=["none"], example_event_ids=[])
    return FailureCluster(kind=kind, key=key, **(shape | fields))


def decision_for(
    window: WindowSpec, action: Action, target: FailureCluster | None = None
) -> DecisionRecord:
    """A decision to take `action` on `window`'s traffic, aimed at `target`."""
    return DecisionRecord(
        action=action,
        reason="test",
        target=target,
        scores=[],
        signals={},
        window=window,
        stable_version=None,
    )
