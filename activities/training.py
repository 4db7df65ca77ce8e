"""`train_policy`: the weight operator, an RL job on the `evoplane-gpu` queue.

It trains the parent version's checkpoint on the window's recorded traffic (GRPO by default,
`evolution.rl`) and returns a candidate whose `model.checkpoint` is the result; the workflow
registers and gates it like any other candidate.

A training job is long, so it is built to be interrupted: it heartbeats every step (step,
loss, reward, KL: visible in the Temporal UI as the activity's heartbeat details), writes a
checkpoint every `checkpoint_every` steps under a directory named by the evolution, and a
retry (after a worker crash or a heartbeat timeout) resumes from the newest checkpoint there,
not from zero. MLflow gets the metrics of every step in the evolution's run.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy.engine import Engine
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.models import CandidateRequest
from evolution.operators import Candidate
from evolution.settings import EvolutionSettings
from registry import (
    get_agent,
    get_version,
    list_tenants,
    tenant_agents,
    training_records,
    transaction,
)

__all__ = ["TrainingActivities"]

log = logging.getLogger(__name__)


def _fatal(kind: str, message: str) -> ApplicationError:
    return ApplicationError(message, type=kind, non_retryable=True)


class TrainingActivities:
    """Args:
    engine: the registry.
    tracker: the MLflow tracker (None: no MLflow).
    checkpoint_root: where jobs write checkpoints, one directory per evolution; it must be
        readable by the gateways that will serve the result (a shared volume in production).
    device: "cpu", "cuda" or "cuda:N".
    """

    def __init__(
        self, engine: Engine, tracker: Any | None, checkpoint_root: Path, *, device: str = "cpu"
    ) -> None:
        self.engine, self.tracker = engine, tracker
        self.checkpoint_root = Path(checkpoint_root)
        self.device = device

    @activity.defn
    def train_policy(self, request: CandidateRequest) -> Candidate:
        """Train the parent's weights on the window with the decision's algorithm (GRPO
        unless it chose SFT or DPO); resumes from its last checkpoint."""
        from evolution.rl.backends.torch import use_threads
        from evolution.rl.plan import training_plan
        from evolution.rl.samples import record_prompts

        parent, settings, records = self._inputs(request)
        prompts = [p for record in records for p in record_prompts(record)]
        train_prompts, held_out = self._split(prompts, settings)
        unreferenced = [p for p in prompts if p.reference is None]
        out_dir = self.checkpoint_root / request.agent / request.evolution_id
        resumed = _checkpoint_step(out_dir)
        # A teacher answers every failed step: that can outlast the heartbeat timeout.
        with _Heartbeat({"step": resumed, "resumed_from": resumed, "phase": "building data"}):
            plan = training_plan(
                request.decision.algorithm,
                request.decision.algorithm_reason,
                records,
                train_prompts,
                held_out,
                teacher=_teacher(settings),
                objective=settings.objective,
                distill_from=settings.distill_from,
                unreferenced=unreferenced,
            )
            training_reward, reward = job_rewards(settings)
            judging = None
            if settings.judge is not None and plan.trains_as is None:
                plan, training_reward, judging = _judged(
                    plan, settings.judge, records, training_reward, unreferenced
                )
        config = settings.train_config(device=self.device, algorithm=plan.trains_as)
        use_threads(config.threads)  # for the held-out evaluations too
        base = Path(parent.spec.model.checkpoint or "")
        before = self._held_out_reward(base, held_out, reward, config)
        previous = _previous_heartbeat()
        activity.logger.info(
            "training %s (%s) from %s on %s (%d held out); resuming after step %d",
            request.agent,
            plan.algorithm,
            base,
            plan.counts,
            len(held_out),
            resumed,
        )
        if run_id := self._run_id(request):
            self._track("log_params", run_id, {"algorithm": plan.algorithm})
            self._track("log_metrics", run_id, {f"data_{k}": v for k, v in plan.counts.items()})
            if judging is not None:
                self._track("log_params", run_id, {"judge_used": judging["used"]})
                if judging.get("agreement") is not None:
                    judged = {
                        "judge_agreement": judging["agreement"],
                        "judge_pairs": judging["pairs"],
                    }
                    self._track("log_metrics", run_id, judged)
        beat = _Heartbeat({"step": resumed, "resumed_from": resumed, "phase": "starting"})
        try:
            with beat:
                result = plan.run(
                    base,
                    out_dir,
                    training_reward,
                    config,
                    lambda m: self._on_step(request, m, beat),
                )
        except ValueError as error:
            raise _fatal("NothingToTrain", str(error)) from None
        after = self._held_out_reward(result.checkpoint, held_out, reward, config)
        spec = parent.spec.model_copy(
            update={
                "model": parent.spec.model.model_copy(
                    update={
                        "checkpoint": str(result.checkpoint),
                        "model": f"{request.agent}@{request.evolution_id}",
                    }
                )
            }
        )
        evidence = {
            "objective": config.objective.kind,
            "algorithm": plan.algorithm,
            "algorithm_reason": plan.reason,
            "data": plan.counts,
            "judge": judging,
            "steps": result.steps,
            "resumed_from_step": result.resumed_from,
            "previous_attempt_heartbeat": previous,
            "train_prompts": len(train_prompts),
            "held_out_prompts": len(held_out),
            "held_out_reward_before": before,
            "held_out_reward_after": after,
            "final_train_reward": result.history[-1].reward if result.history else None,
        }
        if request_run := self._run_id(request):
            self._track("log_metrics", request_run, {"heldout_reward_before": before})
            self._track("log_metrics", request_run, {"heldout_reward_after": after})
        return Candidate(
            spec=spec,
            summary=f"{plan.algorithm.upper()} on {plan.summary}, {result.steps} steps",
            changes=[f"weights: {base} -> {result.checkpoint}"],
            evidence=evidence,
        )

    # --- inputs -------------------------------------------------------------------------

    def _inputs(self, request: CandidateRequest) -> tuple[Any, Any, list]:
        """The parent version, the agent's training settings, the window's training export."""
        with transaction(self.engine) as session:
            parent = get_version(session, request.parent_version)
            if not parent.spec.model.checkpoint:
                raise _fatal(
                    "OperatorNotAvailable",
                    f"{parent.id} is served by the {parent.spec.model.engine} engine without "
                    "a local checkpoint, so there are no weights to train here; to evaluate "
                    "other weights now, pass your own candidate spec "
                    "(`evoplane evolve --candidate spec.json`)",
                )
            try:
                settings = EvolutionSettings.of(get_agent(session, request.agent).settings)
            except ValidationError as error:
                raise _fatal("InvalidAgentSettings", f"{request.agent}: {error}") from None
            tenants = request.window.tenants or [
                t.name
                for t in list_tenants(session)
                if request.agent in tenant_agents(session, t.name)
            ]
            since = request.window.since
            records = list(training_records(session, request.agent, tenants, since=since))
        return parent, settings.training, records

    @staticmethod
    def _split(prompts: list, settings: Any) -> tuple[list, list]:
        from evolution.rl.samples import split_holdout

        usable = [p for p in prompts if p.reference is not None]
        if not usable:
            raise _fatal(
                "NothingToTrain",
                f"none of the window's {len(prompts)} recorded llm_calls has a rewarded tool "
                "call to learn from (rewards come from /v1/feedback and /v1/events)",
            )
        train_set, held_out = split_holdout(usable, settings.holdout, seed=settings.seed)
        return (train_set or usable), held_out

    def _held_out_reward(self, checkpoint: Path, held_out: list, reward: Any, config: Any):
        from evolution.rl.evaluation import evaluate
        from evolution.rl.policy import Policy

        if not held_out:
            return None
        policy = Policy.load(checkpoint, device=self.device)
        return round(
            evaluate(
                policy,
                held_out,
                reward,
                max_new_tokens=config.max_new_tokens,
                temperature=config.temperature,
                seed=config.seed,
                guide_tool_names=config.guide_tool_names,
            ),
            4,
        )

    # --- progress -----------------------------------------------------------------------

    def _on_step(self, request: CandidateRequest, metrics: Any, beat: _Heartbeat) -> None:
        beat.update(
            {
                "step": metrics.step,
                "loss": round(metrics.loss, 5),
                "reward": round(metrics.reward, 4),
                "kl": round(metrics.kl, 5),
                "groups_used": metrics.groups_used,
            }
        )
        if run_id := self._run_id(request):
            self._track(
                "log_metrics",
                run_id,
                {
                    "train_loss": metrics.loss,
                    "train_reward": metrics.reward,
                    "train_kl": metrics.kl,
                    "train_clip_fraction": metrics.clip_fraction,
                    "train_importance_weight": metrics.importance_weight,
                },
                step=metrics.step,
            )

    def _run_id(self, request: CandidateRequest) -> str | None:
        return getattr(request, "mlflow_run_id", None)

    def _track(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self.tracker is None:
            return None
        try:
            return getattr(self.tracker, method)(*args, **kwargs)
        except Exception:  # MLflow down must not fail a training job
            log.exception("MLflow %s failed", method)
            return None


def _teacher(settings: Any) -> Any:
    """The agent's teacher for SFT targets, None when it has none."""
    import os

    from evolution.rl.data import OpenAITeacher

    if settings.teacher is None:
        return None
    chosen = settings.teacher
    key = os.environ.get(chosen.api_key_env) if chosen.api_key_env else None
    return OpenAITeacher(chosen.base_url, chosen.model, api_key=key)


