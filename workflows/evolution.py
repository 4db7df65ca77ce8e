"""EvolutionWorkflow: one governed change of one agent, from window to promotion or rollback.

    begin -> [code scorers] -> analyse window -> decide -> [review queue] -> build candidate
      -> register version -> replay gate -> [approval] -> shadow gate -> canary gate in
      weight steps -> [approval] -> promote -> holdback (a workflow of its own)
                                       (any failed gate: abort, candidate never stable)

The agent's code scorers score the window's traffic before it is read, so their rewards
count; after the decision, what needs a person goes to the review queue. Neither can stop
the evolution: a scorer or queue that fails is said in the details, and it goes on.

The canary's steps advance while no harm is evident; its last step must answer the
question. One still unanswered at the end of its budget does what the agent's settings say
(`GateConfig.when_inconclusive`): waits for a person's `answer_canary`, extends, or rolls
back.

An operator with nothing to propose (or one this worker cannot run) is no fault: the
evolution records why and builds the decision's next-best action instead, and ends noop
when none is left.

Only orchestration lives here; every read, write and judgement is an activity. The status
query, the Stage/Action/Outcome search attributes and the current details say what is
happening in words, so the Temporal UI is enough to follow an evolution.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from activities.evolution import EvolutionActivities
    from activities.models import (
        AliasChange,
        Approval,
        ApprovalPoint,
        BeginResult,
        CanaryAnswer,
        CandidateRequest,
        DecideRequest,
        EvolutionOptions,
        EvolutionRequest,
        EvolutionStatus,
        FinishRequest,
        HoldbackWatch,
        LiveGateRequest,
        Outcome,
        RegisterRequest,
        ReplayGateRequest,
        ReviewRequest,
        RollbackRequest,
        ScoreReport,
        ScoreRequest,
        Stage,
        StageRecord,
        TriedAction,
    )
    from activities.review import ReviewActivities
    from activities.scorers import ScorerActivities
    from activities.training import TrainingActivities
    from evolution.decision import Action, DecisionRecord, fall_back, fallbacks
    from evolution.gates import GateConfig, GateResult, Verdict
    from evolution.gates.canary import Move, canary_move, harm_checked
    from evolution.gates.plan import CanaryPlan
    from evolution.operators import Candidate
    from workflows.canary import Ramp, duration, step_words
    from workflows.naming import holdback_workflow_id
    from workflows.queues import CONTROL_QUEUE, GPU_QUEUE
    from workflows.search_attributes import ACTION, AGENT, OUTCOME, STAGE, TENANT

__all__ = ["EvolutionWorkflow"]

_QUICK = timedelta(minutes=2)
_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=30), maximum_attempts=20)
# Work beside the evolution (code scorers, the review queue): a few tries, then go on.
_ASIDE_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=30), maximum_attempts=3)
# Build errors that say the action's operator cannot help here, not that anything broke.
_CANNOT_HELP = {
    "NothingToPropose": "nothing_to_propose",
    "NothingToTrain": "nothing_to_propose",  # the weight operator's words for it
    "OperatorNotAvailable": "operator_not_available",
}


@workflow.defn
class EvolutionWorkflow:
    def __init__(self) -> None:
        self._status: EvolutionStatus | None = None
        self._approvals: dict[str, Approval] = {}
        self._rejection: Approval | None = None
        self._abort: Approval | None = None
        self._options: EvolutionOptions | None = None
        self._answer: CanaryAnswer | None = None  # a person's answer, until it is applied
        self._promoted_over: CanaryAnswer | None = None  # promoted over an open canary
        self._queueing: asyncio.Task | None = None  # the review queue, beside the evolution

    # --- what people see and send ---------------------------------------------------------

    @workflow.query
    def status(self) -> EvolutionStatus:
        assert self._status is not None
        return self._status

    @workflow.update
    async def approve(self, approval: Approval) -> EvolutionStatus:
        """Let the evolution past the approval point it is waiting at."""
        point = self._status.awaiting_approval
        self._approvals[point] = approval
        await workflow.wait_condition(lambda: self._status.awaiting_approval != point)
        return self._status

    @approve.validator
    def _validate_approve(self, approval: Approval) -> None:
        self._require_waiting("approve")

    @workflow.update
    async def reject(self, rejection: Approval) -> EvolutionStatus:
        """Stop the evolution at its approval point; the candidate never goes live."""
        self._rejection = rejection
        await workflow.wait_condition(lambda: self._status.outcome is not None)
        return self._status

    @reject.validator
    def _validate_reject(self, rejection: Approval) -> None:
        self._require_waiting("reject")

    @workflow.update
    async def answer_canary(self, answer: CanaryAnswer) -> EvolutionStatus:
        """Answer a canary inconclusive at the end of its budget: extend it, promote it,
        or roll it back."""
        self._answer = answer
        await workflow.wait_condition(lambda: self._answer is None)
        return self._status

    @answer_canary.validator
    def _validate_answer_canary(self, answer: CanaryAnswer) -> None:
        if self._status is None or self._status.inconclusive is None:
            stage = self._status.stage if self._status else "starting"
            raise ValueError(f"nothing to answer: no canary is waiting for a person ({stage})")
        if self._answer is not None:
            raise ValueError(f"{self._answer.actor}'s answer is being applied")

    @workflow.signal
    def abort(self, request: Approval) -> None:
        """Stop at the next step boundary; live aliases go back to how they were."""
        self._abort = request

    def _require_waiting(self, verb: str) -> None:
        if self._status is None or self._status.awaiting_approval is None:
            stage = self._status.stage if self._status else "starting"
            raise ValueError(f"nothing to {verb}: the evolution is not awaiting approval ({stage})")

    # --- the run --------------------------------------------------------------------------

    @workflow.run
    async def run(self, request: EvolutionRequest) -> EvolutionStatus:
        evolution_id = workflow.info().workflow_id
        self._options = request.options
        self._status = EvolutionStatus(
            evolution_id=evolution_id, agent=request.agent, stage=Stage.STARTED
        )
        workflow.upsert_search_attributes(
            [AGENT.value_set(request.agent), STAGE.value_set(Stage.STARTED)]
            + ([TENANT.value_set(request.tenants)] if request.tenants else [])
        )
        begun: BeginResult = await self._activity(
            EvolutionActivities.begin, request, summary="record the evolution, open its MLflow run"
        )
        self._update(parent_version=begun.parent_version, mlflow_run_id=begun.mlflow_run_id)
        if not request.tenants and begun.tenants and workflow.patched("tenant-attribute"):
            # Every tenant the agent serves is in scope: a search by tenant finds it too.
            workflow.upsert_search_attributes([TENANT.value_set(begun.tenants)])
        try:
            outcome, reason = await self._evolve(request, begun)
        except ActivityError as error:  # retries exhausted, or an error a retry cannot fix
            cause = error.cause
            words = (
                f"{cause.type}: {cause.message}"
                if isinstance(cause, ApplicationError)
                else str(cause)
            )
            outcome, reason = Outcome.FAILED, words
            await self._clear_live(reason)
        if self._queueing is not None:
            await self._queueing
        return await self._finish(outcome, reason)

    async def _evolve(self, request: EvolutionRequest, begun: BeginResult) -> tuple[Outcome, str]:
        options, agent = request.options, request.agent
        await self._stage(Stage.ANALYSING, f"reading the window: {_window_words(begun)}")
        if workflow.patched("code-scorers"):
            scored = await self._aside(
                ScorerActivities.score_traffic,
                ScoreRequest(window=begun.window),
                summary="run the agent's code scorers on the window's traffic",
                timeout=timedelta(minutes=30),
            )
            words = scored.words() if isinstance(scored, ScoreReport) else scored
            workflow.set_current_details(
                f"**analysing**: reading the window: {_window_words(begun)}; code scorers: {words}"
            )
        decision = await self._activity(
            EvolutionActivities.decide,
            DecideRequest(
                evolution_id=self._status.evolution_id,
                mlflow_run_id=begun.mlflow_run_id,
                window=begun.window,
                policy=begun.policy,
                force=options.force,
                gate=begun.gate,
            ),
            summary="analyse the window and choose the action",
            timeout=timedelta(minutes=10),
            heartbeat=timedelta(minutes=1),  # a task that never reached a worker: retried
        )
        self._update(action=decision.action, reason=decision.reason, decision=decision)
        workflow.upsert_search_attributes([ACTION.value_set(decision.action.value)])
        if workflow.patched("review-queue"):
            # Beside the evolution, which goes on at once and waits for it only to finish.
            self._queueing = asyncio.create_task(
                self._aside(
                    ReviewActivities.queue_for_review,
                    ReviewRequest(window=begun.window, evolution_id=self._status.evolution_id),
                    summary="queue what needs a person: unsure corrections, findings",
                    timeout=timedelta(minutes=10),
                )
            )
        if (
            decision.holdback_answered
            and decision.action is not Action.ROLLBACK
            and workflow.patched("holdback-answered")
        ):
            await self._end_answered_holdback(decision)
        if decision.action is Action.NOOP:
            return Outcome.NOOP, decision.reason
        if decision.action is Action.ROLLBACK:
            await self._stage(Stage.ROLLING_BACK, decision.reason)
            await self._activity(
                EvolutionActivities.rollback,
                RollbackRequest(
                    agent=agent,
                    actor=options.actor,
                    reason=decision.reason,
                    evolution_id=self._status.evolution_id,
                ),
                summary="move stable back to the version before it",
            )
            return Outcome.ROLLED_BACK, decision.reason

        await self._stage(
            Stage.BUILDING, f"building a {decision.action.value} candidate{self._unanswered()}"
        )
        found = await self._build_first_that_helps(request, begun, decision)
        if found is None:
            return Outcome.NOOP, f"noop: no operator could build a candidate: {self._tried_words()}"
        decision, built = found
        candidate = await self._activity(
            EvolutionActivities.register_candidate,
            RegisterRequest(
                evolution_id=self._status.evolution_id,
                mlflow_run_id=begun.mlflow_run_id,
                agent=agent,
                parent_version=begun.parent_version,
                candidate=built,
                reason=f"{built.summary} ({decision.reason})",
            ),
            summary="register the candidate version",
        )
        self._update(candidate_version=candidate)
        workflow.set_current_details(f"**building**: {candidate}: {built.summary}")
        return await self._gate_and_promote(request, begun, candidate)

    async def _build_first_that_helps(
        self, request: EvolutionRequest, begun: BeginResult, decision: DecisionRecord
    ) -> tuple[DecisionRecord, Candidate] | None:
        """A candidate from the chosen action's operator or, when it cannot help, from the
        decision's next-best actions in turn (`fallbacks`), with the decision re-aimed at
        the action that built it; None when none could."""
        remaining = fallbacks(decision, begun.policy)
        while True:
            try:
                return decision, await self._build(request, begun, decision)
            except ActivityError as error:
                tried = _cannot_help(decision.action, error)
                # Histories from before fallbacks ended here, failed: they must replay so.
                if tried is None or not workflow.patched("fallback-actions"):
                    raise
            self._update(tried=[*self._status.tried, tried])
            following = (
                fall_back(decision, remaining.pop(0), self._tried_words()) if remaining else None
            )
            await self._record_tried(tried, following)
            if following is None:
                return None
            decision = following

    async def _build(
        self, request: EvolutionRequest, begun: BeginResult, decision: DecisionRecord
    ) -> Candidate:
        """The candidate of `decision.action`'s operator (or the one a person supplied)."""
        options = request.options
        wanted = CandidateRequest(
            evolution_id=self._status.evolution_id,
            mlflow_run_id=begun.mlflow_run_id,
            agent=request.agent,
            parent_version=begun.parent_version,
            decision=decision,
            window=begun.window,
            candidate=options.candidate,
        )
        if decision.action is Action.WEIGHTS and options.candidate is None:
            # RL on the GPU queue; a crashed job resumes from its last checkpoint.
            return await self._activity(
                TrainingActivities.train_policy,
                wanted,
                summary="train_policy (RL on recorded traffic)",
                timeout=timedelta(hours=12),
                queue=GPU_QUEUE,
                heartbeat=timedelta(seconds=30),
            )
        return await self._activity(
            EvolutionActivities.build_candidate,
            wanted,
            summary=f"{decision.action.value} operator",
            timeout=timedelta(hours=6),
            heartbeat=timedelta(minutes=2),
        )

    async def _record_tried(self, tried: TriedAction, following: DecisionRecord | None) -> None:
        """Keep why `tried` could not help; point the evolution at `following` when given."""
        await self._activity(
            EvolutionActivities.record_stage,
            StageRecord(
                evolution_id=self._status.evolution_id,
                mlflow_run_id=self._status.mlflow_run_id,
                stage=Stage.BUILDING,
                tried=tried,
                next_action=following.action if following else None,
            ),
            summary=f"record: {tried.action.value} {tried.outcome.replace('_', ' ')}",
        )
        if following is None:
            return
        self._update(action=following.action, reason=following.reason)
        workflow.upsert_search_attributes([ACTION.value_set(following.action.value)])
        await self._stage(
            Stage.BUILDING,
            f"{_tried_words(tried)}; building a {following.action.value} candidate instead",
        )

    async def _gate_and_promote(
        self, request: EvolutionRequest, begun: BeginResult, candidate: str
    ) -> tuple[Outcome, str]:
        options, gate = request.options, begun.gate
        result = await self._replay_gate(request, begun, candidate)
        if not result.lets_through:
            return Outcome.ABORTED, f"replay gate: {result.reason}"
        stopped = await self._approval("canary")
        if stopped is not None:
            return stopped
        for gate_name in ("shadow", "canary"):
            if gate_name in options.skip_gates:
                await self._record(
                    Stage(gate_name), GateResult.skipped_gate(gate_name, _skip_words(options))
                )
                continue
            if gate_name == "canary" and workflow.patched("canary-ramp"):
                outcome = await self._canary(request, begun, candidate, gate)
            else:
                outcome = await self._live_gates(request, begun, candidate, gate_name, gate)
            if outcome is not None:
                return outcome
        stopped = await self._approval("promotion")
        if stopped is not None:
            await self._clear_live(stopped[1])
            return stopped
        await self._stage(Stage.PROMOTING, f"promoting {candidate} to stable")
        gated = _gates_words(self._status.gates, options, self._promoted_over)
        await self._move("stable", candidate, f"promoted: {gated}")
        await self._move("canary", None, "promoted to stable")
        if workflow.patched("post-promotion-holdback"):
            skipped = "canary" in options.skip_gates
            await self._hold_back(request, begun.parent_version, candidate, gate, skipped=skipped)
        if all(result.skipped for result in self._status.gates):
            return Outcome.PROMOTED, f"{candidate} {_by('promoted without gates', options)}"
        return Outcome.PROMOTED, f"{candidate} {gated} and is now stable"

    async def _end_answered_holdback(self, decision: DecisionRecord) -> None:
        """End the holdback once it has answered its question (the decision judged it: see
        `DecisionRecord.holdback_answered`). Keeping users on the older version longer
        would only cost them."""
        signals = decision.signals
        await self._move(
            "holdback",
            None,
            f"the holdback answered: stable is no worse than its parent "
            f"({signals['regression_delta']:+.2f} reward, {signals['regression_samples']} and "
            f"{signals['regression_parent_samples']} sessions)",
        )

    async def _hold_back(
        self,
        request: EvolutionRequest,
        parent: str,
        stable: str,
        gate: GateConfig,
        *,
        skipped: bool,
    ) -> None:
        """Keep a share of new sessions on the replaced version, so the two are compared
        on the same traffic, and start the holdback's own workflow, which ends it once it
        has answered (`workflows.holdback`).

        A promotion that skipped the canary keeps none: a person shipped it without
        measuring, usually to replace a version they judged broken, which no user should
        be kept on. The holdback of an earlier promotion ends either way.
        """
        if skipped or gate.holdback_weight == 0.0:
            await self._move("holdback", None, "a new stable: the earlier holdback ends")
            return
        since = await self._move(
            "holdback",
            parent,
            f"holdback: {gate.holdback_weight:.0%} of new sessions stay on {parent}",
            weight=gate.holdback_weight,
        )
        if not workflow.patched("holdback-watch"):
            return
        watch = HoldbackWatch(
            agent=request.agent,
            stable=stable,
            parent=parent,
            since=since,
            evolution_id=self._status.evolution_id,
            gate=gate,
            tenants=request.tenants,
        )
        await workflow.start_child_workflow(
            "HoldbackWorkflow",
            watch,
            id=holdback_workflow_id(request.agent, workflow.now()),
            task_queue=CONTROL_QUEUE,
            parent_close_policy=ParentClosePolicy.ABANDON,
            static_summary=f"holdback of {parent} after {stable} was promoted",
        )

    async def _replay_gate(
        self, request: EvolutionRequest, begun: BeginResult, candidate: str
    ) -> GateResult:
        if "replay" in request.options.skip_gates:
            words = _skip_words(request.options)
            await self._stage(Stage.REPLAY, f"replay gate {words}; {candidate} not replayed")
            result = GateResult.skipped_gate("replay", words)
        else:
            await self._stage(Stage.REPLAY, f"replaying recorded traffic against {candidate}")
            result = await self._activity(
                EvolutionActivities.replay_gate,
                ReplayGateRequest(
                    evolution_id=self._status.evolution_id,
                    agent=request.agent,
                    baseline_version=begun.parent_version,
                    candidate_version=candidate,
                    action=self._status.action,
                    gate=begun.gate,
                    window=begun.window,
                ),
                summary="replay recorded traffic and the safety suite",
                timeout=timedelta(hours=1),
                heartbeat=timedelta(seconds=10),
            )
        await self._record(Stage.REPLAY, result)
        return result

    async def _live_gates(
        self,
        request: EvolutionRequest,
        begun: BeginResult,
        candidate: str,
        gate_name: str,
        gate: GateConfig,
    ) -> tuple[Outcome, str] | None:
        """Shadow, or canary in weight steps: None when passed, else the outcome to end with."""
        steps = [None] if gate_name == "shadow" else gate.step_weights
        seconds = gate.shadow_seconds if gate_name == "shadow" else gate.step_seconds
        alias = "shadow" if gate_name == "shadow" else "canary"
        began = None  # every look judges the gate's traffic since its first step
        for step, weight in enumerate(steps, start=1):
            words = (
                "shadowing live traffic"
                if weight is None
                else f"canary step {step}/{len(steps)}: {weight:.0%} of new sessions"
            )
            await self._stage(Stage(gate_name), f"{words} on {candidate}")
            moved = await self._move(alias, candidate, words, weight=weight)
            began = began or moved
            # A step may look again while it is marginal, for as long as `max_extensions`
            # more looks of `seconds` would take; each further wait is sized from the
            # sessions the gate still needs (the test stays valid however often it looks).
            budget, waited, wait = seconds * (gate.max_extensions + 1), 0.0, seconds
            sized = workflow.patched("extensions-sized-from-plan")
            while True:
                waited += wait
                if await self._wait_or_abort(wait):
                    await self._clear_live("aborted by an operator")
                    return Outcome.ABORTED, self._abort_words()
                result = await self._activity(
                    EvolutionActivities.judge_live,
                    LiveGateRequest(
                        agent=request.agent,
                        gate=gate_name,
                        baseline_version=begun.parent_version,
                        candidate_version=candidate,
                        since=began,
                        tenants=request.tenants,
                        step=step,
                        weight=weight,
                        config=gate,
                        action=self._status.action,
                    ),
                    summary=f"judge {gate_name} step {step}",
                )
                await self._record(Stage(gate_name), result, step=step)
                left = budget - waited
                if result.verdict is not Verdict.MARGINAL or left < 1e-6:
                    break
                planned = _seconds_to_plan(result, began, workflow.now()) if sized else None
                wait = min(left, max(planned, seconds / 4)) if planned is not None else seconds
                workflow.set_current_details(
                    f"{words}: marginal, extending the step by {duration(wait)}"
                    f"{_plan_words(result)}"
                )
            if result.verdict is not Verdict.PASS:
                await self._clear_live(f"{gate_name} gate: {result.reason}")
                outcome = Outcome.ABORTED if gate_name == "shadow" else Outcome.ROLLED_BACK
                return outcome, f"{gate_name} gate: {result.reason}"
        if gate_name == "shadow":
            await self._move("shadow", None, "shadow gate passed")
        return None

    async def _canary(
        self, request: EvolutionRequest, begun: BeginResult, candidate: str, gate: GateConfig
    ) -> tuple[Outcome, str] | None:
        """The canary's ramp (`evolution.gates.canary`): None when its last step answered
        the question (or a person promoted it), else the outcome to end with.

        Every look judges all of the canary's sessions since its first step. A step before
        the last advances at its first look that judged enough sessions and saw no harm;
        harm at any look stops it; the last step looks until the question is answered or
        the budget is spent, then does what `when_inconclusive` says.
        """
        try:
            return await self._ramp(request, begun, candidate, gate)
        finally:  # an answer the canary's own end overtook is answered by that end
            self._answer = None

    async def _ramp(
        self, request: EvolutionRequest, begun: BeginResult, candidate: str, gate: GateConfig
    ) -> tuple[Outcome, str] | None:
        steps = gate.step_weights
        self._update(plan=self._plan())
        step, words = 0, step_words(0, steps)
        planned = f"; plan: {self._status.plan.words()}" if self._status.plan else ""
        await self._stage(Stage.CANARY, f"{words} on {candidate}{planned}")
        began = await self._move("canary", candidate, words, weight=steps[0])
        ramp = Ramp(budget=gate.budget_seconds, last_began=began)
        wait = gate.step_seconds
        while True:
            await self._wait_for_people(wait)
            if self._abort is not None:
                await self._clear_live("aborted by an operator")
                return Outcome.ABORTED, self._abort_words()
            if self._answer is not None:
                answered = await self._apply_answer(began, ramp, gate)
                if answered is not True:
                    return answered
                wait = gate.step_seconds
                continue
            result = await self._judge_canary(request, begun, candidate, began, step, gate)
            await self._record(Stage.CANARY, result, step=step + 1)
            elapsed = (workflow.now() - began).total_seconds()
            last = step == len(steps) - 1
            move = canary_move(
                result.verdict,
                checked=harm_checked(result, gate),
                last_step=last,
                spent=elapsed >= ramp.budget - 1e-6,
            )
            if move is Move.STOP:
                self._update(inconclusive=None)
                await self._clear_live(f"canary gate: {result.reason}")
                return Outcome.ROLLED_BACK, f"canary gate: {result.reason}"
            if move is Move.PROMOTE:
                self._update(inconclusive=None)
                return None
            if move is Move.ADVANCE:
                step += 1
                ramp.advanced(workflow.now(), result)
                words = step_words(step, steps)
                await self._stage(
                    Stage.CANARY,
                    f"{words} on {candidate}: no harm evident at {steps[step - 1]:.0%}"
                    f"{_plan_words(result)}",
                )
                await self._move("canary", candidate, words, weight=steps[step])
                wait = gate.step_seconds
                continue
            if move is Move.INCONCLUSIVE:
                ended = await self._inconclusive(result, gate, ramp, elapsed)
                if ended is not None:
                    return ended
            wait = ramp.next_wait(result, gate, workflow.now(), elapsed, last)
            if self._status.inconclusive is None:
                workflow.set_current_details(
                    f"**canary**: {words}: no harm evident, question open{_plan_words(result)}; "
                    f"next look in {duration(wait)}"
                )

    async def _wait_for_people(self, seconds: float) -> None:
        """Sleep until the next look, or until an abort or a person's answer arrives."""
        try:
            await workflow.wait_condition(
                lambda: self._abort is not None or self._answer is not None,
                timeout=timedelta(seconds=seconds),
            )
        except TimeoutError:
            pass

    async def _judge_canary(
        self,
        request: EvolutionRequest,
        begun: BeginResult,
        candidate: str,
        began: datetime,
        step: int,
        gate: GateConfig,
    ) -> GateResult:
        return await self._activity(
            EvolutionActivities.judge_live,
            LiveGateRequest(
                agent=request.agent,
                gate="canary",
                baseline_version=begun.parent_version,
                candidate_version=candidate,
                since=began,
                tenants=request.tenants,
                step=step + 1,
                weight=gate.step_weights[step],
                config=gate,
                action=self._status.action,
            ),
            summary=f"judge canary step {step + 1}",
        )

    async def _inconclusive(
        self, result: GateResult, gate: GateConfig, ramp: Ramp, elapsed: float
    ) -> tuple[Outcome, str] | None:
        """The budget is spent with the question open: roll back, extend to the longest a
        canary may run, or ask a person (and, unanswered by then, roll back). None when the
        canary goes on (`ramp.budget` then says until when)."""
        mode, spent = gate.when_inconclusive, duration(elapsed)
        if mode == "extend" and elapsed < gate.limit_seconds - 1e-6:
            ramp.budget = gate.limit_seconds
            workflow.set_current_details(
                f"**canary**: inconclusive after {spent}; extending to "
                f"{duration(gate.limit_seconds)}{_plan_words(result)}"
            )
            return None
        if mode == "ask" and self._status.inconclusive is None:
            ramp.budget = max(gate.limit_seconds, elapsed + gate.budget_seconds)
            asked = ramp.open_question(result, workflow.now())
            self._update(inconclusive=asked)
            await self._stage(
                Stage.AWAITING_APPROVAL,
                f"canary inconclusive after {spent}, waiting for a person to extend, promote "
                f"or roll back (answer_canary; until {duration(ramp.budget)}, then it rolls "
                f"back): {asked.words}",
            )
            return None
        if mode == "ask":
            why = f"canary gate inconclusive, nobody answered within {spent}: {result.reason}"
        elif mode == "extend":
            why = f"canary gate inconclusive after {spent}, its longest: {result.reason}"
        else:
            why = f"canary gate inconclusive at the end of its {spent} budget: {result.reason}"
        self._update(inconclusive=None)
        await self._clear_live(why)
        return Outcome.ROLLED_BACK, why

    async def _apply_answer(
        self, began: datetime, ramp: Ramp, gate: GateConfig
    ) -> tuple[Outcome, str] | None | bool:
        """Do what the person answered: True when the canary goes on (extended), None
        when it is promoted, else the outcome to end with."""
        answer, asked = self._answer, self._status.inconclusive
        self._update(inconclusive=None)
        if answer.choice == "roll_back":
            why = f"canary gate inconclusive; {_by('rolled back', answer)}"
            await self._clear_live(why)
            self._answer = None
            return Outcome.ROLLED_BACK, why
        if answer.choice == "promote":
            self._promoted_over, self._answer = answer, None
            return None
        elapsed = (workflow.now() - began).total_seconds()
        hours = answer.hours or (asked.hours_more if asked else None)
        extra = hours * 3600.0 if hours else gate.step_seconds
        ramp.budget = elapsed + max(extra, gate.step_seconds)
        self._answer = None
        await self._stage(
            Stage.CANARY,
            f"canary {_by('extended', answer)}, for {duration(ramp.budget - elapsed)}",
        )
        return True

    def _plan(self) -> CanaryPlan | None:
        """The canary's plan at today's traffic, as the decision made it for the action."""
        decision = self._status.decision
        if decision is None:
            return None
        return next((s.plan for s in decision.scores if s.action is self._status.action), None)

    def _unanswered(self) -> str:
        """'; its canary: ...' when the decision's plan says it cannot be answered."""
        plan = self._plan()
        return "" if plan is None or plan.answerable else f"; its canary: {plan.words()}"

    # --- small steps ----------------------------------------------------------------------

    async def _approval(self, point: ApprovalPoint) -> tuple[Outcome, str] | None:
        """Wait for a person at `point` when asked to; None when approved (or not asked)."""
        if point not in self._request_options().approve_before:
            return None
        self._update(awaiting_approval=point)
        await self._stage(
            Stage.AWAITING_APPROVAL, f"waiting for a person to approve or reject the {point}"
        )
        await workflow.wait_condition(
            lambda: (
                point in self._approvals or self._rejection is not None or self._abort is not None
            )
        )
        self._update(awaiting_approval=None)
        if self._abort is not None:
            return Outcome.ABORTED, self._abort_words()
        if self._rejection is not None:
            return Outcome.REJECTED, self._rejection_words()
        return None

    async def _wait_or_abort(self, seconds: float) -> bool:
        """Sleep through a gate step; True when an abort arrived meanwhile."""
        try:
            await workflow.wait_condition(
                lambda: self._abort is not None, timeout=timedelta(seconds=seconds)
            )
        except TimeoutError:
            return False
        return True

    async def _move(
        self, alias: str, version: str | None, reason: str, weight: float | None = None
    ) -> datetime:
        """Point an alias; returns when the move took effect."""
        return await self._activity(
            EvolutionActivities.move_alias,
            AliasChange(
                agent=self._status.agent,
                alias=alias,
                version_id=version,
                weight=weight,
                actor=self._request_options().actor,
                reason=reason,
                evolution_id=self._status.evolution_id,
            ),
            summary=f"{alias} -> {version or 'cleared'}",
        )

    async def _clear_live(self, reason: str) -> None:
        """Take the candidate off canary and shadow (stable was never touched)."""
        for alias in ("canary", "shadow"):
            await self._move(alias, None, reason)

    async def _stage(self, stage: Stage, details: str) -> None:
        self._update(stage=stage)
        workflow.upsert_search_attributes([STAGE.value_set(stage.value)])
        workflow.set_current_details(f"**{stage.value}**: {details}")

    async def _record(self, stage: Stage, result: GateResult, step: int = 0) -> None:
        self._update(gates=[*self._status.gates, result])
        await self._activity(
            EvolutionActivities.record_stage,
            StageRecord(
                evolution_id=self._status.evolution_id,
                mlflow_run_id=self._status.mlflow_run_id,
                stage=stage,
                result=result,
                step=step,
            ),
            summary=f"record {result.gate}: {result.verdict.value}",
        )

    async def _finish(self, outcome: Outcome, reason: str) -> EvolutionStatus:
        await self._activity(
            EvolutionActivities.finish,
            FinishRequest(
                evolution_id=self._status.evolution_id,
                mlflow_run_id=self._status.mlflow_run_id,
                outcome=outcome,
                reason=reason,
            ),
            summary=f"finish: {outcome.value}",
        )
        self._update(stage=Stage.DONE, outcome=outcome, reason=reason)
        workflow.upsert_search_attributes(
            [STAGE.value_set(Stage.DONE.value), OUTCOME.value_set(outcome.value)]
        )
        workflow.set_current_details(f"**{outcome.value}**: {reason}")
        return self._status

    async def _activity(
        self, method, arg, *, summary: str, timeout=_QUICK, queue=CONTROL_QUEUE, heartbeat=None
    ):
        return await workflow.execute_activity_method(
            method,
            arg,
            task_queue=queue,
            start_to_close_timeout=timeout,
            heartbeat_timeout=heartbeat,
            retry_policy=_RETRY,
            summary=summary,
        )

    async def _aside(self, method, arg, *, summary: str, timeout: timedelta):
        """An activity beside the evolution: its result, or, when it failed, why in words
        (the evolution goes on without it)."""
        try:
            return await workflow.execute_activity_method(
                method,
                arg,
                task_queue=CONTROL_QUEUE,
                start_to_close_timeout=timeout,
                schedule_to_close_timeout=timeout * 2,
                heartbeat_timeout=timedelta(minutes=2),
                retry_policy=_ASIDE_RETRY,
                summary=summary,
            )
        except ActivityError as error:
            cause = error.cause
            words = cause.message if isinstance(cause, ApplicationError) else str(cause)
            workflow.logger.warning("%s failed; the evolution goes on: %s", summary, words)
            return f"failed ({words})"

    def _update(self, **changes) -> None:
        self._status = self._status.model_copy(update=changes)

    def _request_options(self) -> EvolutionOptions:
        assert self._options is not None
        return self._options

    def _tried_words(self) -> str:
        return "; ".join(_tried_words(tried) for tried in self._status.tried)

    def _rejection_words(self) -> str:
        return _by("rejected", self._rejection)

    def _abort_words(self) -> str:
        return _by("aborted", self._abort)


