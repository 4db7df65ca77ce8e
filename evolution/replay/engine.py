"""Re-run recorded trajectories against an agent version, without importing the gateway.

The caller injects `serve`: it takes the agent-side OpenAI chat-completions request, applies
the version's overlays (harness, memory, tool schema) with the gateway's own code, calls the
version's upstream and returns the agent-visible chat.completion. So what is replayed is what
would be served, and `evolution` stays free of `proxy`.

Replay traffic is evaluation traffic: the `serve` an activity builds must send its requests
with `EVALUATION_HEADERS` (or bypass capture), so replays are never training-eligible and never
counted as user traffic. The request body itself stays plain OpenAI.

Two modes:
  - deterministic: every recorded llm_call is re-served with exactly its recorded inputs and
    the new action is compared with the recorded one;
  - approximate: the first llm_call's inputs start a conversation that then follows the new
    answers; while the new tool calls match the recorded ones the recorded tool outputs are
    substituted, and on divergence a tenant's tool simulator answers or the replay stops
    (scored up to the divergence). A simulator may decline a tool (it returns None): the
    replay stops there too.

Each step keeps the tool results that answered its calls (recorded, or simulated), so
scorers can tell whether the tools accepted the version's calls.

A caveat on inputs: the gateway records the request it sent upstream, i.e. after the
recording version's overlays. A `serve` that overlays again should first remove the recording
version's harness and memory block (only the gateway knows their shape).
"""

from __future__ import annotations

import inspect
import json
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from atdp import (
    ChatMessage,
    Event,
    EventKind,
    MessageAction,
    Outcome,
    ReplayClass,
    ToolCall,
    ToolCallAction,
    agent_request,
    protocol_request,
    rename_arguments,
)

__all__ = [
    "AGENT_PROTOCOL",
    "EVALUATION_HEADERS",
    "SERVED_TOOLS",
    "ReplayMode",
    "ReplayStep",
    "ReplayedTrajectory",
    "Serve",
    "ToolOutput",
    "ToolResult",
    "ToolSimulator",
    "action_of",
    "recorded_action",
    "replay_trajectory",
    "request_body",
    "same_action",
    "same_tool_calls",
]

Serve: TypeAlias = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
ReplayMode: TypeAlias = Literal["deterministic", "approximate"]

# What a `serve` for replay must send so the gateway records the call as evaluation traffic.
EVALUATION_HEADERS = {"X-Evoplane-Traffic": "evaluation"}
# Where a `serve` may put, in the response it returns, the tools as the version presented
# them (in the agent's argument names): scorers judge a call against them, since a version
# may rename a parameter the agent's own stale schema still spells the old way.
SERVED_TOOLS = "x_evoplane_served_tools"

# Where deterministic replay puts, beside the chat-completions request, the agent's own
# request in the protocol it came in on (the Responses or Messages API), when that request
# alone reproduces the call: a `serve` that speaks it (the replay gate's) serves that, as
# the gateway would; any other may ignore it. The body's other keys (decoding) still apply.
AGENT_PROTOCOL = "x_evoplane_agent_protocol"

_DECODING = ("temperature", "top_p", "max_tokens", "seed", "n", "stop")
# Events that are recorded inputs from outside the agent: replay reuses them as recorded, so
# their own replay class (a person's input is not re-runnable) never stops a replay.
_INPUT_KINDS = frozenset(
    {EventKind.USER_MESSAGE, EventKind.FEEDBACK, EventKind.TASK_OUTCOME, EventKind.APPROVAL}
)


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolOutput(_Value):
    """What a tool simulator answers a call with; `error` names the error class when the
    simulated tool refused the call (bad arguments, say)."""

    output: str
    error: str | None = None


# (tool name, arguments as the agent receives them) -> the tool's output (a string is an
# output that succeeded), or None when the simulator does not simulate that tool; sync or async.
ToolSimulator: TypeAlias = Callable[
    [str, str], Awaitable[ToolOutput | str | None] | ToolOutput | str | None
]


