"""Play scenarios on a running stack, through its public interfaces only.

Per scenario: the admin CLI creates the world's tenants, keys and the agent (pointed at the
world's model, like any OpenAI-compatible upstream) and sets its evolution settings; the
team's agent serves its users through the gateway with the `openai` SDK, and users send
feedback to `/v1/feedback` (the agent reports to `/v1/events`); evolutions are started and
followed through the control API, with traffic going on while the live gates watch; then
fresh traffic measures what changed. Nothing reads the registry directly.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evoplane.control.client import ControlClient
from evoplane.scenarios.agent import ScenarioAgent
from evoplane.scenarios.catalog import Expect, Load, Scenario
from evoplane.scenarios.model import ScriptedModel
from evoplane.scenarios.upstream import ModelServer
from evoplane.scenarios.users import User, Visit
from evoplane.scenarios.world import World
from evoplane.simulation.evolutions import Operator, SimulationError, persons_change
from evoplane.simulation.progress import QuietReporter, Reporter
from evoplane.simulation.stack import Endpoints
from evoplane.simulation.traffic import first_time_success, play_sessions

__all__ = ["EvolutionRecord", "ScenarioError", "ScenarioResult", "SuiteScale", "run_scenarios"]


class ScenarioError(SimulationError):
    """The suite could not go on; the message says where it stopped and why."""


@dataclass(frozen=True)
class SuiteScale:
    """How much traffic, and the gate settings every scenario's agent gets (the policy keeps
    its defaults: 30 trajectories to act, 5 for a failure cluster)."""

    after: int = 36  # fresh sessions that measure a fix
    concurrency: int = 4
    gate: dict[str, Any] = field(
        default_factory=lambda: {
            "min_samples": 10,
            "min_tenant_samples": 5,
            # A few sessions a tenant a side tell no tenant's drop: tenants stop a
            # candidate on confident harm only (GateConfig.tenant_tolerance).
            "tenant_tolerance": None,
            "step_weights": [0.5],
            "step_seconds": 8.0,
            "shadow_seconds": 4.0,
            "max_extensions": 3,
            # No person answers here: an open canary rolls back at the end of its budget,
            # a look and three more (canary_seconds None), as it did before the ramp.
            "canary_seconds": None,
            "when_inconclusive": "roll_back",
            # Its users react to an answer at once: one left unanswered for 2 s was silent.
            "silence_seconds": 2.0,
        }
    )
    evolution_timeout: float = 900.0


@dataclass
class EvolutionRecord:
    """One evolution of a scenario, as the result table shows it."""

    expected: tuple[str, ...]
    evolution_id: str = ""
    action: str | None = None
    outcome: str | None = None
    reason: str = ""
    gates: list[str] = field(default_factory=list)
    before: float | None = None
    after: float | None = None
    seconds: float = 0.0


@dataclass
class ScenarioResult:
    name: str
    domain: str
    story: str
    evolutions: list[EvolutionRecord]
    passed: bool = False
    why: str = ""
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "domain": self.domain,
            "story": self.story,
            "passed": self.passed,
            "why": self.why,
            "seconds": round(self.seconds, 1),
            "evolutions": [vars(record) for record in self.evolutions],
        }


def run_scenarios(
    endpoints: Endpoints,
    scenarios: Sequence[Scenario],
    *,
    settings_env: dict[str, str],
    seed: int = 0,
    scale: SuiteScale = SuiteScale(),
    reporter: Reporter | None = None,
    on_result: Callable[[ScenarioResult], None] = lambda result: None,
) -> list[ScenarioResult]:
    """Play each scenario on the stack at `endpoints`, one after the other.

    Args:
        settings_env: the `EVOPLANE_*` variables that point the admin CLI at the stack's
            registry (its data directory and database URL).
    """
    reporter = reporter or QuietReporter()
    models: dict[str, ScriptedModel] = {}
    run = uuid.uuid4().hex[:4]
    tenancy = Tenancy(AdminCLI(settings_env), run)
    results = []
    with ModelServer(models) as server:
        for index, scenario in enumerate(scenarios):
            play = _ScenarioRun(
                scenario, endpoints, server, tenancy, models, run, seed + index, scale, reporter
            )
            result = play.run()
            results.append(result)
            on_result(result)
    return results


class AdminCLI:
    """The `evoplane` admin commands, run as a person runs them."""

    def __init__(self, env: dict[str, str]) -> None:
        import os

        self.env = {**os.environ, **env}
        self.command = [str(Path(sys.executable).with_name("evoplane"))]

    def __call__(self, *args: str) -> str:
        done = subprocess.run(
            [*self.command, *args], env=self.env, capture_output=True, text=True, timeout=120
        )
        if done.returncode != 0:
            raise ScenarioError(f"evoplane {' '.join(args)} failed: {done.stderr or done.stdout}")
        return done.stdout


class Tenancy:
    """The run's tenants and their keys, each created once (worlds share their tenants)."""

    def __init__(self, admin: AdminCLI, run: str) -> None:
        self.admin, self.run = admin, run
        self._keys: dict[str, str] = {}

    def name(self, tenant: str) -> str:
        return f"{tenant}-{self.run}"

    def key(self, tenant: str) -> str:
        """The tenant's key, creating the tenant on first use (its key may use any agent
        the tenant is granted)."""
        if tenant not in self._keys:
            self.admin("tenant", "create", self.name(tenant))
            issued = self.admin("key", "create", "--tenant", self.name(tenant))
            self._keys[tenant] = issued.strip().splitlines()[-1]
        return self._keys[tenant]


