"""Run the demo on a running stack: set up the shops, then play each round.

A round is traffic (the customers of four shops talking to their agents through the
gateway), one evolution started through the control API and followed to its end, with
traffic continuing while the candidate is shadowed and canaried, since the live gates
judge real sessions. What happened is kept as `EvolutionRow`s: the signals the policy
read, the action it chose, every gate's verdict, the outcome and the reward before and
after, with links to the workflow in the Temporal UI and the run in MLflow.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import httpx

from evoplane.control.client import ControlClient
from evoplane.demo import world
from evoplane.demo.agent import SupportAgent
from evoplane.demo.drifts import Round
from evoplane.demo.tools import Platform
from evoplane.demo.users import Customer, Outcome, TicketKind

__all__ = [
    "FULL",
    "SMALL",
    "DemoError",
    "DemoResult",
    "DemoScale",
    "Endpoints",
    "EvolutionRow",
    "Reporter",
    "run_demo",
]

MODEL_DIR = Path(__file__).parent / "model"
COST_CAP = 24  # tokens
_LIVE_STAGES = {"shadow", "canary"}


class DemoError(RuntimeError):
    """The demo could not go on; the message says where it stopped and why."""


@dataclass(frozen=True)
class Endpoints:
    """Where the stack's services are."""

    gateway: str  # the OpenAI base_url, ".../v1"
    control: str
    admin_token: str
    registry_url: str
    temporal_ui: str | None = None
    mlflow: str | None = None
    catalog_ttl: float = 2.0  # how long the gateway may still route by aliases that moved


@dataclass(frozen=True)
class DemoScale:
    """How much traffic and how strict the thresholds: the full demo or the CI one.

    `policy`, `gate` and `training` become the agent's evolution settings (set through the
    control API); the full demo keeps the policy's defaults.
    """

    tickets: int
    concurrency: int = 3
    policy: dict[str, Any] = field(default_factory=dict)
    gate: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)
    # The replay gate is skipped, as an operator may: its generic safety suite asks for
    # refusals a 0.56M-parameter model cannot write, and replaying each window on both
    # versions would cost about a minute a round on 2 cores. The live gates judge instead.
    skip_gates: tuple[str, ...] = ("replay",)
    evolution_timeout: float = 900.0


# The weights round's training, sized to the demo's 10 minutes on 2 cores: a step samples 8
# completions of each of 6 prompts and updates on the groups with mixed rewards (about 5 s
# a step). Most of the window's requests are ones the model gets right every time, whose
# groups teach nothing, so a step may draw up to 6 more prompts to fill its batch.
# Completions may run to 96 tokens: a byte-level tool call such as
# `<tool_call>{"name": "lookup_order", ...}</tool_call>` is 85 tokens, and a call cut short
# scores as a wrong one.
_TRAINING = {
    "steps": 30,
    "prompts_per_step": 6,
    "fill_draws": 6,
    "group_size": 8,
    "max_new_tokens": 96,
    "learning_rate": 5e-4,
    # Without a KL penalty the window's tool calls crowd out what the model already did
    # well: retrained offline on one run's window, the answers to the base facts' questions
    # fell from 0.73 to 0.38 ("Gift cards are valid for threeye ars."); with kl_coef 0.1 they
    # held at 0.71, for a right-tool rate of 0.64 instead of 0.72 (base 0.31).
    "kl_coef": 0.1,
    "checkpoint_every": 10,
    "holdout": 0.1,
    # Every core (threads unset): no traffic runs while the candidate is built, and a step
    # took 4.2 s with two threads against 5.7 s with one on a slow 2-core host.
}

# The harness operator may change the instructions only: an earlier measurement on the demo
# model had the invoice lesson answer invoice questions 62% of the time, and 25% when the
# operator's two few-shot demos were added too (the warm start rarely saw demos). Sampled as
# the bot samples (temperature 1), the lesson lifts them from about 7% to 40%.
_HARNESS = {"max_bootstrapped_demos": 0, "max_labeled_demos": 0}

