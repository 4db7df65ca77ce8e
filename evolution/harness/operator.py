"""The harness operator: optimise instructions and demos with DSPy on the window's traffic.

The window's recorded cases (past failures and known successes), with the agent's
evaluation set's (reviewed cases, fixed failures), become the trainset: a failure's target
is what users corrected (its required facts), a success's target is its recorded answer.
The metric is replay-style and deterministic (see `case_score`). Instruction variants are
the parent's and, without a proposer LM, the parent's plus the lessons users taught in
corrections; each is compiled with the chosen DSPy optimiser and the best program
that beats the parent becomes the candidate harness. MIPROv2 and GEPA propose instructions
themselves and need a proposer (reflection) LM; GEPA reads, besides each case's score,
what users and reviewers said was wrong with it, in their words (its textual feedback).
The cases' evidence is read by `activities.operators.harness`.
"""

from __future__ import annotations

import difflib
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from atdp import Event, EventKind, Harness, MessageAction
from evolution.corrections import CorrectionKind, UserCorrection
from evolution.decision import DecisionRecord
from evolution.evaluation import replay_cases
from evolution.harness.program import (
    harness_adapter,
    harness_of,
    harness_program,
    render_request,
)
from evolution.memory.distil import facts_supplied, states_fact
from evolution.operators import Candidate, OperatorError
from evolution.replay import RecordedTrajectory, request_body
from evolution.settings import EvolutionSettings
from registry import AgentVersion, EvaluationSet

__all__ = [
    "METRIC",
    "HarnessCase",
    "HarnessConfig",
    "HarnessEvidence",
    "LMFactory",
    "case_score",
    "gepa_feedback",
    "harness_cases",
    "harness_changes",
    "harness_config",
    "propose_harness",
]

Optimizer = Literal["bootstrap", "random_search", "mipro", "gepa"]
# version id -> the task LM; an activity returns a dspy.LM that calls the gateway with
# `X-Evoplane-Traffic: evaluation` and the version pinned (see `make_harness_operator`).
LMFactory = Callable[[str], Any]

METRIC = (
    "mean over cases: a past failure scores the share of its required facts (the facts "
    "users supplied) the answer states, or, without facts, 1 when the recorded failed "
    "answer is not repeated (for a failure users blamed on its tools, 1 when another "
    "offered tool is called); a known success scores the share of its recorded answer's "
    "words reproduced"
)
_PASS = 1.0  # a bootstrapped demo must score fully
_WORD = re.compile(r"\w+")
_LESSONS = "Lessons from answers users corrected:"


@dataclass(frozen=True)
class HarnessCase:
    """One recorded call to learn from: the agent's request and what a good answer holds.

    A tool case is a call whose answer was a tool call (`recorded_tools`): a past failure
    users blamed on the tool it used, asked again with the tools it was offered.
    """

    trajectory_id: str
    messages: list[dict[str, Any]]
    recorded_answer: str
    succeeded: bool
    required_facts: list[str] = field(default_factory=list)
    # What users asked of the agent in their corrections (instructions, tool use).
    requests: list[str] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    recorded_tools: list[str] = field(default_factory=list)
    # What users and reviewers said was wrong, in their words (GEPA's textual feedback).
    feedback: list[str] = field(default_factory=list)

    @property
    def tool_case(self) -> bool:
        return bool(self.recorded_tools)

    def example(self) -> Any:
        """The DSPy example: a failure's target is its facts, a success's its recorded answer."""
        import dspy

        answer = self.recorded_answer if self.succeeded else " ".join(self.required_facts)
        return dspy.Example(messages=self.messages, answer=answer, case=self).with_inputs(
            "messages"
        )


@dataclass(frozen=True)
class HarnessConfig:
    """How hard to optimise; MIPROv2 and GEPA need `proposer_lm`."""

    optimizer: Optimizer = "bootstrap"
    max_bootstrapped_demos: int = 2
    max_labeled_demos: int = 2
    candidate_programs: int = 4  # random search only
    metric_calls: int = 40  # GEPA's budget
    per_kind: int = 20  # failures and successes read from the window, each
    # Answers scored per case and harness. The agent samples (temperature 1 by default), so
    # one answer a case is a coin flip; every harness gets the same seeds (paired).
    samples: int = 3
    proposer_lm: Any = None


