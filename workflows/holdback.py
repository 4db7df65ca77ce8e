"""HoldbackWorkflow: the holdback after a promotion, as an experiment that ends itself.

A promotion keeps a share of new sessions on the version it replaced. Its question: is the
new stable no worse than the held-back parent on the same traffic (non-inferiority at the
gate's tolerance, judged like a canary at every look, with confidence sequences)?

    look every step_seconds -> shown no worse: end the holdback
                            -> shown worse (a regression): start a rollback evolution now
                            -> unanswered after holdback_seconds: end the holdback

It ends quietly when the holdback stops running as it began (a later promotion, a rollback,
a canary that needed its share, an evolution that found it answered). The evolution that
promoted starts it and does not wait for it (parent close policy abandon).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.evolution import EvolutionActivities
    from activities.models import (
        EvolutionOptions,
        EvolutionRequest,
        EvolutionStatus,
        HoldbackEnd,
        HoldbackLook,
        HoldbackWatch,
        Stage,
    )
    from evolution.decision import Action
    from evolution.gates import GateResult, Verdict
    from workflows.evolution import EvolutionWorkflow
    from workflows.naming import evolution_workflow_id
    from workflows.queues import CONTROL_QUEUE
    from workflows.search_attributes import AGENT, STAGE

__all__ = ["HoldbackWorkflow"]

_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=30), maximum_attempts=20)


@workflow.defn
class HoldbackWorkflow:
    @workflow.run
    async def run(self, watch: HoldbackWatch) -> str:
        workflow.upsert_search_attributes(
            [AGENT.value_set(watch.agent), STAGE.value_set(Stage.HOLDBACK.value)]
        )
        gate = watch.gate
        workflow.set_current_details(
            f"**holdback**: {gate.holdback_weight:.0%} of new sessions stay on {watch.parent} "
            f"until {watch.stable} is shown no worse (non-inferiority at {gate.tolerance:g}), "
            f"for at most {_hours(gate.holdback_seconds)}"
        )
        while True:
            await workflow.sleep(timedelta(seconds=gate.step_seconds))
            look = await self._look(watch)
            if not look.watching:
                return self._done(
                    "the holdback ended elsewhere (a new stable, a rollback, a canary that "
                    "needed its share, or an evolution that found it answered)"
                )
            result = look.result
            if result.verdict is Verdict.FAIL:
                return await self._regression(watch, result)
            if result.verdict is Verdict.PASS:
                return await self._end(watch, f"the holdback answered: {_shown(result)}", result)
            held = (workflow.now() - watch.since).total_seconds()
            if held >= gate.holdback_seconds:
                return await self._end(
                    watch,
                    f"the holdback ends unanswered after {_hours(gate.holdback_seconds)}, "
                    f"no regression shown: {result.reason}",
                    result,
                )
            workflow.set_current_details(f"**holdback**: {result.reason}")

    async def _look(self, watch: HoldbackWatch) -> HoldbackLook:
        return await workflow.execute_activity_method(
            EvolutionActivities.judge_holdback,
            watch,
            task_queue=CONTROL_QUEUE,
            start_to_close_timeout=timedelta(minutes=2),
            retry_policy=_RETRY,
            summary=f"judge {watch.stable} against {watch.parent}, held back",
        )

    async def _end(self, watch: HoldbackWatch, reason: str, result: GateResult) -> str:
        await self._record(HoldbackEnd(watch=watch, reason=reason, result=result))
        return self._done(reason)

    async def _regression(self, watch: HoldbackWatch, result: GateResult) -> str:
        """Roll the regressed stable back through an evolution of its own (the decision and
        the rollback recorded as any other), once no other evolution of the agent runs."""
        found = f"the holdback found a regression: {result.reason}"
        await self._record(HoldbackEnd(watch=watch, reason=found, result=result, clear=False))
        look = HoldbackLook(watching=True, evolution=None)
        while True:
            if not look.watching:
                return self._done(f"{found}; stable moved meanwhile, nothing rolled back")
            if look.evolution is None:
                break
            workflow.set_current_details(
                f"**holdback**: {found}; waiting for evolution {look.evolution} to finish"
            )
            await workflow.sleep(timedelta(seconds=watch.gate.step_seconds))
            look = await self._look(watch)
        workflow.set_current_details(f"**holdback**: {found}; rolling back")
        status: EvolutionStatus = await workflow.execute_child_workflow(
            EvolutionWorkflow.run,
            EvolutionRequest(
                agent=watch.agent,
                tenants=watch.tenants,
                options=EvolutionOptions(force=Action.ROLLBACK, actor="holdback", reason=found),
            ),
            id=evolution_workflow_id(watch.agent, workflow.now()),
            task_queue=CONTROL_QUEUE,
            static_summary=f"rollback of {watch.stable}: the holdback found a regression",
        )
        return self._done(f"{found}; evolution {status.evolution_id}: {status.outcome}")

    async def _record(self, end: HoldbackEnd) -> None:
        await workflow.execute_activity_method(
            EvolutionActivities.end_holdback,
            end,
            task_queue=CONTROL_QUEUE,
            start_to_close_timeout=timedelta(minutes=2),
            retry_policy=_RETRY,
            summary="end the holdback" if end.clear else "record the regression",
        )

    def _done(self, reason: str) -> str:
        workflow.upsert_search_attributes([STAGE.value_set(Stage.DONE.value)])
        workflow.set_current_details(f"**holdback done**: {reason}")
        return reason


def _shown(result: GateResult) -> str:
    primary = next((j for j in result.metrics if j.question is result.question), None)
    if primary is None or primary.delta is None:
        return result.reason
    return (
        f"stable is shown no worse than its parent ({primary.delta:+.2f} reward, "
        f"{primary.confidence:.0%} interval over every look {primary.delta_low:+.2f} to "
        f"{primary.delta_high:+.2f}; {primary.n_candidate} and {primary.n_baseline} sessions)"
    )


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.0f} h" if seconds >= 3600 else f"{seconds:.0f} s"
