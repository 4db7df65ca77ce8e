"""Event bodies are stored encoded (`registry.codec`) and every reader gets the whole ATDP
documents back: the codec's round trip on any event, and each reader against the documents
a multi-turn trajectory was written with, through the capture's write path."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from activities.evidence import recorded_cases
from atdp import (
    ChatMessage,
    Event,
    EventKind,
    EventMetadata,
    HiddenState,
    MessageAction,
    Observation,
    Outcome,
    ReplayInfo,
    ToolCall,
    ToolCallAction,
    ToolSpec,
    new_id,
    utcnow,
)
from evolution.rl.samples import record_prompts, recorded_prompts
from evolution.window import WindowSpec
from registry import (
    TrajectoryWindow,
    export_records,
    get_event,
    get_events,
    get_stored_response,
    offered_tool_lists,
    offered_tools,
    training_records,
    transaction,
    window_events,
    write_batch,
)
from registry.bodies import RECENT, offered_tools_of
from registry.codec import Columns, Earlier, decode, encode, may_refer, reference
from registry.export import _record
from registry.tables import EventRow
from registry.windows import replies
from tests.registry.helpers import reward, seed_world, trajectory
from tests.strategies import events as any_events
from tests.strategies import messages as any_messages
from tests.strategies import metadata as any_metadata
from tests.strategies import text as any_text


def _json(event: Event) -> dict:
    return event.model_dump(mode="json")


DAY = timedelta(hours=20)  # may cross midnight: then no reference


@st.composite
def conversations(draw) -> list[Event]:
    """A trajectory's events: llm_calls that each carry the conversation so far on, with
    whatever else in between (any kind, metadata, governance, time)."""
    first = draw(any_events(new_id(), "acme", seq=0))
    found = [first]
    for seq in range(1, draw(st.integers(1, 6))):
        previous = found[-1]
        if draw(st.booleans()):  # anything
            found.append(draw(any_events(previous.trajectory_id, "acme", seq=seq)))
            continue
        observation = previous.observation or Observation()
        added = draw(st.lists(any_messages, max_size=2))
        answer = previous.action if isinstance(previous.action, MessageAction) else None
        if answer is not None and draw(st.booleans()):
            added.insert(0, ChatMessage(role=answer.role, content=answer.content,
                                        tool_calls=answer.tool_calls))  # fmt: skip
        changes = {
            "id": new_id(),
            "seq": seq,
            "kind": EventKind.LLM_CALL,
            "created_at": previous.created_at + draw(st.sampled_from([timedelta(0), DAY])),
            "observation": observation.model_copy(
                update={"messages": [*observation.messages, *added]}
            ),
        }  # fmt: skip
        if draw(st.booleans()):
            changes["metadata"] = draw(any_metadata("acme"))
        if draw(st.booleans()):
            changes["action"] = draw(st.none() | st.builds(MessageAction, content=any_text))
        found.append(previous.model_copy(update=changes))
    return found


@settings(max_examples=100)
@given(conversations())
def test_every_event_decodes_to_the_document_it_was_encoded_from(chain) -> None:
    earlier = None
    for document in map(_json, chain):
        stored = encode(document, earlier)
        assert stored["codec"] == 1  # encoded, not kept whole
        if earlier and may_refer(Columns.of(document), earlier):
            assert reference(stored) == uuid.UUID(earlier.document["id"])
        assert decode(stored, Columns.of(document), earlier and earlier.document) == document
        assert decode(encode(document), Columns.of(document)) == document
        if document["kind"] == "llm_call":
            earlier = Earlier.of(document, stored)


SYSTEM = ChatMessage(role="system", content="You are the shop's support assistant.")
TOOLS = [
    ToolSpec(name=name, description=f"{name} an order.", parameters={"type": "object"})
    for name in ("lookup", "refund")
]


def _event(traj, seq: int, kind: str, **fields) -> Event:
    metadata = {
        "tenant": traj.tenant,
        "session": traj.session,
        "agent_version_id": "support-bot@v1",
        "harness_version": "h1",
        **fields.pop("metadata", {}),
    }
    return Event(
        id=new_id(),
        trajectory_id=traj.id,
        seq=seq,
        kind=kind,
        created_at=utcnow(),
        metadata=EventMetadata(**metadata),
        replay=ReplayInfo(replay_class="approximate", reason="recorded tool output"),
        **fields,
    )


def _turns(traj, turns: int) -> list[list[Event]]:
    """A gateway-shaped session, one list of events per turn: the user's message, a call
    that asks for a tool, the tool's result, the call that answers."""
    conversation, found, seq, answers = [SYSTEM], [], 0, None
    for turn in range(turns):
        user = ChatMessage(role="user", content=f"Where is order {turn}?")
        conversation.append(user)
        opening = _event(
            traj,
            seq,
            "user_message",
            parent_id=answers.id if answers else None,
            observation=Observation(messages=[user]),
        )
        call = ToolCall(id=f"call_{turn}", name="lookup", arguments=f'{{"order": {turn}}}')
        asks = _llm_call(traj, seq + 1, conversation, MessageAction(tool_calls=[call]), turn)
        conversation.append(ChatMessage(role="assistant", tool_calls=[call]))
        tool = _event(
            traj,
            seq + 2,
            "tool_call",
            parent_id=asks.id,
            action=ToolCallAction(call=call),
            outcome=Outcome(tool_return={"status": "shipped"}, success=True),
        )
        conversation.append(ChatMessage(role="tool", tool_call_id=call.id, content="shipped"))
        answer = MessageAction(content=f"Order {turn} shipped.", finish_reason="stop")
        answers = _llm_call(traj, seq + 3, conversation, answer, turn, parent_id=tool.id)
        conversation.append(ChatMessage(role="assistant", content=answer.content))
        found.append([opening, asks, tool, answers])
        seq += 4
    return found