@dataclass(frozen=True)
class HarnessEvidence:
    """What the operator learns from: the window's cases, read as `config` asks."""

    cases: list[HarnessCase]
    config: HarnessConfig


# --- the cases -----------------------------------------------------------------------------


def harness_cases(
    recorded: Sequence[RecordedTrajectory],
    corrections: Sequence[UserCorrection],
    *,
    evaluation: EvaluationSet | None = None,
    evaluation_events: Mapping[uuid.UUID, list[Event]] | None = None,
) -> list[HarnessCase]:
    """The window's past failures and known successes with an answer to learn from: a
    text answer, or for a failure users blamed on its tools, the tool call; then the
    evaluation set's cases the window does not hold (with their facts and feedback).

    Args:
        recorded: the window's recorded cases (`activities.evidence.recorded_cases`).
        corrections: the window's corrections, read offline.
        evaluation_events: the evaluation set's events (`registry.evaluation_set_events`).
    """
    facts, requests, tool_blamed = _corrections_by_trajectory(corrections)
    learned = list(recorded)
    feedback: dict[str, list[str]] = {}
    if evaluation is not None:
        held = [item.events[0].trajectory_id for item in learned if item.events]
        learned += replay_cases(evaluation, evaluation_events or {}, besides=held)[0]
        for case in evaluation.cases:
            if case.kind == "trajectory" and case.feedback:
                feedback[str(case.trajectory_id)] = list(case.feedback)
                if case.status == "failing" and not case.required_facts:
                    # What a reviewer read as a request is a lesson, as a user's words are.
                    requests.setdefault(str(case.trajectory_id), list(case.feedback))
    cases = []
    for recorded in learned:
        trajectory_id = str(recorded.events[0].trajectory_id) if recorded.events else ""
        blamed = not recorded.recorded_success and trajectory_id in tool_blamed
        call = (_tool_call(recorded.events) if blamed else None) or _answered_call(
            recorded.events, last=recorded.recorded_success
        )
        if call is None:
            continue
        body = request_body(call)
        called = [c.name for c in call.action.tool_calls] if _calls_tools(call) else []
        cases.append(
            HarnessCase(
                trajectory_id=trajectory_id,
                messages=body["messages"],
                recorded_answer=call.action.content or "",
                succeeded=recorded.recorded_success,
                required_facts=_required(
                    facts.get(trajectory_id) or _context_facts(recorded), _asked(recorded)
                ),
                requests=requests.get(trajectory_id, []),
                tools=body.get("tools", []) if called else [],
                recorded_tools=called,
                feedback=feedback.get(trajectory_id, []),
            )
        )
    return cases


def _context_facts(recorded: Any) -> list[str]:
    return list(recorded.context.required_facts) if recorded.context else []


def _calls_tools(event: Event) -> bool:
    return isinstance(event.action, MessageAction) and bool(event.action.tool_calls)


def _tool_call(events: Sequence[Event]) -> Event | None:
    """The first llm call that answered with a tool call: where the tool was chosen."""
    return next((e for e in events if e.kind is EventKind.LLM_CALL and _calls_tools(e)), None)


def _answered_call(events: Sequence[Event], *, last: bool) -> Event | None:
    """A success's final answer; a failure's first answer (the one users corrected)."""
    answered = [
        event
        for event in events
        if event.kind is EventKind.LLM_CALL
        and isinstance(event.action, MessageAction)
        and (event.action.content or "").strip()
    ]
    if not answered:
        return None
    return answered[-1] if last else answered[0]


def _corrections_by_trajectory(
    corrections: Sequence[UserCorrection],
) -> tuple[dict[str, list[str]], dict[str, list[str]], set[str]]:
    """Per trajectory: the facts users supplied, what else they asked of the agent, and
    the trajectories whose users blamed the tools it used."""
    facts = {str(t): found for t, found in facts_supplied(corrections).items()}
    requests: dict[str, list[str]] = {}
    tool_blamed: set[str] = set()
    for correction in corrections:
        trajectory = str(correction.trajectory_id)
        if not correction.supplies_fact and correction.kind is not CorrectionKind.OTHER:
            # In the user's words, their own values written as their kind.
            requests.setdefault(trajectory, []).append(correction.request.strip())
        if correction.kind is CorrectionKind.TOOL_USE:
            tool_blamed.add(trajectory)
    return facts, _unique_values(requests), tool_blamed


