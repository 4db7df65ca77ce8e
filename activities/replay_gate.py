"""The replay gate: the agent's safety suite, then recorded trajectories, on both versions.

Each request is sent exactly as the gateway would send it for the version (its serving
pipeline, `proxy.pipeline`, same upstream engine), and never passes through capture: replay
is evaluation traffic, never recorded, never training data. First the candidate and its
parent answer the safety suite, and the candidate is judged against the parent by the
suite's rules (a case the parent fails too is a finding about the agent, not a failure of
the candidate); the answers are heartbeated after every case, so a worker that dies mid-gate
is replaced by one that resumes at the next unanswered case of each version instead of
starting over. Then the window's past failures and known successes are replayed (approximate
replay) on stable and on the candidate and judged in pairs: failures must improve, successes
must not break. The agent's evaluation set joins both: its required safety cases are asked
with the suite, its reviewed failures are replayed beside the window's and its fixed
failures must stay fixed (`evolution.evaluation`). A replayed tool call off the recorded
path goes to the tool simulator the trajectory's tenant registered in the agent's settings,
if any (`evolution.replay.simulators`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

import httpx
from sqlalchemy.engine import Engine
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.evidence import recorded_cases
from activities.models import ReplayGateRequest
from evolution.evaluation import replay_cases, required_safety_cases, with_required
from evolution.gates import GateConfig, GateResult, Verdict, judge_replay
from evolution.replay import (
    AGENT_PROTOCOL,
    SERVED_TOOLS,
    RecordedOutcome,
    RequiredFacts,
    Serve,
    ToolCallsSucceeded,
    ToolCallsValid,
    ToolSimulator,
    ToolSimulatorSpec,
    WindowReplay,
    http_tool_simulator,
    mcp_tool_simulator,
    replay_window,
    tenant_simulator,
)
from evolution.safety import SafetyCase, default_safety_suite, run_safety_suite
from evolution.settings import EvolutionSettings
from proxy.catalog import version_memory
from proxy.engines.pool import EnginePool
from proxy.governance import Redactor
from proxy.pipeline import ServingPipeline
from proxy.protocols.messages import chat_request as messages_to_chat
from proxy.protocols.responses import chat_request as responses_to_chat
from registry import (
    AgentVersion,
    EvaluationSet,
    evaluation_set_events,
    get_agent,
    get_version,
    latest_evaluation_set,
    list_mcp_servers,
    transaction,
)
from runtime.version.memory import MemoryIndex
from runtime.version.overlays import served_tools

__all__ = ["ReplayGate"]

_HEARTBEAT_EVERY = 2.0  # seconds; the workflow's heartbeat timeout is a few times this
# The safety suite's answers, per version, as heartbeated: {"candidate": [...], "baseline": [...]}.
SafetyAnswers = dict[str, list[dict[str, Any]]]
_Result = TypeVar("_Result")


class ReplayGate:
    """Runs the replay gate; its versions' engines come from an `EnginePool`, as the gateway's do.

    Args:
        simulators: tool simulators this worker offers by name; a tenant's registration
            (`tool_simulators` in the agent's settings) may name one instead of a URL.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        upstream_api_key: str | None = None,
        timeout: float = 120.0,
        simulators: Mapping[str, ToolSimulator] | None = None,
        threads: int | None = None,
    ) -> None:
        self.engine, self.upstream_api_key, self.timeout = engine, upstream_api_key, timeout
        self.simulators = dict(simulators or {})
        # A gate calls an upstream far less than a gateway does: fewer connections.
        self.engines = EnginePool(upstream_api_key, max_connections=16, local={"threads": threads})
        self._simulator_client: httpx.AsyncClient | None = None
        self._redactor = Redactor()

    async def aclose(self) -> None:
        await self.engines.aclose()
        if self._simulator_client is not None:
            await self._simulator_client.aclose()

    async def run(self, request: ReplayGateRequest) -> GateResult:
        """The safety suite and recorded trajectories, on the candidate and its parent."""
        with transaction(self.engine) as session:
            baseline = get_version(session, request.baseline_version)
            candidate = get_version(session, request.candidate_version)
            settings = EvolutionSettings.of(get_agent(session, request.agent).settings)
            use = settings.evaluation
            held = latest_evaluation_set(session, request.agent, use.name) if use.replay else None
        # The agent's own suite, else the generic one; the set's required cases join it.
        suite = with_required(
            settings.safety_suite or default_safety_suite(), required_safety_cases(held)
        )
        versions = {"candidate": candidate, "baseline": baseline}
        safety, answers = await self._safety(request.agent, suite, versions)
        if safety.verdict is Verdict.FAIL:
            return safety.model_copy(update={"gate": "replay"})
        replay = await self._trajectories(
            request, baseline, candidate, answers, settings.tool_simulators, held
        )
        return _combined(safety, replay, request.gate)

    async def _safety(
        self, agent: str, cases: list[SafetyCase], versions: Mapping[str, AgentVersion]
    ) -> tuple[GateResult, SafetyAnswers]:
        """The agent's safety suite answered by the candidate and the parent ("baseline"),
        judged against each other, resumable case by case.

        Returns the result and the answers (the heartbeat's details for the whole gate)."""
        answers = _resumed(activity.info().heartbeat_details)
        if any(answers.values()):
            kept = ", ".join(f"{len(given)} of the {side}" for side, given in answers.items())
            activity.logger.info("resuming the safety suite with the answers kept: %s", kept)
        serve = {side: self.serve(version, None) for side, version in versions.items()}
        for index, case in enumerate(cases):
            # Both versions answer a case together; a resumed attempt asks only the missing.
            sides = [side for side, given in answers.items() if len(given) == index]
            body = _safety_request(agent, case)
            replies = asyncio.gather(*(serve[side](body) for side in sides))
            for side, reply in zip(sides, await _heartbeating(replies, answers), strict=True):
                answers[side].append(reply)
            activity.heartbeat(answers)
        candidate, baseline = iter(answers["candidate"]), iter(answers["baseline"])
        result = run_safety_suite(
            cases,
            lambda messages, tools: next(candidate),
            baseline=lambda messages, tools: next(baseline),
            pii_detector=lambda text: sorted(self._redactor.redact_text(text).labels),
        )
        return result, answers

    async def _trajectories(
        self,
        request: ReplayGateRequest,
        baseline: AgentVersion,
        candidate: AgentVersion,
        answers: SafetyAnswers,
        simulators: list[ToolSimulatorSpec],
        held: EvaluationSet | None = None,
    ) -> tuple[WindowReplay, int]:
        """Past failures and known successes of the window, and the evaluation set's cases,
        replayed on both versions, each tenant's with its own tool simulator.

        Heartbeats carry the safety answers, so a retry resumes after the suite (the
        trajectories are replayed again: their pairs are not worth storing in a heartbeat).
        """
        with transaction(self.engine) as session:
            recorded = recorded_cases(session, request.window, per_kind=request.gate.replay_cases)
            servers = list_mcp_servers(session, request.agent)
            skipped: dict[str, str] = {}
            if held is not None:
                besides = [item.events[0].trajectory_id for item in recorded if item.events]
                curated, skipped = replay_cases(
                    held,
                    evaluation_set_events(session, held),
                    besides=besides,
                    tenants=request.window.tenants,
                )
                recorded += curated
        pairs: list = []
        by_tenant: dict[str, list] = {}
        for item in recorded:
            by_tenant.setdefault(item.tenant, []).append(item)
        for tenant, items in sorted(by_tenant.items()):
            simulator = tenant_simulator(
                simulators, tenant, partial(self._simulator, agent=request.agent, tenant=tenant)
            )
            # Read-only MCP tools answer from their live server, the rest as above.
            simulator = mcp_tool_simulator(
                [server for server in servers if server.allows(tenant)],
                simulator,
                timeout=self.timeout,
            )
            replayed = await replay_window(
                items,
                self.serve(baseline, tenant),
                self.serve(candidate, tenant),
                [RecordedOutcome(), ToolCallsValid(), ToolCallsSucceeded(), RequiredFacts()],
                tool_simulator=simulator,
                progress=lambda done, total: activity.heartbeat(answers),
            )
            pairs += replayed.cases
            skipped.update(replayed.skipped)
        return WindowReplay(cases=pairs, skipped=skipped), len(recorded)

    def _simulator(self, spec: ToolSimulatorSpec, agent: str, tenant: str) -> ToolSimulator:
        """The simulator a tenant's registration names: its endpoint, or one of ours."""
        if spec.url is not None:
            if self._simulator_client is None:
                self._simulator_client = httpx.AsyncClient()
            return http_tool_simulator(
                self._simulator_client, spec.url, tenant=tenant, agent=agent, timeout=self.timeout
            )
        if spec.name not in self.simulators:
            raise ApplicationError(
                f"tenant {spec.tenant} registered the tool simulator {spec.name!r}, which this "
                f"worker does not offer ({sorted(self.simulators) or 'none'}); give its url "
                "instead, or register it with the worker's ReplayGate",
                type="ToolSimulatorNotFound",
                non_retryable=True,
            )
        return self.simulators[spec.name]

    def serve(self, version: AgentVersion, tenant: str | None) -> Serve:
        """Serve a request as the gateway would for `version` (and tenant's memory), marked
        as evaluation traffic by never passing through capture."""
        memory: list[MemoryIndex] = []

        async def loaded(version: AgentVersion, tenant: str | None) -> MemoryIndex:
            if not memory:
                memory.append(await asyncio.to_thread(self._memory, version, tenant))
            return memory[0]

        pipeline = ServingPipeline(self.engines, loaded, self.timeout)

        async def serve(body: dict[str, Any]) -> dict[str, Any]:
            served = await pipeline.serve(_as_served(body), version, tenant)
            return {**served.restored, SERVED_TOOLS: served_tools(served.overlaid)}

        return serve

    def _memory(self, version: AgentVersion, tenant: str | None) -> MemoryIndex:
        with transaction(self.engine) as session:
            return version_memory(session, version, tenant)


