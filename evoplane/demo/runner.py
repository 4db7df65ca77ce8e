"""Run the demo on a running stack: set up the shops, then play each round.

A round is traffic (the customers of four shops talking to their agents through the
gateway), one evolution started through the control API and followed to its end, with
traffic continuing while the candidate is shadowed and canaried, since the live gates
judge real sessions. What happened is kept as `EvolutionRow`s: the signals the policy
read, the action it chose, every gate's verdict, the outcome and the reward before and
after, with links to the workflow in the Temporal UI and the run in MLflow.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from activities.tracking.names import run_link
from evoplane.control.client import ControlClient
from evoplane.demo import world
from evoplane.demo.agent import SupportAgent
from evoplane.demo.drifts import Round
from evoplane.demo.reporting import DemoResult, EvolutionRow
from evoplane.demo.scale import FULL, DemoScale
from evoplane.demo.tools import Platform
from evoplane.demo.traffic import Traffic
from evoplane.demo.users import Outcome
from evoplane.simulation.evolutions import Operator, persons_change
from evoplane.simulation.progress import QuietReporter, Reporter
from evoplane.simulation.stack import Endpoints
from evoplane.simulation.traffic import first_time_success

__all__ = ["MODEL_DIR", "run_demo"]

MODEL_DIR = Path(__file__).parent / "model"
COST_CAP = 24  # tokens
REVIEWER = "lea (support lead)"


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
        self.operator = Operator(self.control, scale.evolution_timeout, endpoints.catalog_ttl)
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
            "harness": self.scale.harness,
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
            elif round_.plan == "review":
                found = self._review_round(round_)
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
                persons_change(
                    "harness",
                    self._capped_spec(),
                    actor="sam (finance)",
                    reason=f"cap answers at {COST_CAP} tokens to cut cost",
                )
            )
        return self._evolve(round_, options, before)

    def _hotfix_round(self, round_: Round) -> list[EvolutionRow]:
        """A person's gate-skipping hotfix, then the policy's own evolution."""
        start, clock = datetime.now(UTC), time.monotonic()
        count = self._window_tickets(round_)
        before = self._play(round_, count, "traffic before the hotfix")
        hotfix = self._options(round_, start)
        hotfix.update(
            persons_change(
                "harness",
                self._hotfix_spec(),
                actor="ana (on call)",
                reason="hotfix: shorter instructions, fewer tokens",
                gated=False,
            )
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

    def _review_round(self, round_: Round) -> list[EvolutionRow]:
        """The policy's evolution, a person's labels of what it queued, and its next one."""
        start = datetime.now(UTC)
        before = self._play(round_, self._window_tickets(round_), round_.drift)
        first = self._evolve(round_, self._options(round_, start), before, expected="noop")
        labelled = self._label_queue(round_)
        # The same window: the labels are on its trajectories.
        second = self._evolve(round_, self._options(round_, start), before)
        second.reviewed = labelled
        return [first, second]

    def _label_queue(self, round_: Round) -> int:
        """A support lead who knows the shop's policies works through the corrections the
        control plane could not read: each customer's story labelled with the policy it
        shows (`missing_fact`, the policy as the note); one that shows none is skipped.
        Returns how many were labelled."""
        self.reporter.stage(f"{round_.name}: {REVIEWER} reviews the queued corrections")
        queue = self.control.review(self.agent, kind="correction", limit=500)
        labelled = 0
        for item in queue["items"]:
            fact = world.told_fact(item["body"].get("text", ""))
            if fact is None:
                self.control.skip(item["id"], REVIEWER, "not about our policies")
                continue
            self.control.label(item["id"], REVIEWER, "missing_fact", note=fact.line)
            labelled += 1
        return labelled

    def _served_reward(self, tickets: list[Outcome], version: str | None) -> float | None:
        return self._mean_reward([o.trajectory_id for o in tickets if o.version == version])

    def _options(self, round_: Round, since: datetime) -> dict[str, Any]:
        """The evolution's options: its window is the drift's traffic since `since`, so
        earlier rounds' traffic and live gates stay out of it."""
        gate = dict(self.scale.gate)
        if round_.canary_length != 1.0:  # its looks, and how long it may go on, alike
            for key in ("step_seconds", "max_canary_seconds"):
                if key in gate:
                    gate[key] *= round_.canary_length
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
        # The demo's stack keeps its registry on SQLite, which cannot announce alias moves:
        # `evolve` waits out the gateway's cached aliases before the next traffic.
        evolution = self.operator.evolve(
            self.agent,
            options,
            on_stage=lambda words: self.reporter.stage(f"{round_.name}: {words}"),
            live_traffic=lambda: self._live_traffic(round_),
        )
        live, clock = evolution.live, evolution.began
        row = _row(round_, evolution.id, live, expected or round_.expected)
        row.seconds = evolution.seconds
        row.temporal_url = evolution.ui
        row.mlflow_url = self._mlflow_url(live.get("mlflow_run_id"))
        row.stable_before, row.stable_after = stable_before, self._stable()
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

    def _live_traffic(self, round_: Round) -> None:
        """A few of the round's tickets while the live gates watch."""
        assert self.traffic is not None
        self.traffic.tickets(round_.mix, self.scale.concurrency, on_ticket=self.reporter.advance)

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
        return run_link(self.endpoints.mlflow, experiment, run_id)


def _settle() -> None:
    """Give the gateway's capture writer a moment to commit the last rewards."""
    time.sleep(0.5)


def _free_name(name: str, taken: set[str]) -> str:
    if name not in taken:
        return name
    return next(f"{name}-{n}" for n in range(2, 10_000) if f"{name}-{n}" not in taken)


def _success(outcomes: Sequence[Outcome], labels: Sequence[str]) -> float | None:
    return first_time_success(o.first_try for o in outcomes if o.label in labels)


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