class ToolResult(_Value):
    """A tool's answer to one of a step's calls: recorded, or from the tenant's simulator.

    `error` is the error class when the tool refused the call, None when it accepted it.
    """

    call_id: str
    tool: str
    arguments: str
    output: str | None
    error: str | None = None
    simulated: bool = False


class ReplayStep(_Value):
    """One re-served llm_call: what was sent, what came back, and whether it matches.

    `simulated` is True when the tool outputs that followed this step came from the tenant's
    tool simulator rather than from the recording; `tool_results` are those outputs (empty
    when the step called no tool, or the replay stopped at its calls).
    """

    event_id: uuid.UUID
    request: dict[str, Any]
    response: dict[str, Any]
    matched: bool
    simulated: bool = False
    tool_results: list[ToolResult] = Field(default_factory=list)


class ReplayedTrajectory(_Value):
    """The result of replaying one trajectory; never written to the registry by the engine.

    `diverged_at` is the index in `steps` where the new tool calls left the recorded path
    and nothing could continue it; `stopped_reason` says why the replay ended early (None when
    every recorded llm_call was replayed).
    """

    trajectory_id: uuid.UUID
    mode: ReplayMode
    steps: list[ReplayStep]
    diverged_at: int | None = None
    stopped_reason: str | None = None

    @property
    def reproduced(self) -> bool:
        """Every recorded llm_call was replayed and every new action equals the recorded one."""
        return (
            bool(self.steps)
            and self.stopped_reason is None
            and all(step.matched for step in self.steps)
        )


# --- requests and responses ----------------------------------------------------------------


def request_body(event: Event) -> dict[str, Any]:
    """The OpenAI chat-completions request the agent sent for an llm_call event.

    The event records what the model saw (the recording version's overlays applied); its
    `observation.data["agent_request"]`, written by the gateway, says how to undo them, so
    `serve` can apply the version under test to the agent's own request. The model is left
    out: `serve` routes to the version under test.
    """
    if event.kind is not EventKind.LLM_CALL or event.observation is None:
        raise ValueError(f"event {event.id} is a {event.kind} event, not a recorded llm_call")
    messages = [message.to_openai() for message in event.observation.messages]
    tools = [_tool_dict(tool) for tool in event.observation.tools]
    undo = _undo(event)
    if undo:
        messages, tools = _agent_view(messages, tools, undo)
    body: dict[str, Any] = {"messages": messages}
    if tools:
        body["tools"] = tools
    decoding = event.metadata.decoding
    if decoding is not None:
        body.update(decoding.extra)
        body.update({k: v for k in _DECODING if (v := getattr(decoding, k)) is not None})
    return body


def _undo(event: Event) -> dict[str, Any]:
    return agent_request(event.observation.data if event.observation else None)