def _judged(
    plan: Any, chosen: Any, records: list, explicit: Any, unreferenced: list
) -> tuple[Any, Any, dict[str, Any]]:
    """The plan and training reward with the agent's judge where its agreement with explicit
    rewards on the window's recorded answers lets it score the prompts without a reference."""
    import dataclasses
    import os

    import httpx

    from evolution.rl.data import OpenAITeacher
    from evolution.rl.data.judge import RelativeJudge, judge_reward
    from evolution.rl.samples import RecordedPrompt

    key = os.environ.get(chosen.api_key_env) if chosen.api_key_env else None
    model = OpenAITeacher(chosen.base_url, chosen.model, api_key=key, temperature=0.0)

    def complete(text: str) -> str:
        asked = RecordedPrompt(
            event_id="judge", tenant="", messages=[{"role": "user", "content": text}]
        )
        return model(asked, 1)[0]

    try:
        reward, report = judge_reward(
            RelativeJudge(complete),
            records,
            explicit,
            len(unreferenced),
            min_agreement=chosen.min_agreement,
            min_pairs=chosen.min_pairs,
            max_groups=chosen.max_groups,
        )
    except (RuntimeError, httpx.HTTPError) as error:  # a judge down must not stop the job
        reward, report = (
            explicit,
            {"used": False, "reason": f"refused, it could not be asked: {error}"},
        )
    report = {"model": chosen.model, **report}
    if not report["used"]:
        return plan, explicit, report
    prompts = [*plan.prompts, *unreferenced]
    counts = {**plan.counts, "judged_prompts": len(unreferenced)}
    return dataclasses.replace(plan, prompts=prompts, counts=counts), reward, report