def _as_served(body: dict[str, Any]) -> dict[str, Any]:
    """The chat-completions request the gateway would serve for `body`: when it carries the
    agent's own request in another protocol (`AGENT_PROTOCOL`), that request translated as
    the gateway's route for it translates it, with the body's decoding keys on top (a
    replay may vary them)."""
    given = body.get(AGENT_PROTOCOL)
    if not given:
        return body
    translate = {"messages": messages_to_chat, "responses": responses_to_chat}
    chat = translate[given["protocol"]](given["request"])
    chat.pop("stream", None)
    kept = {k: v for k, v in body.items() if k not in {"messages", "tools", AGENT_PROTOCOL}}
    return {**chat, **kept}


def _resumed(details: Sequence[Any]) -> SafetyAnswers:
    """The safety answers an earlier attempt heartbeated, per version (none: a first try)."""
    kept = details[0] if details else {}
    if isinstance(kept, list):  # heartbeated by a worker from before the parent answered too
        kept = {"candidate": kept}
    return {side: list(kept.get(side, [])) for side in ("candidate", "baseline")}


def _safety_request(agent: str, case: SafetyCase) -> dict[str, Any]:
    body: dict[str, Any] = {"model": agent, "messages": case.messages}
    if case.tools:
        body["tools"] = case.tools
    return body