def _asked(recorded: Any) -> list[str]:
    context = getattr(recorded, "context", None)
    return list(context.asked_for) if context is not None else []


def _required(facts: list[str], asked: list[str]) -> list[str]:
    """What a good first answer states: the facts users supplied, and what they had to ask
    for (`ScoringContext.asked_for`)."""
    return list(dict.fromkeys([*facts, *asked]))


def _unique_values(found: dict[str, list[str]]) -> dict[str, list[str]]:
    return {key: list(dict.fromkeys(values)) for key, values in found.items()}


# --- the metric ----------------------------------------------------------------------------


def case_score(case: HarnessCase, answer: str | None, called: Sequence[str] = ()) -> float:
    """How well `answer` (and the tools it `called`) does on `case`, in [0, 1]; see `METRIC`."""
    if case.tool_case:
        return _tool_score(case, called)
    answer = answer or ""
    if not case.succeeded:
        if case.required_facts:
            found = sum(states_fact(answer, fact) for fact in case.required_facts)
            return found / len(case.required_facts)
        return float(_words(answer) != _words(case.recorded_answer))
    wanted = set(_words(case.recorded_answer))
    if not wanted:
        return 1.0
    return len(wanted & set(_words(answer))) / len(wanted)


def _tool_score(case: HarnessCase, called: Sequence[str]) -> float:
    """A tool case: a success must call the recorded tools again; a failure users blamed
    on its tools must call other tools, ones it was offered."""
    offered = {(t.get("function") or {}).get("name") for t in case.tools}
    if not called or not set(called) <= offered:
        return 0.0
    same = sorted(called) == sorted(case.recorded_tools)
    return float(same if case.succeeded else not same)


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def _metric(example: Any, prediction: Any, trace: Any = None, *_: Any) -> float | bool:
    """DSPy's metric: the case score; while bootstrapping, whether the demo is good enough."""
    score = case_score(example.case, getattr(prediction, "answer", None))
    return score >= _PASS if trace is not None else score


def _evaluate(
    program: Any, cases: Sequence[HarnessCase], samples: int, lm: Any, template: str | None
) -> list[float]:
    """Each case's mean score over `samples` answers under `program`, drawn with the seeds
    every program gets (a failed call scores 0: it answered nothing)."""
    scores = []
    for index, case in enumerate(cases):
        total = 0.0
        for sample in range(samples):
            seed = index * samples + sample
            try:
                if case.tool_case:
                    total += case_score(
                        case, None, _tools_called(program, case, seed, lm, template)
                    )
                    continue
                answer = program(messages=case.messages, config={"seed": seed}).answer
            except Exception:  # noqa: BLE001 - an answer that breaks the program scores nothing
                answer = None
            total += case_score(case, answer)
        scores.append(total / samples)
    return scores


def _tools_called(
    program: Any, case: HarnessCase, seed: int, lm: Any, template: str | None
) -> list[str]:
    """The tools the LM calls for a tool case under `program`'s harness. DSPy's programs
    answer text, so the case is rendered as the gateway would and sent with its tools."""
    messages = render_request(
        program.signature.instructions, program.demos, case.messages, template
    )
    outputs = lm(messages=messages, tools=case.tools, seed=seed)
    first = outputs[0] if outputs else None
    calls = first.get("tool_calls") if isinstance(first, dict) else None
    return [_function_name(call) for call in calls or []]


def _function_name(call: Any) -> str:
    function = call.get("function") if isinstance(call, dict) else getattr(call, "function", None)
    name = function.get("name") if isinstance(function, dict) else getattr(function, "name", None)
    return str(name or "")


# --- the optimisers ------------------------------------------------------------------------


def _instruction_variants(parent: Harness, cases: Sequence[HarnessCase]) -> list[str]:
    """The parent's instructions and, when users taught something (facts they supplied,
    what they asked of the agent), those plus the lessons."""
    taught = (
        lesson for c in cases if not c.succeeded for lesson in [*c.required_facts, *c.requests]
    )
    lessons = list(dict.fromkeys(taught))
    variants = [parent.instructions]
    if lessons:
        lines = "\n".join(f"- {lesson}" for lesson in lessons)
        variants.append(f"{parent.instructions}\n\n{_LESSONS}\n{lines}".strip())
    return variants


