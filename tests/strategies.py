"""Hypothesis strategies for valid ATDP records, built field by field from the models' rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import strategies as st

from atdp import (
    BinaryValue,
    CategoricalValue,
    ChatMessage,
    Consent,
    DecodingParams,
    Event,
    EventKind,
    EventMetadata,
    Governance,
    HiddenState,
    MessageAction,
    Observation,
    Outcome,
    OutcomeStatus,
    RedactionStatus,
    ReplayClass,
    ReplayInfo,
    ReviewStatus,
    Reward,
    RewardSource,
    ScalarValue,
    TokenUsage,
    ToolCall,
    ToolCallAction,
    ToolSpec,
    Traffic,
    TrainingEligibility,
    Trajectory,
    TrajectoryOutcome,
    UserAction,
    VersionRefs,
)

# Any Unicode text but NUL (refused by the protocol) and lone surrogates (not text).
text = st.text(
    st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=40
)
names = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30)
slugs = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,15}", fullmatch=True)
finite = st.floats(allow_nan=False, allow_infinity=False)
offsets = st.sampled_from(
    [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))]
)
moments = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2100, 1, 1), timezones=offsets
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | finite | text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(text, children, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(text, json_values, max_size=3)


def _optional(strategy):
    return st.none() | strategy


tool_calls = st.builds(ToolCall, id=text, name=names, arguments=text)
messages = st.builds(
    ChatMessage,
    role=st.sampled_from(["system", "developer", "user", "assistant", "tool"]),
    content=st.none() | text | st.lists(json_objects, max_size=2),
    name=_optional(text),
    tool_calls=st.lists(tool_calls, max_size=2),
    tool_call_id=_optional(text),
)
observations = st.builds(
    Observation,
    messages=st.lists(messages, max_size=3),
    tools=st.lists(
        st.builds(
            ToolSpec, name=names, description=_optional(text), parameters=_optional(json_objects)
        ),
        max_size=2,
    ),
    content=_optional(text),
    data=_optional(json_objects),
)


@st.composite
def message_actions(draw):
    token_ids = draw(_optional(st.lists(st.integers(0, 2**31 - 1), max_size=8)))
    logprobs = None
    if token_ids is not None and draw(st.booleans()):
        logprobs = draw(
            st.lists(
                st.floats(max_value=0.0, allow_nan=False, allow_infinity=False),
                min_size=len(token_ids),
                max_size=len(token_ids),
            )
        )
    return MessageAction(
        content=draw(_optional(text)),
        tool_calls=draw(st.lists(tool_calls, max_size=2)),
        finish_reason=draw(_optional(st.sampled_from(["stop", "length", "tool_calls"]))),
        token_ids=token_ids,
        logprobs=logprobs,
    )


actions = message_actions() | st.builds(ToolCallAction, call=tool_calls)
outcomes = st.builds(
    Outcome,
    tool_return=json_values,
    error_class=_optional(names),
    error_message=_optional(text),
    exit_code=_optional(st.integers(-255, 255)),
    user_action=_optional(st.sampled_from(UserAction)),
    success=_optional(st.booleans()),
)


def metadata(tenant: str):
    return st.builds(
        EventMetadata,
        tenant=st.just(tenant),
        session=names,
        traffic=st.sampled_from(Traffic),
        latency_ms=_optional(st.floats(0, 1e6)),
        tokens=_optional(
            st.builds(TokenUsage, prompt=st.integers(0, 10**6), completion=st.integers(0, 10**6))
        ),
        cost_usd=_optional(st.floats(0, 100)),
        decoding=_optional(
            st.builds(
                DecodingParams,
                temperature=_optional(st.floats(0, 2)),
                top_p=_optional(st.floats(0, 1)),
                max_tokens=_optional(st.integers(0, 8192)),
                seed=_optional(st.integers(-(2**63), 2**63 - 1)),
                n=_optional(st.integers(1, 8)),
                stop=_optional(st.lists(text, max_size=2)),
                extra=json_objects,
            )
        ),
        model_checkpoint=_optional(text),
        agent_version_id=_optional(text),
        harness_version=_optional(text),
        prompt_template_fingerprint=_optional(text),
        extra=json_objects,
    )


governance = st.builds(
    Governance,
    redaction=st.sampled_from(RedactionStatus),
    redacted_fields=st.lists(text, max_size=2),
    labels=st.lists(names, max_size=2),
    expires_at=_optional(moments),
    consent=st.sampled_from(Consent),
    review=st.sampled_from(ReviewStatus),
    training=st.sampled_from(TrainingEligibility),
    sealed_ref=_optional(text),
)


@st.composite
def replay_infos(draw):
    cls = draw(st.sampled_from(ReplayClass))
    reason = (
        draw(text.filter(str.strip))
        if cls is not ReplayClass.DETERMINISTIC
        else draw(_optional(text))
    )
    return ReplayInfo(replay_class=cls, reason=reason)


@st.composite
def events(draw, trajectory_id, tenant: str, seq: int | None = None):
    return Event(
        id=draw(st.uuids()),
        trajectory_id=trajectory_id,
        seq=seq if seq is not None else draw(st.integers(0, 2**31 - 1)),
        kind=draw(st.sampled_from(EventKind)),
        parent_id=draw(_optional(st.uuids())),
        created_at=draw(moments),
        observation=draw(_optional(observations)),
        hidden=draw(
            _optional(
                st.builds(
                    HiddenState,
                    harness_fingerprint=_optional(text),
                    plan=_optional(text),
                    reasoning_summary=_optional(text),
                )
            )
        ),
        action=draw(_optional(actions)),
        outcome=draw(_optional(outcomes)),
        metadata=draw(metadata(tenant)),
        governance=draw(governance),
        replay=draw(replay_infos()),
    )


@st.composite
def trajectories(draw, tenant: str, agent: str):
    started = draw(moments)
    ended = draw(
        _optional(st.timedeltas(timedelta(0), timedelta(days=2)).map(lambda d: started + d))
    )
    return Trajectory(
        id=draw(st.uuids()),
        tenant=tenant,
        agent=agent,
        session=draw(names),
        task_type=draw(_optional(names)),
        versions=draw(
            st.builds(VersionRefs, agent_version_id=_optional(text), model=_optional(text))
        ),
        started_at=started,
        ended_at=ended,
        outcome=draw(
            _optional(
                st.builds(
                    TrajectoryOutcome, status=st.sampled_from(OutcomeStatus), detail=_optional(text)
                )
            )
        ),
    )


reward_numbers = st.floats(-1e12, 1e12, allow_nan=False)
reward_values = (
    st.builds(ScalarValue, value=reward_numbers)
    | st.builds(BinaryValue, value=st.booleans())
    | st.builds(CategoricalValue, value=names, score=_optional(reward_numbers))
)


@st.composite
def rewards(draw, tenant: str, trajectory_id, event_ids=()):
    return Reward(
        id=draw(st.uuids()),
        tenant=tenant,
        trajectory_id=trajectory_id,
        event_id=draw(st.sampled_from([None, *event_ids])),
        name=draw(st.sampled_from(["reward", "task_success", "safety"])),
        value=draw(reward_values),
        critique=draw(_optional(text)),
        source=draw(st.sampled_from(RewardSource)),
        confidence=draw(st.floats(0, 1)),
        created_at=draw(moments),
    )