FULL = DemoScale(
    # The policy acts on 30 trajectories or more, and the window leaves out the tenth of
    # sessions a holdback keeps on the previous version: 34 tickets left 29 in one run (5
    # held back, which 34 tickets do about one round in four); with 40, fewer than 30 stay
    # about one round in 700.
    tickets=40,
    gate={
        "min_samples": 10,
        "min_tenant_samples": 5,
        "step_weights": [0.5],
        "step_seconds": 10.0,
        "shadow_seconds": 8.0,
        "max_extensions": 3,
    },
    training=_TRAINING,
)
SMALL = DemoScale(
    # The tool-schema round needs 3 trajectories with the refused argument: 20 tickets (18
    # after the holdback) once gave fewer in CI, a few-percent draw; 24 make it about 1%.
    tickets=24,
    policy={
        "min_trajectories": 14,
        "min_cluster_trajectories": 3,
        "regression_min_samples": 10,
        "canary_min_samples": 10,
    },
    gate={
        "min_samples": 6,
        "min_tenant_samples": 4,
        "step_weights": [0.5],
        "step_seconds": 6.0,
        "shadow_seconds": 5.0,
        "max_extensions": 3,
    },
    training={**_TRAINING, "steps": 20},
)


@dataclass
class EvolutionRow:
    """One evolution of the demo, as its table prints it."""

    round: str
    drift: str
    expected: str
    evolution_id: str
    action: str | None = None
    forced: bool = False
    reason: str = ""
    signals: dict[str, Any] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    gates: list[dict[str, Any]] = field(default_factory=list)
    outcome: str | None = None
    outcome_reason: str = ""
    stable_before: str | None = None
    stable_after: str | None = None
    candidate: str | None = None
    reward_before: float | None = None
    reward_after: float | None = None
    scenario_before: float | None = None
    scenario_after: float | None = None
    temporal_url: str | None = None
    mlflow_url: str | None = None
    seconds: float = 0.0


@dataclass
class DemoResult:
    rows: list[EvolutionRow]
    agent: str
    seconds: float
    tickets: int


class Reporter(Protocol):
    """What the CLI shows while the demo runs (progress bars); the tests pass a quiet one."""

    def phase(self, text: str, total: int | None = None) -> None: ...

    def advance(self, count: int = 1) -> None: ...

    def stage(self, text: str) -> None: ...

    def row(self, row: EvolutionRow) -> None: ...


class QuietReporter:
    def phase(self, text: str, total: int | None = None) -> None:
        pass

    def advance(self, count: int = 1) -> None:
        pass

    def stage(self, text: str) -> None:
        pass

    def row(self, row: EvolutionRow) -> None:
        pass


# --- traffic --------------------------------------------------------------------------------