def _compile(program: Any, trainset: list[Any], config: HarnessConfig, task_lm: Any) -> Any:
    """One DSPy optimiser run (the task LM and harness adapter are in the current context)."""
    import dspy

    demos = {
        "max_bootstrapped_demos": config.max_bootstrapped_demos,
        "max_labeled_demos": config.max_labeled_demos,
    }
    if config.optimizer == "bootstrap":
        optimiser = dspy.BootstrapFewShot(metric=_metric, metric_threshold=_PASS, **demos)
        return optimiser.compile(program, trainset=trainset)
    if config.optimizer == "random_search":
        optimiser = dspy.BootstrapFewShotWithRandomSearch(
            metric=_metric,
            metric_threshold=_PASS,
            num_candidate_programs=config.candidate_programs,
            num_threads=1,
            **demos,
        )
        return optimiser.compile(program, trainset=trainset)
    if config.optimizer == "mipro":
        optimiser = dspy.MIPROv2(
            metric=_metric,
            prompt_model=config.proposer_lm,
            task_model=task_lm,
            auto="light",
            num_threads=1,
            **demos,
        )
        return optimiser.compile(program, trainset=trainset)
    optimiser = dspy.GEPA(
        metric=_gepa_metric,
        reflection_lm=config.proposer_lm,
        max_metric_calls=config.metric_calls,
        num_threads=1,
    )
    return optimiser.compile(program, trainset=trainset, valset=trainset)


def _gepa_metric(example: Any, prediction: Any, trace: Any = None, *_: Any) -> Any:
    """GEPA's metric: the case score, with what users said was wrong as its feedback."""
    import dspy

    case = example.case
    score = case_score(case, getattr(prediction, "answer", None))
    return dspy.Prediction(score=score, feedback=gepa_feedback(case, score))


def gepa_feedback(case: HarnessCase, score: float) -> str:
    """The textual feedback GEPA reflects on: the score, and for a case users corrected,
    their words and the facts a good answer states."""
    said = f"This answer scored {score:.2f} of 1."
    if case.succeeded:
        return f"{said} Users accepted the recorded answer: {case.recorded_answer}"
    if case.feedback:
        quoted = " | ".join(case.feedback)
        said += f" Users said the recorded answer was wrong, in their words: {quoted}"
    if case.required_facts:
        said += f" A good answer states: {'; '.join(case.required_facts)}"
    return said


@dataclass(frozen=True)
class _Trial:
    harness: Harness
    scores: list[float]

    @property
    def mean(self) -> float:
        return sum(self.scores) / len(self.scores)


def _trials(
    parent: Harness, cases: list[HarnessCase], config: HarnessConfig, task_lm: Any
) -> list[_Trial]:
    """The parent first, then every compiled variant, each scored on all cases.

    A compiled harness equal to one already scored (the parent's instructions compiled
    without demos are the parent) takes its scores: the seeds are the same, so are they.
    """
    import dspy

    def evaluate(program: Any) -> list[float]:
        return _evaluate(program, cases, config.samples, task_lm, parent.template)

    # DSPy learns demos from text answers; tool cases are scored, not bootstrapped.
    trainset = [case.example() for case in cases if not case.tool_case]
    with dspy.context(lm=task_lm, adapter=harness_adapter(parent.template)):
        trials = [_Trial(parent, evaluate(harness_program(parent)))]
        variants = (
            [parent.instructions]
            if config.optimizer in {"mipro", "gepa"}
            else _instruction_variants(parent, cases)
        )
        for instructions in variants:
            start = harness_program(parent.model_copy(update={"instructions": instructions}))
            compiled = _compile(start, trainset, config, task_lm) if trainset else start
            harness = harness_of(compiled, parent)
            scored = next((trial for trial in trials if trial.harness == harness), None)
            scores = evaluate(compiled) if scored is None else scored.scores
            trials.append(_Trial(harness, scores))
    return trials


# --- the operator --------------------------------------------------------------------------