def _agent_view(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], undo: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Undo the overlays: drop what they put in front, restore the agent's first message and
    tools, and give earlier tool calls back their agent-side argument names."""
    head = [undo["first"]] if "first" in undo else messages[:1] if undo.get("keeps_first") else []
    rest = messages[int(undo.get("added", 0)) :]
    maps = undo.get("argument_maps") or {}
    rest = [_to_agent_names(m, maps) for m in rest] if maps else rest
    return [*head, *rest], list(undo.get("tools") or tools)


def _to_agent_names(message: dict[str, Any], maps: dict[str, dict[str, str]]) -> dict[str, Any]:
    calls = message.get("tool_calls")
    if not calls:
        return message
    renamed = []
    for call in calls:
        function = call.get("function") or {}
        mapping = maps.get(function.get("name") or "")
        if mapping:
            arguments = rename_arguments(function.get("arguments") or "", mapping)
            call = {**call, "function": {**function, "arguments": arguments}}
        renamed.append(call)
    return {**message, "tool_calls": renamed}


def recorded_action(event: Event) -> Any:
    """The recorded action as the agent received it (tool arguments under its own names)."""
    action = event.action
    maps = _undo(event).get("argument_maps") or {}
    if not maps or not isinstance(action, MessageAction) or not action.tool_calls:
        return action
    calls = [
        call.model_copy(update={"arguments": rename_arguments(call.arguments, maps[call.name])})
        if call.name in maps
        else call
        for call in action.tool_calls
    ]
    return action.model_copy(update={"tool_calls": calls})


def _tool_dict(tool: Any) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name}
    if tool.description is not None:
        function["description"] = tool.description
    if tool.parameters is not None:
        function["parameters"] = tool.parameters
    return {"type": "function", "function": function}


def action_of(response: dict[str, Any]) -> MessageAction:
    """The first choice of a chat.completion as an ATDP message action."""
    choice = (response.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    content = message.get("content")
    return MessageAction(
        content=content if isinstance(content, str) else None,
        tool_calls=[ToolCall.from_openai(call) for call in message.get("tool_calls") or []],
        finish_reason=choice.get("finish_reason"),
    )


# --- comparing actions ---------------------------------------------------------------------


def _canonical(call: ToolCall) -> str:
    """A call's name and arguments, the same however the JSON was spaced or keys ordered."""
    try:
        arguments: Any = json.loads(call.arguments)
    except (json.JSONDecodeError, ValueError):
        arguments = call.arguments
    return json.dumps([call.name, arguments], sort_keys=True)


def same_tool_calls(new: Sequence[ToolCall], recorded: Sequence[ToolCall]) -> bool:
    """Same calls by name and parsed arguments, in any order (parallel calls may reorder)."""
    return sorted(map(_canonical, new)) == sorted(map(_canonical, recorded))


def same_action(new: MessageAction, recorded: Any) -> bool:
    """The new action reproduces the recorded one: same tool calls, or the same text."""
    if not isinstance(recorded, MessageAction):
        return False
    if new.tool_calls or recorded.tool_calls:
        return same_tool_calls(new.tool_calls, recorded.tool_calls)
    return (new.content or "").strip() == (recorded.content or "").strip()


# --- the walk ------------------------------------------------------------------------------


async def replay_trajectory(
    events: list[Event],
    serve: Serve,
    *,
    mode: ReplayMode,
    tool_simulator: ToolSimulator | None = None,
) -> ReplayedTrajectory:
    """Replay one recorded trajectory through `serve`.

    Args:
        events: the trajectory's events (any order; they are sorted by seq).
        serve: serves an agent-side request with the version under test (see module doc).
        mode: "deterministic" re-serves recorded inputs; "approximate" follows new answers.
        tool_simulator: continues an approximate replay whose tool calls diverged.
    """
    if not events:
        raise ValueError("a replay needs the trajectory's events; none were given")
    ordered = sorted(events, key=lambda event: event.seq)
    calls, blocked = _replayable_calls(ordered)
    trajectory_id = ordered[0].trajectory_id
    outcomes = _tool_outcomes(ordered)
    if mode == "deterministic":
        steps = [await _serve_recorded(call, serve, outcomes) for call in calls]
        return _result(trajectory_id, mode, steps, None, blocked)
    return await _approximate(trajectory_id, calls, blocked, serve, tool_simulator, outcomes)


def _tool_outcomes(events: list[Event]) -> dict[str, Outcome]:
    """Recorded tool outcomes by call id (the gateway links each tool result to its call)."""
    return {
        event.action.call.id: event.outcome
        for event in events
        if event.kind is EventKind.TOOL_CALL
        and isinstance(event.action, ToolCallAction)
        and event.outcome is not None
    }


def _recorded_results(
    recorded: Sequence[ToolCall], new: Sequence[ToolCall], outcomes: dict[str, Outcome]
) -> list[ToolResult]:
    """The recorded results of calls the version repeated, under the version's call ids."""
    results = []
    for call, twin in zip(
        sorted(recorded, key=_canonical), sorted(new, key=_canonical), strict=True
    ):
        outcome = outcomes.get(call.id)
        if outcome is None:
            continue
        returned = outcome.tool_return
        error = outcome.error_class or ("failed" if outcome.success is False else None)
        results.append(
            ToolResult(
                call_id=twin.id,
                tool=twin.name,
                arguments=twin.arguments,
                output=returned if isinstance(returned, str | None) else json.dumps(returned),
                error=error,
            )
        )
    return results