def _seconds_to_plan(result: GateResult, began: datetime, now: datetime) -> float | None:
    """How long the gate's traffic, at the pace it has come since `began`, takes to bring
    the sessions a side its plan needs; None where the gate planned nothing or has seen no
    session yet."""
    needed, has = result.sessions_needed, result.sessions
    elapsed = (now - began).total_seconds()
    if needed is None or not has or elapsed <= 0:
        return None
    return max(needed - has, 0) * elapsed / has


def _plan_words(result: GateResult) -> str:
    """': superiority, +0.04 (95% interval -0.1 to +0.18), needs ~120 sessions a side; has
    43' when the gate asked its primary metric a question."""
    asked = [j for j in result.metrics if j.question is result.question and j.delta is not None]
    if result.question is None or not asked:
        return ""
    primary = asked[0]
    interval = (
        f"{primary.delta:+.3g} ({primary.confidence:.0%} interval {primary.delta_low:+.3g} to "
        f"{primary.delta_high:+.3g})"
    )
    planned = f"needs ~{result.sessions_needed} sessions a side; has {result.sessions}"
    return f": {result.question.value.replace('_', '-')}, {interval}, {planned}"


def _window_words(begun: BeginResult) -> str:
    window = begun.window
    tenants = ", ".join(window.tenants) if window.tenants else "all tenants"
    size = f"the last {window.last} trajectories" if window.last else f"since {window.since:%F %R}"
    return f"{window.agent}, {tenants}, {size}"


