"""The replay gate: the candidate answers the agent's safety suite through the gateway's overlays.

Each case is sent exactly as the gateway would send it for the candidate version (same
overlay code, same upstream engine), and the answer the agent would see is checked by the
suite's rules. Progress is heartbeated after every case, so a worker that dies mid-gate
is replaced by one that resumes at the next case instead of starting over.

Replaying recorded trajectories (past failures must improve, successes must not break)
joins this gate with the replay engine; until then the gate's reason says that only the
safety suite ran.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from typing import Any

from sqlalchemy.engine import Engine
from temporalio import activity

from activities.models import ReplayGateRequest
from evolution.gates import GateConfig, GateResult, Verdict, judge_replay
from evolution.memory import MemoryIndex
from evolution.replay import (
    RecordedOutcome,
    RequiredFacts,
    Serve,
    ToolCallsValid,
    WindowReplay,
    replay_window,
)
from evolution.replay.cases import recorded_cases
from evolution.safety import SafetyCase, default_safety_suite, run_safety_suite
from evolution.settings import EvolutionSettings
from proxy.engines.base import UpstreamEngine
from proxy.engines.openai_compat import OpenAICompatEngine
from proxy.governance import Redactor
from proxy.overlays import apply_overlays, restore_response
from registry import AgentVersion, get_agent, get_memory_items, get_version, transaction

__all__ = ["ReplayGate"]

_HEARTBEAT_EVERY = 2.0  # seconds; the workflow's heartbeat timeout is a few times this


class ReplayGate:
    """Runs the replay gate; owns one pooled HTTP engine per upstream base URL."""

    def __init__(
        self, engine: Engine, *, upstream_api_key: str | None = None, timeout: float = 120.0
    ) -> None:
        self.engine, self.upstream_api_key, self.timeout = engine, upstream_api_key, timeout
        self._upstreams: dict[str, UpstreamEngine] = {}
        self._redactor = Redactor()

    def _upstream(self, base_url: str) -> UpstreamEngine:
        if base_url not in self._upstreams:
            self._upstreams[base_url] = OpenAICompatEngine(
                base_url, self.upstream_api_key, connect_timeout=5.0, max_connections=16
            )
        return self._upstreams[base_url]

    async def aclose(self) -> None:
        for upstream in self._upstreams.values():
            await upstream.aclose()

    def _suite(self, agent: str) -> list[SafetyCase]:
        """The agent's own suite (settings `safety_suite`), else the generic one."""
        with transaction(self.engine) as session:
            settings = EvolutionSettings.of(get_agent(session, agent).settings)
        return settings.safety_suite or default_safety_suite()

    async def run(self, request: ReplayGateRequest) -> GateResult:
        """The safety suite on the candidate, then recorded trajectories on both versions."""
        with transaction(self.engine) as session:
            baseline = get_version(session, request.baseline_version)
            candidate = get_version(session, request.candidate_version)
        safety, answers = await self._safety(request.agent, candidate)
        if safety.verdict is Verdict.FAIL:
            return safety.model_copy(update={"gate": "replay"})
        replay = await self._trajectories(request, baseline, candidate, answers)
        return _combined(safety, replay, request.gate)

    async def _safety(
        self, agent: str, candidate: AgentVersion
    ) -> tuple[GateResult, list[dict[str, Any]]]:
        """The agent's safety suite answered by the candidate, resumable case by case.

        Returns the result and the answers (the heartbeat's details for the whole gate)."""
        cases = self._suite(agent)
        details = activity.info().heartbeat_details
        answers: list[dict[str, Any]] = list(details[0]) if details else []
        if answers:
            activity.logger.info("resuming the safety suite at case %d", len(answers) + 1)
        serve = self._serve(candidate, None)
        for case in cases[len(answers) :]:
            body: dict[str, Any] = {"model": agent, "messages": case.messages}
            if case.tools:
                body["tools"] = case.tools
            answers.append(await _heartbeating(serve(body), answers))
            activity.heartbeat(answers)
        replies = iter(answers)
        result = run_safety_suite(
            cases,
            lambda messages, tools: next(replies),
            pii_detector=lambda text: sorted(self._redactor.redact_text(text).labels),
        )
        return result, answers

    async def _trajectories(
        self,
        request: ReplayGateRequest,
        baseline: AgentVersion,
        candidate: AgentVersion,
        answers: list[dict[str, Any]],
    ) -> tuple[WindowReplay, int]:
        """Past failures and known successes of the window, replayed on both versions.

        Heartbeats carry the safety answers, so a retry resumes after the suite (the
        trajectories are replayed again: their pairs are not worth storing in a heartbeat).
        """
        with transaction(self.engine) as session:
            recorded = recorded_cases(session, request.window, per_kind=request.gate.replay_cases)
        pairs: list = []
        skipped: dict[str, str] = {}
        by_tenant: dict[str, list] = {}
        for item in recorded:
            by_tenant.setdefault(item.tenant, []).append(item)
        for tenant, items in sorted(by_tenant.items()):
            replayed = await replay_window(
                items,
                self._serve(baseline, tenant),
                self._serve(candidate, tenant),
                [RecordedOutcome(), ToolCallsValid(), RequiredFacts()],
                progress=lambda done, total: activity.heartbeat(answers),
            )
            pairs += replayed.cases
            skipped.update(replayed.skipped)
        return WindowReplay(cases=pairs, skipped=skipped), len(recorded)

    def _serve(self, version: AgentVersion, tenant: str | None) -> Serve:
        """Serve a request as the gateway would for `version` (and tenant's memory), marked
        as evaluation traffic by never passing through capture."""
        upstream = self._upstream(version.spec.model.base_url or "")
        memory: list[MemoryIndex] = []

        async def serve(body: dict[str, Any]) -> dict[str, Any]:
            if not memory:
                memory.append(await asyncio.to_thread(self._memory, version, tenant))
            overlaid = apply_overlays(body, version.spec, memory[0])
            response = await upstream.complete(
                overlaid.body, model=overlaid.model, timeout=self.timeout
            )
            return restore_response(response, overlaid)

        return serve

    def _memory(self, version: AgentVersion, tenant: str | None) -> MemoryIndex:
        ids = [uuid.UUID(item_id) for item_id in version.spec.memory.item_ids]
        if tenant is None or not ids:
            return MemoryIndex([])
        with transaction(self.engine) as session:
            return MemoryIndex(get_memory_items(session, version.agent, tenant, ids))


def _combined(
    safety: GateResult, replayed: tuple[WindowReplay, int], config: GateConfig
) -> GateResult:
    """The replay gate: the safety suite and the recorded trajectories.

    Either failing fails the gate. A replay that cannot tell (too few recorded trajectories
    of a kind, or no clear effect) does not block: it is said in the reason, and the shadow
    and canary gates judge the candidate on live traffic.
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
        }
    )


async def _heartbeating(call: Awaitable[dict], progress: list) -> dict:
    """Await `call`, heartbeating `progress` meanwhile: a slow upstream is not a dead worker."""
    task = asyncio.ensure_future(call)
    while True:
        done, _ = await asyncio.wait([task], timeout=_HEARTBEAT_EVERY)
        if done:
            return task.result()
        activity.heartbeat(progress)