def _llm_call(traj, seq, conversation, action, turn, **fields) -> Event:
    extra = {"answer_key": f"k{seq}"}
    if action.content:
        extra["stored_response"] = {"id": f"resp_{traj.id.hex}_{turn}", "created_at": 1}
    return _event(
        traj,
        seq,
        "llm_call",
        observation=Observation(messages=list(conversation), tools=TOOLS),
        hidden=HiddenState(harness_fingerprint="h1"),
        action=action,
        metadata={"latency_ms": 300.0 + seq, "cost_usd": 0.001 * seq, "extra": extra},
        **fields,
    )


@pytest.fixture
def world(engine):
    seed_world(engine)
    return engine


def _write(engine, traj, batches: list[list[Event]]) -> None:
    """As the capture drain writes: the trajectory, then a transaction per batch."""
    with transaction(engine) as session:
        write_batch(session, [traj], [], [])
    for batch in batches:
        with transaction(engine) as session:
            write_batch(
                session, [], batch, [], event_documents=[e.model_dump_json() for e in batch]
            )


def _stored(engine, traj) -> list[dict]:
    with engine.connect() as connection:
        statement = sa.select(EventRow.body).where(EventRow.trajectory_id == traj.id)
        return list(connection.scalars(statement.order_by(EventRow.seq)))