def _replayable_calls(events: list[Event]) -> tuple[list[Event], str | None]:
    """The llm_calls before the first non-replayable agent-side event, and why it stops there.

    An llm_call after a non-replayable tool call (a side effect outside a sandbox) depends on
    an output that cannot be substituted, so the replay stops before it.
    """
    calls: list[Event] = []
    for event in events:
        if event.kind in _INPUT_KINDS:
            continue
        if event.replay.replay_class is ReplayClass.NON_REPLAYABLE:
            reason = event.replay.reason or "no reason recorded"
            return calls, f"event {event.id} ({event.kind}) is non-replayable: {reason}"
        if event.kind is EventKind.LLM_CALL:
            calls.append(event)
    return calls, None


def _result(
    trajectory_id: uuid.UUID,
    mode: ReplayMode,
    steps: list[ReplayStep],
    diverged_at: int | None,
    stopped: str | None,
) -> ReplayedTrajectory:
    if not steps and stopped is None:
        stopped = "the trajectory has no llm_call events to replay"
    return ReplayedTrajectory(
        trajectory_id=trajectory_id,
        mode=mode,
        steps=steps,
        diverged_at=diverged_at,
        stopped_reason=stopped,
    )


def _in_agent_protocol(call: Event, body: dict[str, Any]) -> dict[str, Any]:
    """`body` with the agent's own request in its protocol (`AGENT_PROTOCOL`), when one was
    recorded and reproduces the call alone: not a Responses call that continued a stored
    response, whose history only the chat request holds."""
    name, request = protocol_request(call.observation.data if call.observation else None)
    if request is None or (name == "responses" and request.get("previous_response_id")):
        return body
    return {**body, AGENT_PROTOCOL: {"protocol": name, "request": request}}


async def _serve_recorded(call: Event, serve: Serve, outcomes: dict[str, Outcome]) -> ReplayStep:
    body = _in_agent_protocol(call, request_body(call))
    response = await serve(body)
    new, recorded = action_of(response), recorded_action(call)
    matched = same_action(new, recorded)
    # The recorded inputs come next whatever the answer; the recorded tool results are
    # what this version's calls got only when its calls were the recorded ones.
    results = (
        _recorded_results(recorded.tool_calls, new.tool_calls, outcomes)
        if matched and isinstance(recorded, MessageAction)
        else []
    )
    return ReplayStep(
        event_id=call.id, request=body, response=response, matched=matched, tool_results=results
    )


async def _approximate(
    trajectory_id: uuid.UUID,
    calls: list[Event],
    blocked: str | None,
    serve: Serve,
    simulator: ToolSimulator | None,
    outcomes: dict[str, Outcome],
) -> ReplayedTrajectory:
    steps: list[ReplayStep] = []
    body = request_body(calls[0]) if calls else {}
    for index, call in enumerate(calls):
        response = await serve(body)
        new, recorded = action_of(response), recorded_action(call)
        recorded_calls = recorded.tool_calls if isinstance(recorded, MessageAction) else []
        step = ReplayStep(
            event_id=call.id,
            request=body,
            response=response,
            matched=same_action(new, recorded),
        )
        on_path = same_tool_calls(new.tool_calls, recorded_calls)
        if on_path:
            results = _recorded_results(recorded_calls, new.tool_calls, outcomes)
        else:
            results = await _simulated(simulator, new.tool_calls)
        if results:
            step = step.model_copy(update={"tool_results": results, "simulated": not on_path})
        steps.append(step)
        if index == len(calls) - 1:
            break
        nxt = calls[index + 1]
        if on_path:
            outputs = _recorded_outputs(nxt, recorded_calls, new.tool_calls)
        elif results is not None:
            outputs = [*map(_tool_message, results), *_user_inputs(nxt)]
        else:
            reason = _divergence(index, new, recorded_calls, simulator is not None)
            return _result(trajectory_id, "approximate", steps, index, reason)
        body = _next_body(body, response, outputs, nxt)
    return _result(trajectory_id, "approximate", steps, None, blocked)