class Traffic:
    """The shops' customers, `concurrency` at a time; every closed ticket goes to the ledger."""

    def __init__(
        self, agents: dict[str, SupportAgent], seed: int, concurrency: int, run: str
    ) -> None:
        self.agents, self.concurrency, self.run = agents, concurrency, run
        self.rng = random.Random(seed)
        self.seed = seed
        self.ledger: list[Outcome] = []
        self._count = 0
        self._lock = threading.Lock()

    def _next(self, mix: Sequence[tuple[TicketKind, float]]) -> tuple[TicketKind, str, int]:
        with self._lock:
            kinds = [kind for kind, _ in mix]
            kind = self.rng.choices(kinds, [weight for _, weight in mix])[0]
            tenant = self.rng.choice(kind.tenants)
            self._count += 1
            return kind, tenant, self.seed * 1_000_003 + self._count

    def _one(self, mix: Sequence[tuple[TicketKind, float]]) -> Outcome:
        kind, tenant, seed = self._next(mix)
        session = f"{self.run}-{seed % 1_000_003}"
        outcome = Customer(random.Random(seed)).visit(self.agents[tenant], kind, session, seed)
        with self._lock:
            self.ledger.append(outcome)
        return outcome

    def tickets(
        self,
        mix: Sequence[tuple[TicketKind, float]],
        count: int,
        *,
        on_ticket: Callable[[], None] = lambda: None,
        at_least: float = 0.0,
    ) -> list[Outcome]:
        """Play `count` tickets (and keep going for at least `at_least` seconds), with
        `concurrency` customers at the desk at any time: a new one comes as one leaves."""
        started = time.monotonic()
        done: list[Outcome] = []
        with ThreadPoolExecutor(self.concurrency) as pool:
            open_: set[Future[Outcome]] = set()
            while True:
                while len(open_) < self.concurrency and (
                    len(done) + len(open_) < count or time.monotonic() - started < at_least
                ):
                    open_.add(pool.submit(self._one, mix))
                if not open_:
                    return done
                closed, open_ = wait(open_, return_when=FIRST_COMPLETED)
                for ticket in closed:
                    done.append(ticket.result())
                    on_ticket()


# --- the demo -------------------------------------------------------------------------------


def run_demo(
    endpoints: Endpoints,
    rounds: Sequence[Round],
    *,
    scale: DemoScale = FULL,
    seed: int = 0,
    reporter: Reporter | None = None,
    model_dir: Path = MODEL_DIR,
    agent: str = world.AGENT,
) -> DemoResult:
    """Set up the support desk on the stack at `endpoints` and play `rounds`.

    Args:
        model_dir: the checkpoint the support bot starts on (the warm-started demo model).
        agent: the bot's name; a free variant (`support-bot-2`) where the registry has it.
            MLflow names the agent's prompts and models after it, so runs that share an
            MLflow server but not a registry need names of their own.
    """
    demo = _Demo(endpoints, scale, seed, reporter or QuietReporter(), model_dir, agent)
    try:
        return demo.run(rounds)
    finally:
        demo.close()