def _cannot_help(action: Action, error: ActivityError) -> TriedAction | None:
    """What `error` says about `action`, when it says its operator cannot help (else None)."""
    cause = error.cause
    if not isinstance(cause, ApplicationError) or cause.type not in _CANNOT_HELP:
        return None
    return TriedAction(action=action, outcome=_CANNOT_HELP[cause.type], reason=cause.message)


def _tried_words(tried: TriedAction) -> str:
    if tried.outcome == "nothing_to_propose":
        return f"{tried.action.value} had nothing to propose ({tried.reason})"
    return f"{tried.action.value} is not available here ({tried.reason})"


def _by(verb: str, who: Approval | CanaryAnswer | EvolutionOptions) -> str:
    """Words for what a person did: '<verb> by <actor>[: <reason>]'."""
    return f"{verb} by {who.actor}" + (f": {who.reason}" if who.reason else "")


def _skip_words(options: EvolutionOptions) -> str:
    return _by("skipped", options)


def _gates_words(
    results: list[GateResult], options: EvolutionOptions, promoted_over: CanaryAnswer | None = None
) -> str:
    """How a candidate got past its gates, never calling a skipped or unanswered one passed:
    'passed every gate', 'passed replay and canary (shadow skipped by ana: hot-fix)', 'went
    through no gate (replay, shadow and canary skipped by ana: hot-fix)', or 'passed replay
    and shadow (canary inconclusive, promoted by ana: cost cut)'."""
    open_gate = ["canary"] if promoted_over is not None else []
    passed = _names([r.gate for r in results if not r.skipped and r.gate not in open_gate])
    skipped = _names([result.gate for result in results if result.skipped])
    gaps = ([f"{skipped} {_skip_words(options)}"] if skipped else []) + (
        [f"canary inconclusive, {_by('promoted', promoted_over)}"] if open_gate else []
    )
    if not gaps:
        return "passed every gate"
    gap = "; ".join(gaps)
    return f"passed {passed} ({gap})" if passed else f"went through no gate ({gap})"


def _names(gates: list[str]) -> str:
    """'replay, shadow and canary': each gate once, in the order it ran."""
    unique = list(dict.fromkeys(gates))
    return (
        " and ".join([", ".join(unique[:-1]), unique[-1]]) if len(unique) > 1 else "".join(unique)
    )