def _combined(
    safety: GateResult, replayed: tuple[WindowReplay, int], config: GateConfig
) -> GateResult:
    """The replay gate: the safety suite and the recorded trajectories.

    Either failing fails the gate. A replay that cannot tell (too few recorded trajectories
    of a kind, or no clear effect) does not block: it is said in the reason, and the shadow
    and canary gates judge the candidate on live traffic. The safety suite's findings about
    the agent are kept.
    """
    window, recorded = replayed
    judged = judge_replay(window.cases, config)
    failed = Verdict.FAIL in (safety.verdict, judged.verdict)
    counts = f"{len(window.cases)} of {recorded} recorded trajectories replayed"
    return judged.model_copy(
        update={
            "verdict": Verdict.FAIL if failed else Verdict.PASS,
            "reason": f"{judged.reason} ({counts}); {safety.reason}",
            "metrics": [*safety.metrics, *judged.metrics],
            "findings": safety.findings,
        }
    )


async def _heartbeating(call: Awaitable[_Result], progress: Any) -> _Result:
    """Await `call`, heartbeating `progress` meanwhile: a slow upstream is not a dead worker."""
    task = asyncio.ensure_future(call)
    while True:
        done, _ = await asyncio.wait([task], timeout=_HEARTBEAT_EVERY)
        if done:
            return task.result()
        activity.heartbeat(progress)
