"""The scoring activity: an agent's code scorers run on its captured, not yet scored traffic.

Each scorer gets the window's newest trajectories it has not scored, in batches, within its
budget (trajectories and seconds a run); a call that fails or times out is tried again
`retries` times, a trajectory that still fails is tried again on later runs, until
`max_attempts`. Scores become rewards (ids derived from scorer and trajectory, so a
retried run adds nothing) and every outcome is kept (`registry.scorers`). A scorer's faults
never fail the activity: they are its results, in words, so a broken scorer never holds
up capture (scorers never run on the gateway) or the evolution that asked.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx
from pydantic import ValidationError
from sqlalchemy.engine import Engine
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.heartbeat import beating
from activities.models import ScoreReport, ScoreRequest, ScorerRun
from atdp import utcnow
from evolution.scorers import (
    ScoreReading,
    ScorerOutputError,
    ScorerSpec,
    read_batch,
    read_score,
    scorer_input,
    scorer_reward,
)
from evolution.settings import EvolutionSettings
from evolution.window import trajectory_window
from registry import (
    ALL_TENANTS,
    NotFoundError,
    ScorerResult,
    WindowTrajectory,
    add_rewards,
    get_agent,
    get_events,
    record_scorer_results,
    transaction,
    unscored_trajectories,
)

__all__ = ["ScorerActivities", "ScorerUnavailable"]

# One batch's outcome: per trajectory id, its reading or why it has none (an id left out
# was not scored: the budget ran out first).
Outcomes = dict[str, ScoreReading | str]
Call = Callable[[list[dict], float], Outcomes]  # (inputs, deadline) -> outcomes
_KEPT_ERRORS = 3  # failures quoted in a run's report
_PAUSE = 0.5  # seconds before the first retry of a failed call; doubled each time


class ScorerUnavailable(Exception):
    """A scorer that cannot run at all: its function does not import, say."""


class ScorerActivities:
    """Runs code scorers against one registry; one HTTP client for every endpoint."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.http = httpx.Client()
        self._functions: dict[str, Callable[[dict], Any]] = {}

    def close(self) -> None:
        self.http.close()

    @activity.defn
    def score_traffic(self, request: ScoreRequest) -> ScoreReport:
        """Run the agent's scorers (or those named) on the window's unscored traffic."""
        agent = request.window.agent
        with transaction(self.engine) as session:
            try:
                stored = get_agent(session, agent).settings
            except NotFoundError as error:
                raise ApplicationError(
                    str(error), type="AgentNotFound", non_retryable=True
                ) from None
        try:
            scorers = EvolutionSettings.of(stored).scorers
        except ValidationError as error:
            raise ApplicationError(
                f"{agent}: {error}", type="InvalidAgentSettings", non_retryable=True
            ) from None
        wanted = [s for s in scorers if request.scorers is None or s.name in request.scorers]
        with beating():  # a slow scorer is not a dead worker
            report = {spec.name: self._run(spec, request) for spec in wanted}
        return ScoreReport(agent=agent, scorers=report)

    def _run(self, spec: ScorerSpec, request: ScoreRequest) -> ScorerRun:
        """One scorer over the window, within its budget; its faults are its report.

        The budget is checked between calls, so a run makes at least one call (and one
        slow call may overrun it by its own timeout)."""
        try:
            call = self._caller(spec, request.window.agent)
        except ScorerUnavailable as error:
            return ScorerRun(error=str(error))
        window = trajectory_window(request.window)
        if spec.tenants is not None:
            allowed = [t for t in (window.tenants or spec.tenants) if t in spec.tenants]
            window = window.model_copy(update={"tenants": tuple(allowed)})
        with transaction(self.engine) as session:
            todo = unscored_trajectories(
                session,
                window,
                spec.name,
                task_types=spec.task_types,
                max_attempts=spec.max_attempts,
                limit=spec.max_per_run,
            )
        run, deadline = ScorerRun(), time.monotonic() + spec.budget_seconds
        for start in range(0, len(todo), spec.batch_size):
            if start and time.monotonic() > deadline:
                return run.model_copy(update={"left": run.left + len(todo) - start})
            batch = todo[start : start + spec.batch_size]
            run = self._batch(spec, window.agent, call, batch, run, deadline)
        return run

    def _batch(
        self,
        spec: ScorerSpec,
        agent: str,
        call: Call,
        batch: Sequence[WindowTrajectory],
        run: ScorerRun,
        deadline: float,
    ) -> ScorerRun:
        """Score one batch (retrying what failed, within the budget) and keep every outcome."""
        with transaction(self.engine) as session:
            inputs = [scorer_input(t, get_events(session, ALL_TENANTS, t.id)) for t in batch]
        outcomes: Outcomes = {}
        pending = inputs
        for attempt in range(spec.retries + 1):
            if attempt:
                pause = _PAUSE * 2 ** (attempt - 1)
                if time.monotonic() + pause > deadline:
                    break
                time.sleep(pause)
            outcomes.update(call(pending, deadline))
            pending = [i for i in pending if _retryable(outcomes.get(i["trajectory_id"]))]
            if not pending:
                break
        return self._keep(spec, agent, batch, outcomes, run)

    def _keep(
        self,
        spec: ScorerSpec,
        agent: str,
        batch: Sequence[WindowTrajectory],
        outcomes: Outcomes,
        run: ScorerRun,
    ) -> ScorerRun:
        now, rewards, results = utcnow(), [], []
        counts = {"scored": run.scored, "abstained": run.abstained, "failed": run.failed}
        errors, left = list(run.errors), run.left
        for trajectory in batch:
            outcome = outcomes.get(str(trajectory.id))
            if outcome is None:  # never called: the budget ran out
                left += 1
                continue
            result = ScorerResult(
                agent=agent, scorer=spec.name, trajectory_id=trajectory.id,
                tenant=trajectory.tenant, status="failed",
            )  # fmt: skip
            if isinstance(outcome, str):
                result = result.model_copy(update={"error": outcome})
                if len(errors) < _KEPT_ERRORS:
                    errors.append(f"{trajectory.id}: {outcome}")
            elif outcome.value is None:
                result = result.model_copy(update={"status": "abstained"})
            else:
                reward = scorer_reward(spec, trajectory, outcome, now)
                rewards.append(reward)
                update = {"status": "scored", "value": outcome.value, "reward_id": reward.id}
                result = result.model_copy(update=update)
            counts[result.status] += 1
            results.append(result)
        with transaction(self.engine) as session:  # rewards and results commit together
            add_rewards(session, rewards)
            record_scorer_results(session, results)
        return ScorerRun(**counts, left=left, errors=errors)

    # --- calling a scorer -------------------------------------------------------------------

    def _caller(self, spec: ScorerSpec, agent: str) -> Call:
        if spec.url is not None:
            return lambda inputs, deadline: self._post(spec, agent, inputs)
        function = self._function(spec)

        def call(inputs: list[dict], deadline: float) -> Outcomes:
            outcomes: Outcomes = {}
            for item in inputs:
                if outcomes and time.monotonic() > deadline:
                    break
                outcomes[item["trajectory_id"]] = _called(function, item, spec.timeout_seconds)
            return outcomes

        return call

    def _function(self, spec: ScorerSpec) -> Callable[[dict], Any]:
        """The scorer's function, imported once per worker."""
        path = spec.entry_point
        if path not in self._functions:
            module, _, name = path.partition(":")
            try:
                function = getattr(importlib.import_module(module), name)
            except (ImportError, AttributeError) as error:
                raise ScorerUnavailable(
                    f"cannot load {path} ({type(error).__name__}: {error}): install the "
                    "package that holds it where the control plane's workers run, or fix "
                    "the scorer's entry_point (`evoplane agent configure`)"
                ) from None
            if not callable(function):
                raise ScorerUnavailable(f"{path} is not a function (a {type(function).__name__})")
            self._functions[path] = function
        return self._functions[path]

    def _post(self, spec: ScorerSpec, agent: str, inputs: list[dict]) -> Outcomes:
        """One batch to the scorer's endpoint; a failed call is every trajectory's error."""
        ids = [item["trajectory_id"] for item in inputs]
        try:
            response = self.http.post(
                spec.url,
                json={"agent": agent, "scorer": spec.name, "trajectories": inputs},
                timeout=spec.timeout_seconds,
            )
            response.raise_for_status()
            return read_batch(response.json(), ids)
        except ScorerOutputError as error:
            return dict.fromkeys(ids, f"{_FINAL}{error}")
        except httpx.TimeoutException:
            failure = f"{spec.url} took longer than {spec.timeout_seconds:g} s"
        except httpx.HTTPStatusError as error:
            failure = (
                f"{spec.url} answered {error.response.status_code}: {error.response.text[:200]}"
            )
        except (httpx.HTTPError, ValueError) as error:
            failure = f"{spec.url}: {type(error).__name__}: {error}"
        return dict.fromkeys(ids, failure)


# An outcome no retry can change (the scorer answered, wrongly): marked so it is kept.
_FINAL = "the scorer's answer is not a score: "


def _retryable(outcome: ScoreReading | str | None) -> bool:
    return isinstance(outcome, str) and not outcome.startswith(_FINAL)


def _called(function: Callable[[dict], Any], item: dict, timeout: float) -> ScoreReading | str:
    """One call of a scorer function, given `timeout` seconds in a thread of its own (a
    call that overruns is abandoned, not waited for: a slow scorer costs its budget only)."""
    box: dict[str, Any] = {}

    def call() -> None:
        try:
            box["value"] = function(item)
        except Exception as error:  # noqa: BLE001 - a scorer's fault is its result
            box["error"] = f"{type(error).__name__}: {error}"

    thread = threading.Thread(target=call, name="code-scorer", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        return f"took longer than {timeout:g} s"
    if "error" in box:
        return f"raised {box['error']}"
    try:
        return read_score(box["value"])
    except ScorerOutputError as error:
        return f"{_FINAL}{error}"