class _ScenarioRun:
    def __init__(
        self,
        scenario: Scenario,
        endpoints: Endpoints,
        server: ModelServer,
        tenancy: Tenancy,
        models: dict[str, ScriptedModel],
        run: str,
        seed: int,
        scale: SuiteScale,
        reporter: Reporter,
    ) -> None:
        self.scenario, self.endpoints, self.server = scenario, endpoints, server
        self.tenancy, self.admin = tenancy, tenancy.admin
        self.scale, self.reporter, self.seed = scale, reporter, seed
        self.world: World = scenario.world()
        self.agent = f"{scenario.name.replace('_', '-')}-{run}"
        self.model = f"{self.agent}-llm"
        models[self.model] = ScriptedModel(self.world)
        self.tenants = {tenant: tenancy.name(tenant) for tenant in self.world.tenants}
        self.control = ControlClient(endpoints.control, endpoints.admin_token)
        self.operator = Operator(self.control, scale.evolution_timeout, endpoints.catalog_ttl)
        self.agents: dict[str, ScenarioAgent] = {}
        self.ledger: list[tuple[float, Visit]] = []
        self._lock = threading.Lock()
        self._count = 0

    # --- the whole scenario ---------------------------------------------------------------

    def run(self) -> ScenarioResult:
        started = time.monotonic()
        result = ScenarioResult(self.scenario.name, self.world.name, self.scenario.story, [])
        try:
            self._setup()
            result.evolutions = self._play()
            result.passed, result.why = _verdict(self.scenario.expect, result.evolutions)
        except SimulationError as error:
            result.why = str(error)
        finally:
            for agent in self.agents.values():
                agent.close()
            self.control.close()
        result.seconds = time.monotonic() - started
        return result

    def _setup(self) -> None:
        self.reporter.phase(f"{self.scenario.name}: creating tenants, keys and the agent")
        keys = {base: self.tenancy.key(base) for base in self.tenants}
        self.admin(
            "agent", "create", self.agent,
            "--engine", "openai",
            "--base-url", self.server.base_url,
            "--model", self.model,
            "--instructions", self.world.instructions,
            "--tenants", ",".join(self.tenants.values()),
            "--author", "scenario-suite",
        )  # fmt: skip
        settings = {"gate": self.scale.gate}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
            json.dump(settings, file)
        try:
            self.admin("agent", "configure", self.agent, "--file", file.name)
        finally:
            Path(file.name).unlink()
        for base, key in keys.items():
            self.agents[base] = ScenarioAgent(
                self.agent, base, key, self.endpoints.gateway, self.world, self.scenario.agent
            )

    def _play(self) -> list[EvolutionRecord]:
        if self.scenario.plan == "hotfix":
            return self._hotfix()
        records = []
        for expect in self.scenario.expect:
            since = datetime.now(UTC)
            clock = time.monotonic()
            self._traffic(self.scenario.sessions, "traffic with the failure in")
            options = self._options(since)
            if self.scenario.plan == "candidate":
                options.update(persons_change(expect.actions[0], self._changed_spec()))
            record = self._evolve(expect, options, clock)
            records.append(record)
        return records

    def _hotfix(self) -> list[EvolutionRecord]:
        """A person promotes a change skipping the gates; then the policy decides."""
        since, clock = datetime.now(UTC), time.monotonic()
        self._traffic(self.scenario.sessions, "traffic before the hot-fix")
        options = self._options(since)
        options.update(
            persons_change(
                "harness",
                self._changed_spec(),
                actor="a person on call",
                reason="hot-fix: shorter instructions",
                gated=False,
            )
        )
        self._evolve(Expect(("harness",), False), options, clock, measure=False)
        promoted, hotfix_clock = datetime.now(UTC), time.monotonic()
        # The policy compares the hot-fix since its promotion with its parent over a period
        # as long before it: play at least as long as everything before took.
        self._traffic(
            self.scenario.sessions,
            "traffic on the hot-fix",
            at_least=hotfix_clock - clock,
        )
        (expect,) = self.scenario.expect
        return [self._evolve(expect, self._options(promoted), hotfix_clock)]

    # --- evolutions ------------------------------------------------------------------------

    def _options(self, since: datetime) -> dict[str, Any]:
        return {
            "window_since": since.isoformat(),
            "actor": "scenario-suite",
            "reason": f"scenario {self.scenario.name}",
        }

    def _evolve(
        self, expect: Expect, options: dict[str, Any], clock: float, *, measure: bool = True
    ) -> EvolutionRecord:
        record = EvolutionRecord(expected=expect.actions)
        evolution = self.operator.evolve(
            self.agent, options, on_stage=self._stage, live_traffic=self._live_traffic
        )
        live = evolution.live
        record.evolution_id, record.seconds = evolution.id, evolution.seconds
        record.action, record.outcome = live.get("action"), live.get("outcome")
        record.reason = live.get("reason") or ""
        record.gates = [_gate_words(gate) for gate in live.get("gates") or []]
        if measure:
            record.before = self._success(expect.target, since=clock, until=evolution.began)
            if expect.fixes:
                record.after = self._after(expect)
        return record

    def _follow(self, evolution_id: str) -> dict[str, Any]:
        """Follow an evolution started elsewhere to its end (benchmarks.control_plane)."""
        return self.operator.follow(
            evolution_id, on_stage=self._stage, live_traffic=self._live_traffic
        )

    def _stage(self, words: str) -> None:
        self.reporter.stage(f"{self.scenario.name}: {words}")

    def _live_traffic(self) -> None:
        self._traffic(self.scale.concurrency, "live traffic", quiet=True)

    def _changed_spec(self) -> dict[str, Any]:
        """The spec a person writes by hand: the agent's own, with their change."""
        spec = {
            "model": {"engine": "openai", "base_url": self.server.base_url, "model": self.model},
            "harness": {"instructions": self.world.instructions},
        }
        assert self.scenario.change is not None
        return self.scenario.change(spec)

    # --- traffic and measurements ----------------------------------------------------------

    def _after(self, expect: Expect) -> float | None:
        """First-time success on fresh traffic of the target, served by today's stable."""
        stable = self._stable()
        clock = time.monotonic()
        loads = [load for load in self.scenario.traffic if _targets(load, expect.target)]
        self._traffic(self.scale.after, "fresh traffic after the evolution", loads=loads)
        return self._success(expect.target, since=clock, version=stable)

    def _stable(self) -> str | None:
        return (self.control.versions(self.agent).get("aliases") or {}).get("stable")

    def _success(
        self,
        target: tuple[str, ...],
        *,
        since: float,
        until: float | None = None,
        version: str | None = None,
    ) -> float | None:
        return first_time_success(
            visit.ok
            for at, visit in self.ledger
            if at >= since
            and (until is None or at < until)
            and (version is None or visit.version == version)
            and (not target or _matches(visit, target))
        )

    def _traffic(
        self,
        count: int,
        text: str,
        *,
        at_least: float = 0.0,
        loads: Sequence[Load] | None = None,
        quiet: bool = False,
    ) -> None:
        """Play `count` sessions (and go on for `at_least` seconds), `concurrency` at once."""
        if not quiet:
            self.reporter.phase(f"{self.scenario.name}: {text}", total=count)
        loads = list(loads or self.scenario.traffic)
        play_sessions(
            lambda: self._session(loads),
            count,
            concurrency=self.scale.concurrency,
            at_least=at_least,
            on_done=self.reporter.advance,
        )

    def _session(self, loads: Sequence[Load]) -> None:
        with self._lock:
            self._count += 1
            rng = random.Random(self.seed * 1_000_003 + self._count)
            session = f"{self.agent}-s{self._count}"
        load = rng.choices(loads, [load.weight for load in loads])[0]
        tenant = rng.choice(load.tenants or self.world.tenants)
        task = self.world.remember(self.world.kinds[load.kind].make(rng, tenant))
        wants = self.scenario.wants.get(tenant, ())
        visit = User(rng, self.scenario.feedback).visit(self.agents[tenant], task, session, wants)
        with self._lock:
            self.ledger.append((time.monotonic(), visit))