class _Demo:
    def __init__(
        self,
        endpoints: Endpoints,
        scale: DemoScale,
        seed: int,
        reporter: Reporter,
        model: Path,
        agent: str,
    ):
        from registry import create_db_engine

        self.endpoints, self.scale, self.seed, self.reporter = endpoints, scale, seed, reporter
        self.model = model
        self.engine = create_db_engine(endpoints.registry_url)
        self.control = ControlClient(endpoints.control, endpoints.admin_token)
        self.platform = Platform()
        self.run_id = uuid.uuid4().hex[:6]
        self.name = agent
        self.agent = ""
        self.traffic: Traffic | None = None

    def close(self) -> None:
        if self.traffic is not None:
            for agent in self.traffic.agents.values():
                agent.close()
        self.control.close()
        self.engine.dispose()

    # --- set up -------------------------------------------------------------------------

    def setup(self) -> None:
        from atdp import Harness, ModelRef, VersionSpec
        from registry import (
            AlreadyExistsError,
            create_agent,
            create_api_key,
            create_tenant,
            grant_agent,
            list_agents,
            transaction,
        )

        self.reporter.phase("setting up four shops, their keys and the support bot")
        spec = VersionSpec(
            model=ModelRef(engine="local", checkpoint=str(self.model.resolve()), model="demo-tiny"),
            harness=Harness(instructions=world.BASE_INSTRUCTIONS),
        )
        keys: dict[str, str] = {}
        with transaction(self.engine) as session:
            taken = {agent.name for agent in list_agents(session)}
            self.agent = _free_name(self.name, taken)
            create_agent(
                session,
                self.agent,
                spec,
                author="evoplane-demo",
                description="The shops' support bot (the demo's tiny model on the local engine)",
            )
            for tenant in world.COMPANIES:
                try:
                    create_tenant(session, tenant)
                except AlreadyExistsError:
                    pass
                grant_agent(session, tenant, self.agent)
                keys[tenant] = create_api_key(session, tenant, agents=[self.agent]).key
        self._configure(self.scale.policy)
        agents = {
            tenant: SupportAgent(self.agent, tenant, key, self.endpoints.gateway, self.platform)
            for tenant, key in keys.items()
        }
        self.traffic = Traffic(agents, self.seed, self.scale.concurrency, self.run_id)

    def _configure(self, policy: dict[str, Any]) -> None:
        """The agent's evolution settings, through the control API as an operator sets them."""
        settings = {
            "gate": self.scale.gate,
            "training": self.scale.training,
            "harness": _HARNESS,
        }
        if policy:
            settings["policy"] = policy
        self.control.configure(self.agent, settings)

    # --- rounds -------------------------------------------------------------------------

    def run(self, rounds: Sequence[Round]) -> DemoResult:
        started = time.monotonic()
        self.setup()
        rows: list[EvolutionRow] = []
        for round_ in rounds:
            self.platform.release = max(self.platform.release, round_.release)
            if round_.plan == "hotfix":
                found = self._hotfix_round(round_)
            else:
                found = [self._round(round_)]
            for row in found:
                self.reporter.row(row)
            rows += found
        assert self.traffic is not None
        return DemoResult(rows, self.agent, time.monotonic() - started, len(self.traffic.ledger))

    def _play(self, round_: Round, count: int, text: str, at_least: float = 0.0) -> list[Outcome]:
        assert self.traffic is not None
        self.reporter.phase(f"{round_.name}: {text}", total=count)
        return self.traffic.tickets(
            round_.mix, count, on_ticket=self.reporter.advance, at_least=at_least
        )

    def _window_tickets(self, round_: Round) -> int:
        """The tickets of the drift's traffic an evolution reads (see `Round.window`)."""
        return round(self.scale.tickets * round_.window)

    def _round(self, round_: Round) -> EvolutionRow:
        start = datetime.now(UTC)
        before = self._play(round_, self._window_tickets(round_), round_.drift)
        options = self._options(round_, start)
        if round_.plan == "cost_cut":
            options.update(
                force="harness",
                candidate=self._capped_spec(),
                actor="sam (finance)",
                reason=f"cap answers at {COST_CAP} tokens to cut cost",
            )
        return self._evolve(round_, options, before)

    def _hotfix_round(self, round_: Round) -> list[EvolutionRow]:
        """A person's gate-skipping hotfix, then the policy's own evolution."""
        start, clock = datetime.now(UTC), time.monotonic()
        count = self._window_tickets(round_)
        before = self._play(round_, count, "traffic before the hotfix")
        hotfix = self._options(round_, start)
        hotfix.update(
            force="harness",
            candidate=self._hotfix_spec(),
            skip_gates=["replay", "shadow", "canary"],
            actor="ana (on call)",
            reason="hotfix: shorter instructions, fewer tokens",
        )
        first = self._evolve(round_, hotfix, before, expected="(person's hotfix)")
        promoted = datetime.now(UTC)
        # The policy compares the hotfix since its promotion with its parent over a period
        # just as long before it. Playing at least as long as everything since the traffic
        # before began (that traffic and the hotfix's own evolution, which takes longer on a
        # loaded machine) puts all of the parent's traffic in that period.
        after = self._play(
            round_,
            count,
            "traffic on the hotfix",
            at_least=time.monotonic() - clock,
        )
        second = self._evolve(round_, self._options(round_, promoted), after)
        # As much traffic after the rollback as on the hotfix: half a round (10 tickets at
        # the CI scale) once read 0.50 against the hotfix's 0.58 after a right rollback.
        recovered = self._play(round_, count, "traffic after the evolution")
        # Each version's reward on its own tickets: a customer's session keeps the version
        # it started on, so tickets after a move are not all served by the new stable.
        first.reward_before = self._served_reward(before, first.stable_before)
        first.reward_after = second.reward_before = self._served_reward(after, first.candidate)
        second.reward_after = self._served_reward(recovered, second.stable_after)
        second.scenario_after = _success(recovered, round_.scenario)
        return [first, second]

    def _served_reward(self, tickets: list[Outcome], version: str | None) -> float | None:
        return self._mean_reward([o.trajectory_id for o in tickets if o.version == version])

    def _options(self, round_: Round, since: datetime) -> dict[str, Any]:
        """The evolution's options: its window is the drift's traffic since `since`, so
        earlier rounds' traffic and live gates stay out of it."""
        gate = dict(self.scale.gate)
        if round_.canary_length != 1.0 and "step_seconds" in gate:
            gate["step_seconds"] *= round_.canary_length
        return {
            "window_since": since.isoformat(),
            **({"gate": gate} if gate != self.scale.gate else {}),
            "skip_gates": list(self.scale.skip_gates),
            "actor": "evoplane-demo",
            "reason": f"demo round {round_.name}: {round_.drift}",
        }

    # --- one evolution ------------------------------------------------------------------

    def _evolve(
        self,
        round_: Round,
        options: dict[str, Any],
        before: list[Outcome],
        expected: str | None = None,
    ) -> EvolutionRow:
        stable_before = self._stable()
        started = self.control.evolve(self.agent, options)
        evolution_id = started["id"]
        clock = time.monotonic()
        live = self._follow(round_, evolution_id)
        row = _row(round_, evolution_id, live, expected or round_.expected)
        row.seconds = round(time.monotonic() - clock, 1)
        row.temporal_url = started.get("ui")
        row.mlflow_url = self._mlflow_url(live.get("mlflow_run_id"))
        row.stable_before, row.stable_after = stable_before, self._stable()
        # The demo's stack keeps its registry on SQLite, which cannot announce alias moves:
        # until the gateway's cached aliases expire, it may route new sessions by those the
        # evolution moved (to a canary it rolled back, say), so the next traffic waits.
        time.sleep(self.endpoints.catalog_ttl)
        canary = _last_gate(row.gates, "canary")
        if canary is not None and not canary.get("skipped"):
            reward = _metric(canary, "reward")
            if reward is not None:
                row.reward_before = reward.get("baseline_mean")
                row.reward_after = reward.get("candidate_mean")
        assert self.traffic is not None
        during = [o for o in self.traffic.ledger if o.at >= clock]
        row.scenario_before = _success(before, round_.scenario)
        served = [o for o in during if row.candidate and o.version == row.candidate]
        row.scenario_after = _success(served, round_.scenario)
        return row

    def _follow(self, round_: Round, evolution_id: str) -> dict[str, Any]:
        """Poll the evolution to its end, playing traffic while its live gates watch."""
        deadline = time.monotonic() + self.scale.evolution_timeout
        shown = None
        while time.monotonic() < deadline:
            found = self.control.evolution(evolution_id)
            live = found.get("live") or {}
            record = found.get("record") or {}
            stage = live.get("stage") or record.get("stage")
            if stage != shown:
                self.reporter.stage(f"{round_.name}: {_stage_words(stage, live)}")
                shown = stage
            if live.get("outcome"):
                return live
            if stage in _LIVE_STAGES:
                assert self.traffic is not None
                self.traffic.tickets(
                    round_.mix, self.scale.concurrency, on_ticket=self.reporter.advance
                )
            else:
                time.sleep(0.4)
        raise DemoError(
            f"evolution {evolution_id} did not finish within {self.scale.evolution_timeout:.0f}s; "
            "see it in the Temporal UI"
        )

    # --- reading the registry -----------------------------------------------------------

    def _stable(self) -> str | None:
        from registry import current_aliases, transaction

        with transaction(self.engine) as session:
            return current_aliases(session, self.agent).stable

    def _stable_spec(self) -> dict[str, Any]:
        from registry import current_aliases, get_version, transaction

        with transaction(self.engine) as session:
            stable = current_aliases(session, self.agent).stable
            return get_version(session, stable).spec.model_dump(mode="json")

    def _capped_spec(self) -> dict[str, Any]:
        spec = self._stable_spec()
        spec["guardrails"] = {**spec.get("guardrails", {}), "max_tokens": COST_CAP}
        return spec

    def _hotfix_spec(self) -> dict[str, Any]:
        spec = self._stable_spec()
        spec["harness"] = {**spec.get("harness", {}), "instructions": world.HOTFIX_INSTRUCTIONS}
        spec["harness"]["demos"] = []
        return spec

    def _mean_reward(self, trajectory_ids: Iterable[str]) -> float | None:
        from registry import effective_reward, rewards_by_trajectory, transaction

        ids = [uuid.UUID(t) for t in trajectory_ids]
        if not ids:
            return None
        _settle()
        with transaction(self.engine) as session:
            found = rewards_by_trajectory(session, ids)
        values = [r.value for i in ids if (r := effective_reward(found.get(i, []))) is not None]
        return round(sum(values) / len(values), 3) if values else None

    def _mlflow_url(self, run_id: str | None) -> str | None:
        if not run_id or not self.endpoints.mlflow:
            return None
        try:
            found = httpx.get(
                f"{self.endpoints.mlflow}/api/2.0/mlflow/runs/get",
                params={"run_id": run_id},
                timeout=10,
            ).json()
            experiment = found["run"]["info"]["experiment_id"]
        except (httpx.HTTPError, KeyError, ValueError):
            return f"{self.endpoints.mlflow}/#/runs/{run_id}"
        return f"{self.endpoints.mlflow}/#/experiments/{experiment}/runs/{run_id}"