def test_every_reader_gets_the_documents_a_session_was_written_with(world) -> None:
    traj = trajectory("acme")
    turns = _turns(traj, 3)
    written = [e for turn in turns for e in turn]
    _write(world, traj, turns)
    with transaction(world) as session:  # a verdict, for the replay cases
        write_batch(session, [], [], [reward(traj, 1.0)])
    stored = _stored(world, traj)
    assert sum(reference(body) is not None for body in stored) >= 8  # the codec referred
    calls = [e for e in written if e.kind is EventKind.LLM_CALL]
    window = TrajectoryWindow(agent="support-bot")
    with transaction(world) as session:
        assert get_events(session, "acme", traj.id) == written
        assert get_event(session, "acme", written[-1].id) == written[-1]
        [record] = export_records(session, "acme", "support-bot")
        expected = _record(traj, written, [reward(traj, 1.0)])
        assert record["events"] == expected["events"] and record["steps"] == expected["steps"]
        prompts = recorded_prompts(training_records(session, "support-bot", ["acme"]))
        assert prompts == record_prompts(expected)
        [case] = recorded_cases(session, WindowSpec(agent="support-bot", last=10))
        assert case.events == written
        assert window_events(session, window, EventKind.LLM_CALL) == {traj.id: calls}
        assert replies(session, [calls[1].id, calls[3].id]) == [written[4], written[8]]
        assert replies(session, [calls[0].id], EventKind.TOOL_CALL) == [written[2]]
        tools = [_json(c)["observation"]["tools"] for c in calls]
        assert sorted(offered_tool_lists(session, window), key=len) == tools
        assert offered_tools(session, window) == {traj.id: {"lookup", "refund"}}
        # Calls whose tools are held by a call not among those read: read from the table,
        # following a body that refers on.
        for holder in calls[:2]:
            assert offered_tools_of(session, [(None, None, str(holder.id))]) == [tools[0]]
        for call in calls[1::2]:
            found = get_stored_response(
                session, "acme", call.metadata.extra["stored_response"]["id"]
            )
            document = _json(call)
            assert found.event == {
                "metadata": document["metadata"],
                "action": document["action"],
                "governance": document["governance"],
                "observation": {"data": None, "tools": document["observation"]["tools"]},
            }


def test_a_rolled_back_call_is_never_referred_to(world) -> None:
    traj = trajectory("acme")
    first, second = _turns(traj, 2)
    _write(world, traj, [])
    with pytest.raises(RuntimeError), transaction(world) as session:
        write_batch(session, [], first, [])
        raise RuntimeError("the batch fails after its events were staged")
    _write(world, traj, [first[:2], first[2:], second])
    with transaction(world) as session:
        assert get_events(session, "acme", traj.id) == [*first, *second]


def test_a_writer_that_did_not_write_the_last_call_stores_it_whole(world) -> None:
    """Another replica served the previous turn (here: this process forgot it)."""
    traj = trajectory("acme")
    first, second = _turns(traj, 2)
    _write(world, traj, [first])
    RECENT.forget(traj.id)
    _write(world, traj, [second])
    stored = _stored(world, traj)
    assert reference(stored[4]) is None and reference(stored[5]) is None  # whole, then on
    assert reference(stored[7]) is not None
    with transaction(world) as session:
        assert get_events(session, "acme", traj.id) == [*first, *second]
        assert get_event(session, "acme", second[-1].id) == second[-1]


def test_with_the_codec_off_bodies_are_stored_whole_and_both_forms_read_back(
    world, monkeypatch
) -> None:
    """`EVOPLANE_EVENT_CODEC=off` (a rolling upgrade's first step) writes documents as
    they were before the codec; a trajectory holding both forms reads back whole."""
    traj = trajectory("acme")
    first, second, third = _turns(traj, 3)
    monkeypatch.setenv("EVOPLANE_EVENT_CODEC", "off")
    _write(world, traj, [first])
    monkeypatch.setenv("EVOPLANE_EVENT_CODEC", "on")
    _write(world, traj, [second])
    stored = _stored(world, traj)
    assert stored[: len(first)] == [_json(e) for e in first]
    assert any(reference(body) is not None for body in stored[len(first) :])
    with transaction(world) as session:
        assert get_events(session, "acme", traj.id) == [*first, *second]
    monkeypatch.setenv("EVOPLANE_EVENT_CODEC", "maybe")
    with pytest.raises(ValueError, match="EVOPLANE_EVENT_CODEC must be 'on' or 'off'"):
        _write(world, traj, [third])