def _matches(visit: Visit, target: tuple[str, ...]) -> bool:
    return any(
        visit.kind == kind and (tenant is None or visit.tenant == tenant)
        for kind, tenant in map(_target, target)
    )


def _target(text: str) -> tuple[str, str | None]:
    kind, _, tenant = text.partition("@")
    return kind, tenant or None


def _targets(load: Load, target: tuple[str, ...]) -> bool:
    return any(
        load.kind == kind and (tenant is None or load.tenants is None or tenant in load.tenants)
        for kind, tenant in map(_target, target)
    )


def _gate_words(gate: dict[str, Any]) -> str:
    verdict = "skipped" if gate.get("skipped") else gate.get("verdict")
    step = f"{gate['step']}" if gate.get("step") else ""
    return f"{gate.get('gate')}{step}:{verdict}"


def _verdict(expects: Sequence[Expect], records: Sequence[EvolutionRecord]) -> tuple[bool, str]:
    """Whether the scenario passed, and if not, the first reason why not."""
    for index, (expect, record) in enumerate(zip(expects, records, strict=True), start=1):
        where = f"evolution {index}" if len(expects) > 1 else "the evolution"
        if record.action not in expect.actions:
            return False, f"{where} chose {record.action}, expected {'/'.join(expect.actions)}"
        if not expect.fixes:
            if record.outcome == "promoted":
                return False, f"{where} promoted a candidate that should not reach users"
            continue
        if record.outcome not in {"promoted", "rolled_back"}:
            return False, f"{where} ended {record.outcome}: {record.reason}"
        if record.before is None or record.before > 0.5:
            return False, f"{where}: success before was {record.before} (the failure needs <= 0.5)"
        if record.after is None or record.after < 0.9:
            return False, f"{where}: success after was {record.after} (a fix needs >= 0.9)"
    return True, ""