def job_rewards(settings: Any) -> tuple[Any, Any]:
    """A weights job's two rewards: the one it trains on, where a valid call of an offered but
    wrong tool earns the agent's `format_credit`, and the strict one (1 for the right tool,
    else 0) its held-out prompts are measured with before and after."""
    from evolution.rl.rewards import ToolCallReward

    return ToolCallReward(format_credit=settings.format_credit), ToolCallReward()


class _Heartbeat:
    """Heartbeats the latest step's details every few seconds from a thread of its own.

    A step of a large model can outlast the heartbeat timeout, so beats cannot wait for
    steps; the thread dies with the worker, so a crashed job still times out promptly.
    """

    INTERVAL_S = 5.0

    def __init__(self, details: dict[str, Any]) -> None:
        self._details = details
        self._stop = threading.Event()
        self._context = contextvars.copy_context()  # the activity context, for the thread
        self._thread = threading.Thread(target=self._run, name="train-heartbeat", daemon=True)

    def update(self, details: dict[str, Any]) -> None:
        self._details = details
        activity.heartbeat(details)  # the caller runs in the activity's own context

    def _run(self) -> None:
        while not self._stop.wait(self.INTERVAL_S):
            self._context.run(activity.heartbeat, self._details)

    def __enter__(self) -> _Heartbeat:
        self.update(self._details)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()


def _previous_heartbeat() -> dict[str, Any] | None:
    """What an earlier attempt of this job last reported, None on the first attempt."""
    details = activity.info().heartbeat_details
    if details and isinstance(details[-1], dict):
        return details[-1]
    return None


def _checkpoint_step(out_dir: Path) -> int:
    from evolution.rl.checkpoints import latest_checkpoint

    latest = latest_checkpoint(out_dir)
    return int(latest.name.removeprefix("step-")) if latest else 0