def _stage_words(stage: str | None, live: dict[str, Any]) -> str:
    words = {
        "started": "evolution started",
        "analysing": "analysing the window",
        "deciding": "deciding",
        "building": f"building a {live.get('action') or ''} candidate",
        "replay": "replay gate",
        "shadow": f"shadow gate on {live.get('candidate_version')}",
        "canary": f"canary gate on {live.get('candidate_version')}",
        "promoting": "promoting",
        "rolling_back": "rolling back",
        "done": f"done: {live.get('outcome')}",
    }
    return words.get(stage or "", stage or "starting")


def _settle() -> None:
    """Give the gateway's capture writer a moment to commit the last rewards."""
    time.sleep(0.5)


def _free_name(name: str, taken: set[str]) -> str:
    if name not in taken:
        return name
    return next(f"{name}-{n}" for n in range(2, 10_000) if f"{name}-{n}" not in taken)


def _success(outcomes: Sequence[Outcome], labels: Sequence[str]) -> float | None:
    chosen = [o for o in outcomes if o.label in labels]
    if not chosen:
        return None
    return round(sum(o.first_try for o in chosen) / len(chosen), 3)


def _last_gate(gates: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((gate for gate in reversed(gates) if gate.get("gate") == name), None)


def _metric(gate: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next(
        (m for m in gate.get("metrics", []) if m.get("metric") == name and m.get("tenant") is None),
        None,
    )


def _row(round_: Round, evolution_id: str, live: dict[str, Any], expected: str) -> EvolutionRow:
    decision = live.get("decision") or {}
    return EvolutionRow(
        round=round_.name,
        drift=round_.drift,
        expected=expected,
        evolution_id=evolution_id,
        action=live.get("action"),
        forced=bool(decision.get("forced")),
        reason=decision.get("reason") or live.get("reason") or "",
        signals=decision.get("signals") or {},
        scores={s["action"]: s["score"] for s in decision.get("scores") or []},
        gates=live.get("gates") or [],
        outcome=live.get("outcome"),
        outcome_reason=live.get("reason") or "",
        candidate=live.get("candidate_version"),
    )