def _divergence(
    index: int, new: MessageAction, recorded: Sequence[ToolCall], simulator: bool
) -> str:
    def names(calls: Sequence[ToolCall]) -> str:
        return ", ".join(call.name for call in calls) or "no tool call"

    why = (
        "the tool simulator does not simulate it"
        if simulator and new.tool_calls
        else "no tool simulator continues it"
    )
    return (
        f"diverged at step {index}: the version called {names(new.tool_calls)} where the "
        f"recording called {names(recorded)}, and {why}"
    )


def _new_inputs(call: Event) -> list[dict[str, Any]]:
    """What the agent added to the conversation before this llm_call: the messages after the
    last assistant turn (tool results, then the user's next messages)."""
    messages = [m.to_openai() for m in call.observation.messages] if call.observation else []
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    return messages[last + 1 :]


def _user_inputs(call: Event) -> list[dict[str, Any]]:
    """The next turn's new inputs but the recorded tool results (simulated ones replace them)."""
    return [message for message in _new_inputs(call) if message["role"] != "tool"]


def _recorded_outputs(
    nxt: Event, recorded: Sequence[ToolCall], new: Sequence[ToolCall]
) -> list[dict[str, Any]]:
    """The next turn's new inputs, with recorded tool results re-addressed to the new call ids.

    The new calls equal the recorded ones by name and arguments but carry fresh ids, and a
    tool message must answer an id the conversation holds.
    """
    unused = list(new)
    ids: dict[str, str] = {}
    for call in recorded:
        twin = next(c for c in unused if _canonical(c) == _canonical(call))
        unused.remove(twin)
        ids[call.id] = twin.id
    return [
        {**m, "tool_call_id": ids.get(m["tool_call_id"], m["tool_call_id"])}
        if m["role"] == "tool" and m.get("tool_call_id") is not None
        else m
        for m in _new_inputs(nxt)
    ]


async def _simulated(
    simulator: ToolSimulator | None, calls: Sequence[ToolCall]
) -> list[ToolResult] | None:
    """Every call answered by the simulator; None when there is no call to simulate, no
    simulator, or it declines one."""
    if simulator is None or not calls:
        return None
    results = []
    for call in calls:
        answer = simulator(call.name, call.arguments)
        if inspect.isawaitable(answer):
            answer = await answer
        if answer is None:
            return None
        output = answer if isinstance(answer, ToolOutput) else ToolOutput(output=str(answer))
        results.append(
            ToolResult(
                call_id=call.id,
                tool=call.name,
                arguments=call.arguments,
                output=output.output,
                error=output.error,
                simulated=True,
            )
        )
    return results


def _tool_message(result: ToolResult) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": result.call_id, "content": result.output}


def _next_body(
    body: dict[str, Any],
    response: dict[str, Any],
    outputs: list[dict[str, Any]],
    nxt: Event,
) -> dict[str, Any]:
    """The next request: the conversation so far, the new answer and what followed it, with
    the recorded turn's own tools and decoding parameters.

    A recorded turn whose history holds no assistant message started a fresh conversation
    (a sub-task, say), so it is re-served with its recorded inputs.
    """
    template = request_body(nxt)
    if not any(m["role"] == "assistant" for m in template["messages"]):
        return template
    template["messages"] = [*body["messages"], _assistant_message(response), *outputs]
    return template


def _assistant_message(response: dict[str, Any]) -> dict[str, Any]:
    action = action_of(response)
    message = ChatMessage(role="assistant", content=action.content, tool_calls=action.tool_calls)
    return message.to_openai()