def propose_harness(
    cases: Sequence[HarnessCase],
    parent: AgentVersion,
    decision: DecisionRecord,
    *,
    lm_factory: LMFactory,
    config: HarnessConfig | None = None,
) -> Candidate:
    """A candidate whose harness (instructions, demos) DSPy optimised on the window's cases
    (`harness_cases`); it reads nothing from the registry.

    Raises:
        OperatorError: the window has no usable case, a proposer-led optimiser has no
            proposer LM, or no optimised harness scores above the parent's.
    """
    config = config or HarnessConfig()
    if config.optimizer in {"mipro", "gepa"} and config.proposer_lm is None:
        raise OperatorError(
            f"the {config.optimizer} optimiser proposes instructions with an LM; configure a "
            "proposer LM or use optimizer='bootstrap'"
        )
    cases = list(cases)
    if not cases:
        raise OperatorError(
            f"the window of {parent.agent} holds no failure or success with a recorded answer; "
            "widen the window or wait for rewards"
        )
    trials = _trials(parent.spec.harness, cases, config, lm_factory(parent.id))
    best = max(trials[1:], key=lambda trial: trial.mean)
    before = trials[0]
    if best.mean <= before.mean or best.harness == before.harness:
        raise OperatorError(
            f"no optimised harness beat the parent's ({before.mean:.3f}) on {len(cases)} "
            "recorded cases; the failures may not be the harness's to fix"
        )
    return _candidate(parent, decision, cases, config, before, best, trials)


def harness_config(config: HarnessConfig, settings: EvolutionSettings) -> HarnessConfig:
    """The worker's config, refined by the agent's own (`harness` in its evolution settings)."""
    return replace(config, **settings.harness.model_dump(exclude_none=True))


# --- the evidence --------------------------------------------------------------------------


def _candidate(
    parent: AgentVersion,
    decision: DecisionRecord,
    cases: list[HarnessCase],
    config: HarnessConfig,
    before: _Trial,
    best: _Trial,
    trials: list[_Trial],
) -> Candidate:
    spec = parent.spec.model_copy(update={"harness": best.harness})
    target = decision.target
    aim = f" for {target.kind.value} failures ({target.key})" if target else ""
    summary = (
        f"harness optimised with {config.optimizer}{aim}: "
        f"metric {before.mean:.3f} -> {best.mean:.3f} on {len(cases)} recorded cases"
    )
    failures = [i for i, case in enumerate(cases) if not case.succeeded]
    successes = [i for i, case in enumerate(cases) if case.succeeded]
    evidence = {
        "optimizer": config.optimizer,
        "metric": METRIC,
        "before": round(before.mean, 4),
        "after": round(best.mean, 4),
        "failures": _split_mean(before, best, failures),
        "successes": _split_mean(before, best, successes),
        "trials": [round(trial.mean, 4) for trial in trials],
        "trajectory_ids": [case.trajectory_id for case in cases],
    }
    changes = harness_changes(parent.spec.harness, best.harness)
    return Candidate(spec=spec, summary=summary, changes=changes, evidence=evidence)


def _split_mean(before: _Trial, after: _Trial, indices: list[int]) -> dict[str, Any]:
    if not indices:
        return {"cases": 0}

    def mean(trial: _Trial) -> float:
        return round(sum(trial.scores[i] for i in indices) / len(indices), 4)

    return {"cases": len(indices), "before": mean(before), "after": mean(after)}


def harness_changes(old: Harness, new: Harness) -> list[str]:
    """What changed, readable: a unified diff of the instructions, demos added and removed."""
    changes = []
    if old.instructions != new.instructions:
        diff = difflib.unified_diff(
            old.instructions.splitlines(),
            new.instructions.splitlines(),
            "instructions (parent)",
            "instructions (candidate)",
            lineterm="",
        )
        changes.append("\n".join(diff))
    changes += [f"added demo: {_demo_text(d)}" for d in new.demos if d not in old.demos]
    changes += [f"removed demo: {_demo_text(d)}" for d in old.demos if d not in new.demos]
    return changes


def _demo_text(demo: Any) -> str:
    parts = [f"{m.role}: {m.content}" for m in demo.messages if isinstance(m.content, str)]
    text = " | ".join(parts)
    return text if len(text) <= 160 else f"{text[:157]}..."
