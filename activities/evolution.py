"""The activities of an evolution: each wraps one registry, evolution or MLflow call.

Every activity may run more than once (a worker dies, a timeout fires), so each is
idempotent: records are keyed by the evolution id, alias moves are skipped when the alias
already points where asked, versions are found again by content hash, and the MLflow run
is found again by its evolution id tag. Errors a retry cannot fix are raised as
non-retryable `ApplicationError`s whose `type` says what happened.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from pydantic import ValidationError
from sqlalchemy.engine import Engine
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.deployment import DeploymentError, deploy_weights
from activities.evidence import canary_traffic, read_window, shadow_traffic
from activities.heartbeat import beating
from activities.models import (
    AliasChange,
    BeginResult,
    CandidateRequest,
    DecideRequest,
    EvolutionOptions,
    EvolutionRequest,
    FinishRequest,
    HoldbackEnd,
    HoldbackLook,
    HoldbackWatch,
    LiveGateRequest,
    Outcome,
    RegisterRequest,
    ReplayGateRequest,
    RollbackRequest,
    RollbackResult,
    StageRecord,
)
from activities.operators import (
    Operator,
    make_harness_operator,
    memory_operator,
    skill_operator,
    tool_schema_operator,
)
from activities.replay_gate import ReplayGate
from activities.review import keep_fixed_failures
from atdp import utcnow
from evolution.analysis import measure_window
from evolution.corrections import CorrectionJudge, judge_with
from evolution.decision import Action, DecisionRecord, decide
from evolution.gates import GateConfig, GateResult, Question, judge, question_for
from evolution.operators import Candidate, OperatorError
from evolution.samples import canary_metrics, shadow_metrics
from evolution.settings import EvolutionSettings
from evolution.window import WindowSpec
from registry import (
    Alias,
    EvolutionAlreadyRunning,
    EvolutionRecord,
    NotFoundError,
    agent_tenants,
    alias_history,
    append_stage,
    create_api_key,
    current_aliases,
    finish_evolution,
    get_agent,
    get_evolution,
    get_version,
    list_tenants,
    previous_stable,
    register_version,
    revoke_api_key,
    running_evolution,
    set_alias,
    start_evolution,
    tenant_agents,
    transaction,
    update_evolution,
)

__all__ = ["EvolutionActivities"]

log = logging.getLogger(__name__)


def _fatal(kind: str, message: str) -> ApplicationError:
    return ApplicationError(message, type=kind, non_retryable=True)


class EvolutionActivities:
    """Activities bound to one registry and (optionally) one MLflow tracker.

    Args:
        engine: the registry.
        tracker: an `activities.tracking.EvolutionTracker`, or None to run without MLflow.
        replay: the replay gate (it calls upstreams, so it owns HTTP clients).
    """

    def __init__(
        self,
        engine: Engine,
        tracker: Any | None,
        replay: ReplayGate,
        *,
        gateway_url: str | None = None,
        upstream_api_key: str | None = None,
    ) -> None:
        self.engine, self.tracker, self.replay = engine, tracker, replay
        self.upstream_api_key = upstream_api_key  # for SGLang admin calls (weight sync)
        self.gateway_url = gateway_url  # the harness operator's LM calls go through it

    def _track(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self.tracker is None:
            return None
        return getattr(self.tracker, method)(*args, **kwargs)

    # --- begin, decide, build -------------------------------------------------------------

    @activity.defn
    def begin(self, request: EvolutionRequest) -> BeginResult:
        """Record the evolution (one running per agent) and open its MLflow run."""
        info = activity.info()
        options = request.options
        now = utcnow()
        with transaction(self.engine) as session:
            try:
                agent = get_agent(session, request.agent)
            except NotFoundError as error:
                raise _fatal("AgentNotFound", str(error)) from None
            stable = current_aliases(session, request.agent).stable
            if stable is None:
                raise _fatal("NoStableVersion", f"agent {request.agent} has no stable version")
            try:
                start_evolution(
                    session,
                    info.workflow_id,
                    request.agent,
                    scope={"tenants": request.tenants},
                    options=options.model_dump(mode="json", exclude_none=True),
                    workflow_run_id=info.workflow_run_id,
                )
            except EvolutionAlreadyRunning as error:
                raise _fatal("EvolutionAlreadyRunning", str(error)) from None
            # The control API records an evolution before its workflow runs: known only now.
            update_evolution(
                session,
                info.workflow_id,
                parent_version_id=stable,
                workflow_run_id=info.workflow_run_id,
            )
            tenants = request.tenants or agent_tenants(session, request.agent)
            try:
                settings = EvolutionSettings.of(agent.settings)
            except ValidationError as error:
                raise _fatal("InvalidAgentSettings", f"{request.agent}: {error}") from None
        gate = options.gate or settings.gate
        policy = options.policy or settings.policy
        window = WindowSpec(
            agent=request.agent,
            tenants=request.tenants,
            since=None if options.window_last else _window_start(options, now),
            until=now,
            last=options.window_last,
        )
        run_id = self._track(
            "start_run",
            agent=request.agent,
            evolution_id=info.workflow_id,
            workflow_id=info.workflow_id,
            namespace=info.workflow_namespace,
            params={
                "parent_version": stable,
                "window": window.model_dump(mode="json", exclude_none=True),
                "gate": gate.model_dump(mode="json"),
                "options": options.model_dump(
                    mode="json", exclude_none=True, exclude={"candidate"}
                ),
            },
        )
        if run_id is not None:
            with transaction(self.engine) as session:
                update_evolution(session, info.workflow_id, mlflow_run_id=run_id)
                parent = get_version(session, stable)
            # The baseline goes to the prompt registry too, so aliases can always be mirrored.
            self._track(
                "register_prompt",
                request.agent,
                stable,
                parent.spec.harness.model_dump(mode="json"),
                ["stable"],
            )
        return BeginResult(
            parent_version=stable,
            mlflow_run_id=run_id,
            gate=gate,
            policy=policy,
            window=window,
            tenants=tenants,
        )

    @activity.defn
    def decide(self, request: DecideRequest) -> DecisionRecord:
        """Analyse the window and choose the action; the record goes to the registry and MLflow.

        The window is read in one transaction and measured after it: a judge model may read
        the corrections, and no transaction waits on it.
        """
        with beating():
            with transaction(self.engine) as session:
                records = read_window(session, request.window)
            with self._correction_judge(request.window.agent) as reader:
                stats = measure_window(records, judge=reader)
        teacher, distill_teacher = self._teachers(request)
        decision = decide(
            stats,
            request.policy,
            force=request.force,
            teacher=teacher,
            distill_teacher=distill_teacher,
            gate=request.gate,
        )
        with transaction(self.engine) as session:
            update_evolution(
                session,
                request.evolution_id,
                action=decision.action.value,
                stage="deciding",
                decision=decision.model_dump(mode="json"),
            )
        if request.mlflow_run_id:
            self._track("log_decision", request.mlflow_run_id, decision.model_dump(mode="json"))
            self._track("log_params", request.mlflow_run_id, {"action": decision.action.value})
        return decision

    def _teachers(self, request: DecideRequest) -> tuple[bool, bool]:
        """Whether the agent's training has a teacher model (SFT targets from replay), and a
        local one to distil from."""
        with transaction(self.engine) as session:
            agent = get_agent(session, request.window.agent)
            training = EvolutionSettings.of(agent.settings).training
            return training.teacher is not None, training.distill_from is not None

    @contextmanager
    def _correction_judge(self, agent: str) -> Iterator[CorrectionJudge | None]:
        """The agent's judge model through the gateway, under a key made for this analysis
        and revoked after it; None when the agent has none (or no gateway is wired)."""
        with transaction(self.engine) as session:
            chosen = EvolutionSettings.of(get_agent(session, agent).settings).judge
            if chosen is None or not self.gateway_url:
                issued = None
            else:
                tenant = chosen.tenant or _tenant_of(session, chosen.agent)
                issued = create_api_key(session, tenant, agents=[chosen.agent])
        if issued is None:
            yield None
            return
        try:
            with httpx.Client(base_url=self.gateway_url, timeout=60) as http:
                yield judge_with(_judge_completion(http, chosen.agent, issued.key))
        finally:
            with transaction(self.engine) as session:
                revoke_api_key(session, issued.id)

    @activity.defn
    def build_candidate(self, request: CandidateRequest) -> Candidate:
        """The candidate: the spec a person supplied, or the chosen action's operator's."""
        if request.candidate is not None:
            return Candidate(
                spec=request.candidate,
                summary=f"a candidate supplied with the evolution ({request.decision.action})",
            )
        if request.decision.action is Action.HARNESS and self.gateway_url:
            return self._build_harness(request)
        operator = OPERATORS.get(request.decision.action)
        if request.decision.action is Action.HARNESS:
            raise _fatal(
                "OperatorNotAvailable",
                "the harness operator needs the gateway for its evaluation calls: set "
                "EVOPLANE_GATEWAY_URL (or run the embedded gateway) for this worker",
            )
        if operator is None:
            raise _fatal(
                "OperatorNotAvailable",
                f"the {request.decision.action.value} operator is not available in this "
                "build; to evaluate a change now, pass your own candidate spec "
                "(`evoplane evolve --candidate spec.json`)",
            )
        if request.decision.action is Action.MEMORY:
            # The facts come from the cluster the analysis found: read as it read them.
            with self._correction_judge(request.agent) as reader:
                return self._run_operator(memory_operator(reader), request)
        if request.decision.action is Action.SKILL:
            # Users' guidance is read as the analysis read it, so the step is found again.
            with self._correction_judge(request.agent) as reader:
                return self._run_operator(skill_operator(reader), request)
        return self._run_operator(operator, request)

    def _run_operator(self, operator: Operator, request: CandidateRequest) -> Candidate:
        """One operator run on the parent; nothing to propose is not worth a retry.

        The evidence is read in one transaction and the proposal written in another: no
        transaction stays open while the operator decides (hours, for a DSPy optimisation).
        """
        try:
            with transaction(self.engine) as session:
                parent = get_version(session, request.parent_version)
                evidence = operator.read(session, parent, request.decision, request.window)
            proposal = operator.propose(evidence, parent, request.decision)
            if operator.write is None:
                return proposal
            with transaction(self.engine) as session:
                return operator.write(session, proposal)
        except OperatorError as error:
            raise _fatal("NothingToPropose", str(error)) from None

    def _build_harness(self, request: CandidateRequest) -> Candidate:
        """The harness operator, its DSPy calls served by the gateway as evaluation traffic.

        They authenticate with a key made for this run and revoked after it, as a tenant
        the decision's evidence comes from, so memory and tool schemas apply as they would
        for that tenant; the version's own harness is left out (the program brings one).
        """
        with transaction(self.engine) as session:
            tenant = _evaluation_tenant(session, request)
            issued = create_api_key(session, tenant, agents=[request.agent])
        try:
            lm = _gateway_lm(self.gateway_url, request.agent, issued.key)
            return self._run_operator(make_harness_operator(lm), request)
        finally:
            with transaction(self.engine) as session:
                revoke_api_key(session, issued.id)

    @activity.defn
    def register_candidate(self, request: RegisterRequest) -> str:
        """Register the candidate (found again by content hash on a retry)."""
        with transaction(self.engine) as session:
            parent = get_version(session, request.parent_version)
            spec = request.candidate.spec
            if spec.content_hash() == parent.content_hash:
                raise _fatal(
                    "CandidateUnchanged",
                    f"the candidate is identical to {parent.id}; nothing to evaluate",
                )
            version = register_version(
                session,
                request.agent,
                spec,
                parent_id=parent.id,
                author=f"evolution:{request.evolution_id}",
                reason=request.reason,
            )
            update_evolution(
                session, request.evolution_id, candidate_version_id=version.id, stage="building"
            )
            built = request.candidate
            append_stage(
                session,
                request.evolution_id,
                {
                    "stage": "build",
                    "version": version.id,
                    "summary": built.summary,
                    "changes": built.changes,
                    "evidence": built.evidence,
                },
            )
        if request.mlflow_run_id:
            self._track("log_params", request.mlflow_run_id, {"candidate_version": version.id})
            self._track(
                "log_candidate",
                request.mlflow_run_id,
                parent_spec=parent.spec.model_dump(mode="json"),
                candidate_spec=version.spec.model_dump(mode="json"),
                checkpoint=version.spec.model.checkpoint,
            )
            self._track(
                "register_prompt",
                request.agent,
                version.id,
                version.spec.harness.model_dump(mode="json"),
                [],
                run_id=request.mlflow_run_id,
            )
            if version.spec.model.checkpoint:
                self._track(
                    "register_checkpoint",
                    request.agent,
                    version.id,
                    version.spec.model.checkpoint,
                    [],
                    run_id=request.mlflow_run_id,
                )
            self._track("name_run", request.mlflow_run_id, "gating")
        return version.id

    # --- gates ----------------------------------------------------------------------------

    @activity.defn
    async def replay_gate(self, request: ReplayGateRequest) -> GateResult:
        """Replay recorded traffic and the safety suite against the candidate."""
        return await self.replay.run(request)

    @activity.defn
    def judge_live(self, request: LiveGateRequest) -> GateResult:
        """Judge shadow or canary traffic of candidate vs baseline since the gate began."""
        window = WindowSpec(agent=request.agent, tenants=request.tenants, since=request.since)
        baseline, candidate = request.baseline_version, request.candidate_version
        with transaction(self.engine) as session:
            if request.gate == "shadow":
                metrics = shadow_metrics(shadow_traffic(session, window, baseline, candidate))
            else:
                settled = _settled_before(request.config)
                traffic = canary_traffic(session, window, baseline, candidate)
                metrics = canary_metrics(traffic, settled_before=settled)
        return judge(
            request.gate,
            metrics,
            request.config,
            step=request.step,
            weight=request.weight,
            question=question_for(request.action),
        )

    @activity.defn
    def judge_holdback(self, watch: HoldbackWatch) -> HoldbackLook:
        """Stable against the held-back parent on the holdback's traffic (non-inferiority),
        while the holdback runs as watched; the agent's running evolution, if any."""
        with transaction(self.engine) as session:
            if not _watched(session, watch):
                return HoldbackLook(watching=False)
            running = running_evolution(session, watch.agent)
            window = WindowSpec(agent=watch.agent, tenants=watch.tenants, since=watch.since)
            metrics = canary_metrics(
                canary_traffic(session, window, watch.parent, watch.stable),
                settled_before=_settled_before(watch.gate),
            )
        result = judge("holdback", metrics, watch.gate, question=Question.NON_INFERIORITY)
        return HoldbackLook(watching=True, evolution=running.id if running else None, result=result)

    @activity.defn
    def end_holdback(self, end: HoldbackEnd) -> None:
        """Clear the holdback if it still runs as watched, and keep why (and its last
        judgement) among the stages of the evolution that began it; a holdback that ended
        meanwhile (its watcher looked just before) is left as it is."""
        watch = end.watch
        with transaction(self.engine) as session:
            if not _watched(session, watch):
                return
            if end.clear:
                set_alias(
                    session,
                    watch.agent,
                    Alias.HOLDBACK,
                    None,
                    actor="holdback",
                    reason=end.reason,
                    evolution_id=watch.evolution_id,
                )
            result = end.result.model_dump(mode="json") if end.result else {}
            record = {**result, "stage": "holdback", "reason": end.reason}
            append_stage(session, watch.evolution_id, record)

    @activity.defn
    def record_stage(self, request: StageRecord) -> None:
        """Record where the evolution is, with a gate's result or a build that could not help."""
        changes = {"stage": request.stage.value}
        if request.next_action is not None:
            changes["action"] = request.next_action.value
        with transaction(self.engine) as session:
            update_evolution(session, request.evolution_id, **changes)
            if request.result is not None:
                result = request.result.model_dump(mode="json")
                append_stage(session, request.evolution_id, {**result, "step": request.step})
            if request.tried is not None:
                tried = request.tried.model_dump(mode="json")
                append_stage(session, request.evolution_id, {"stage": "build", **tried})
        if request.mlflow_run_id and request.result is not None:
            self._track(
                "log_gate",
                request.mlflow_run_id,
                request.result.model_dump(mode="json"),
                step=request.step,
            )
        if request.mlflow_run_id and request.tried is not None:
            tried = request.tried
            self._track(
                "log_params", request.mlflow_run_id, {f"tried.{tried.action}": tried.outcome}
            )

    # --- aliases, rollback, finish ----------------------------------------------------------

    @activity.defn
    def move_alias(self, change: AliasChange) -> datetime:
        """Point an alias; returns when the move took effect (a gate step's start).

        A retry finds the alias already there and returns the time of that move.
        """
        self._deploy(change.agent, change.alias, change.version_id)
        with transaction(self.engine) as session:
            state = current_aliases(session, change.agent)
            current = getattr(state, change.alias)
            weighted = change.alias in ("canary", "holdback")
            weight_now = getattr(state, f"{change.alias}_weight") if weighted else None
            wanted_weight = change.weight if weighted else None
            if current == change.version_id and (
                change.version_id is None or weight_now == wanted_weight
            ):
                history = alias_history(session, change.agent, Alias(change.alias))
                return history[-1].at if history else utcnow()
            if (
                change.alias == "canary"
                and change.weight is not None
                and change.weight + state.holdback_weight > 1.0
            ):
                set_alias(  # the canary needs the holdback's sessions: the holdback ends
                    session,
                    change.agent,
                    Alias.HOLDBACK,
                    None,
                    actor=change.actor,
                    reason=f"a {change.weight:.0%} canary needs the holdback's share",
                    evolution_id=change.evolution_id,
                )
            move = set_alias(
                session,
                change.agent,
                Alias(change.alias),
                change.version_id,
                weight=change.weight,
                actor=change.actor,
                reason=change.reason,
                evolution_id=change.evolution_id,
            )
            aliases = current_aliases(session, change.agent)
        self._mirror(change.agent, aliases)
        return move.at

    def _deploy(self, agent: str, alias: str, version_id: str | None) -> None:
        """The version's engines load its weights before the alias points at it."""
        if version_id is None:
            return
        with transaction(self.engine) as session:
            version = get_version(session, version_id)
            stable_id = current_aliases(session, agent).stable
            stable = get_version(session, stable_id) if stable_id else None
        try:
            done = deploy_weights(version, alias, stable=stable, api_key=self.upstream_api_key)
        except DeploymentError as error:
            raise _fatal("DeploymentFailed", str(error)) from None
        if done:
            activity.logger.info("deployed %s for %s: %s", version_id, alias, "; ".join(done))

    def _mirror(self, agent: str, aliases: Any) -> None:
        """MLflow's prompt and model aliases follow the registry (which stays the truth)."""
        if self.tracker is None:
            return
        wanted = {"stable": aliases.stable, "canary": aliases.canary}
        for mirror in ("mirror_prompt_aliases", "mirror_model_aliases"):
            try:
                getattr(self.tracker, mirror)(agent, wanted)
            except ValueError:
                pass  # a version without a prompt or checkpoint there: nothing to mirror
            except Exception as error:  # noqa: BLE001 - a mirror must not fail a promotion
                log.warning("could not mirror aliases of %s to MLflow: %s", agent, error)

    @activity.defn
    def rollback(self, request: RollbackRequest) -> RollbackResult:
        """Stable back to `to_version` (default: the stable before it); canary, shadow and
        holdback cleared.

        The move is tagged with the workflow id, so a retry finds it done instead of
        rolling back a second time.
        """
        marker = request.evolution_id or activity.info().workflow_id
        with transaction(self.engine) as session:
            done = [
                m
                for m in alias_history(session, request.agent, Alias.STABLE)
                if m.evolution_id == marker
            ]
            state = current_aliases(session, request.agent)
            if done:
                target, source = done[-1].version_id, None
            else:
                target = request.to_version or previous_stable(session, request.agent)
                if target is None:
                    raise _fatal(
                        "NothingToRollBackTo",
                        f"agent {request.agent} has had only one stable version; name one "
                        "with --to",
                    )
                source = state.stable
                reason = request.reason or "rollback"
                set_alias(
                    session,
                    request.agent,
                    Alias.STABLE,
                    target,
                    actor=request.actor,
                    reason=reason,
                    evolution_id=marker,
                )
            for alias in (Alias.CANARY, Alias.SHADOW, Alias.HOLDBACK):
                if getattr(current_aliases(session, request.agent), alias.value) is not None:
                    set_alias(
                        session,
                        request.agent,
                        alias,
                        None,
                        actor=request.actor,
                        reason=f"rollback: {request.reason}",
                        evolution_id=marker,
                    )
            aliases = current_aliases(session, request.agent)
        self._deploy(request.agent, "stable", target)  # the restored weights, once committed
        self._mirror(request.agent, aliases)
        return RollbackResult(agent=request.agent, from_version=source, to_version=target)

    @activity.defn
    def finish(self, request: FinishRequest) -> None:
        with transaction(self.engine) as session:
            finish_evolution(session, request.evolution_id, request.outcome.value)
            record = get_evolution(session, request.evolution_id)
        if request.mlflow_run_id:
            self._track(
                "finish", request.mlflow_run_id, request.outcome.value, action=record.action
            )
        if request.outcome is Outcome.PROMOTED:
            self._keep_fixed(record)

    def _keep_fixed(self, record: EvolutionRecord) -> None:
        """The past failures a promotion fixed join the evaluation set, to stay fixed; a
        failure to keep them never fails the promotion that already happened."""
        try:
            with transaction(self.engine) as session:
                kept = keep_fixed_failures(session, record)
            if kept is not None:
                self._track("mirror_evaluation_set", record.agent, kept.model_dump(mode="json"))
        except Exception as error:  # noqa: BLE001 - the evolution is over; log and go on
            log.warning("could not keep the failures %s fixed: %s", record.id, error)


