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
from collections.abc import Awaitable
from typing import Any

from sqlalchemy.engine import Engine
from temporalio import activity

from activities.models import ReplayGateRequest
from evolution.gates import GateResult
from evolution.safety import SafetyCase, default_safety_suite, run_safety_suite
from evolution.settings import EvolutionSettings
from proxy.engines.base import UpstreamEngine
from proxy.engines.openai_compat import OpenAICompatEngine
from proxy.governance import Redactor
from proxy.overlays import apply_overlays, restore_response
from registry import get_agent, get_version, transaction

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
        with transaction(self.engine) as session:
            candidate = get_version(session, request.candidate_version)
        cases = self._suite(request.agent)
        details = activity.info().heartbeat_details
        answers: list[dict[str, Any]] = list(details[0]) if details else []
        if answers:
            activity.logger.info("resuming the safety suite at case %d", len(answers) + 1)
        upstream = self._upstream(candidate.spec.model.base_url or "")
        for case in cases[len(answers) :]:
            body: dict[str, Any] = {"model": request.agent, "messages": case.messages}
            if case.tools:
                body["tools"] = case.tools
            overlaid = apply_overlays(body, candidate.spec)
            call = upstream.complete(overlaid.body, model=overlaid.model, timeout=self.timeout)
            response = await _heartbeating(call, answers)
            answers.append(restore_response(response, overlaid))
            activity.heartbeat(answers)
        replies = iter(answers)
        result = run_safety_suite(
            cases,
            lambda messages, tools: next(replies),
            pii_detector=lambda text: sorted(self._redactor.redact_text(text).labels),
        )
        note = "safety suite only (recorded-trajectory replay arrives with the replay engine)"
        return result.model_copy(update={"gate": "replay", "reason": f"{result.reason}; {note}"})


async def _heartbeating(call: Awaitable[dict], progress: list) -> dict:
    """Await `call`, heartbeating `progress` meanwhile: a slow upstream is not a dead worker."""
    task = asyncio.ensure_future(call)
    while True:
        done, _ = await asyncio.wait([task], timeout=_HEARTBEAT_EVERY)
        if done:
            return task.result()
        activity.heartbeat(progress)