def _settled_before(gate: GateConfig) -> datetime:
    """Sessions answered before this moment and since left without a reward count as
    accepted at this look (`GateConfig.silence_seconds`)."""
    return datetime.now(UTC) - timedelta(seconds=gate.silence_seconds)


def _watched(session: Any, watch: HoldbackWatch) -> bool:
    """The holdback still runs as `watch` saw it begin: stable and the held-back version
    unchanged since the move that began it (another agent of the same name, in another
    registry, never matches)."""
    try:
        aliases = current_aliases(session, watch.agent)
    except NotFoundError:
        return False
    if (aliases.stable, aliases.holdback) != (watch.stable, watch.parent):
        return False
    moves = alias_history(session, watch.agent, Alias.HOLDBACK)
    return bool(moves) and (moves[-1].at, moves[-1].evolution_id) == (
        watch.since,
        watch.evolution_id,
    )


def _window_start(options: EvolutionOptions, now: datetime) -> datetime:
    """Where a time window starts: `window_since`, else `window_minutes` before now."""
    if options.window_since is not None:
        return options.window_since.astimezone(UTC)
    return now - timedelta(minutes=options.window_minutes)


def _evaluation_tenant(session: Any, request: CandidateRequest) -> str:
    """A tenant whose traffic the decision rests on (and that may use the agent)."""
    target = request.decision.target
    preferred = [*(target.tenants if target else []), *(request.window.tenants or [])]
    granted = [
        t.name for t in list_tenants(session) if request.agent in tenant_agents(session, t.name)
    ]
    for tenant in [*preferred, *granted]:
        if tenant in granted:
            return tenant
    raise _fatal("NoTenant", f"no tenant may use agent {request.agent}")


def _tenant_of(session: Any, agent: str) -> str:
    """A tenant that may use `agent`."""
    for tenant in list_tenants(session):
        if agent in tenant_agents(session, tenant.name):
            return tenant.name
    raise _fatal("NoTenant", f"no tenant may use the judge agent {agent}")


def _judge_completion(http: httpx.Client, agent: str, key: str) -> Callable[[str], str]:
    """prompt -> the judge agent's answer, asked through the gateway as evaluation traffic."""

    def complete(prompt: str) -> str:
        response = http.post(
            "/chat/completions",
            json={
                "model": agent,
                "messages": [{"role": "user", "content": prompt}],
                "temperature": 0,
            },
            headers={"Authorization": f"Bearer {key}", "X-Evoplane-Traffic": "evaluation"},
        )
        response.raise_for_status()
        return response.json()["choices"][0]["message"].get("content") or ""

    return complete


def _gateway_lm(gateway_url: str, agent: str, key: str):
    """An LM factory for DSPy: the agent through the gateway, pinned, as evaluation traffic."""
    import dspy

    def factory(version_id: str):
        return dspy.LM(
            f"openai/{agent}",
            api_base=gateway_url,
            api_key=key,
            cache=False,
            extra_headers={
                "X-Evoplane-Traffic": "evaluation",
                "X-Evoplane-Version": version_id,
                "X-Evoplane-Harness": "off",
            },
        )

    return factory


# Operators by action (evolution.operators.Operator): each proposes a new spec from the
# parent and the decision, never mutating a version.
OPERATORS: dict[Action, Operator] = {
    Action.MEMORY: memory_operator(),
    Action.SKILL: skill_operator(),
    Action.TOOL_SCHEMA: tool_schema_operator(),
}
