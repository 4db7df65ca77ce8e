"""The review queue's I/O: queueing what needs a person, applying labels and skips, and
mirroring all of it into MLflow; and the evaluation set's cases a promotion adds.

`ReviewActivities.queue_for_review` is the activity an evolution runs after its decision:
the window's corrections the analysis could not read and the findings its evolutions
reported go to the queue. The control API calls the same methods (it adds the evolutions
waiting at an approval point, which it reads from Temporal). A label is applied in one
transaction: the item labelled, its rewards added, its cases in a new set version. MLflow
is a mirror: when it is down, the queue works the same and the mirror catches up later.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from pydantic import ValidationError
from sqlalchemy.engine import Engine
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.evidence import correction_records
from activities.heartbeat import beating
from activities.models import ReviewReport, ReviewRequest
from atdp import EventKind, MessageAction, utcnow
from evolution.evaluation import fixed_failure_cases
from evolution.memory.distil import fact_text
from evolution.review import correction_drafts, finding_drafts, label_effects
from evolution.safety import default_safety_suite
from evolution.settings import EvolutionSettings
from evolution.window import WindowSpec
from registry import (
    ALL_TENANTS,
    EvaluationSet,
    EvolutionRecord,
    NotFoundError,
    ReviewDraft,
    ReviewItem,
    ReviewLabel,
    ReviewStatus,
    Session,
    add_evaluation_cases,
    add_rewards,
    close_review_items,
    find_review_label,
    get_agent,
    get_evaluation_set,
    get_event,
    get_review_item,
    get_trajectory,
    label_review_item,
    latest_evaluation_set,
    list_evolutions,
    list_review_items,
    queue_review_items,
    set_review_mirror,
    skip_review_item,
    transaction,
)

__all__ = ["ReviewActivities", "keep_fixed_failures"]

log = logging.getLogger(__name__)

# The evolutions whose findings are queued: the latest few of the agent (older ones were
# queued when they were new).
RECENT_EVOLUTIONS = 20
# Items mirrored into MLflow by one call (the rest by the next).
_MIRRORED_AT_ONCE = 200


class ReviewActivities:
    """The review queue on one registry, mirrored by `tracker` (an `EvolutionTracker`, or
    None to keep it in the registry alone)."""

    def __init__(self, engine: Engine, tracker: Any | None = None) -> None:
        self.engine, self.tracker = engine, tracker

    @activity.defn
    def queue_for_review(self, request: ReviewRequest) -> ReviewReport:
        """Queue what in the window and the agent's evolutions needs a person."""
        agent = request.window.agent
        settings = self.settings(agent)
        drafts: list[ReviewDraft] = []
        with beating(), transaction(self.engine) as session:
            if settings.review.corrections:
                corrections = correction_records(session, request.window).corrections()
                drafts += [_with_answer(session, d) for d in correction_drafts(agent, corrections)]
            drafts += self.finding_drafts(session, agent, settings)
        started = utcnow()
        items, mirror_error = self.queue(agent, drafts, settings)
        new = {item.id for item in items if item.created_at >= started}
        return ReviewReport(agent=agent, queued=len(items), new=len(new), mirror_error=mirror_error)

    def settings(self, agent: str) -> EvolutionSettings:
        with transaction(self.engine) as session:
            try:
                return EvolutionSettings.of(get_agent(session, agent).settings)
            except NotFoundError as error:
                raise ApplicationError(
                    str(error), type="AgentNotFound", non_retryable=True
                ) from None
            except ValidationError as error:
                raise ApplicationError(
                    f"{agent}: {error}", type="InvalidAgentSettings", non_retryable=True
                ) from None

    def finding_drafts(
        self, session: Session, agent: str, settings: EvolutionSettings
    ) -> list[ReviewDraft]:
        """The findings the agent's latest evolutions reported."""
        records = list_evolutions(session, agent=agent, limit=RECENT_EVOLUTIONS)
        suite = settings.safety_suite or default_safety_suite()
        return finding_drafts(agent, records, suite)

    def queue(
        self, agent: str, drafts: list[ReviewDraft], settings: EvolutionSettings | None = None
    ) -> tuple[list[ReviewItem], str | None]:
        """Merge drafts into the queue (given to the agent's reviewers in turn) and mirror
        what is not mirrored yet; returns the items and, when MLflow failed, why."""
        settings = settings or self.settings(agent)
        with transaction(self.engine) as session:
            items = queue_review_items(session, drafts, reviewers=settings.review.reviewers)
        if not settings.review.mirror:
            return items, None
        return items, self.mirror(agent, items)

    def mirror(self, agent: str, items: list[ReviewItem]) -> str | None:
        """Mirror the agent's open items MLflow does not hold yet (these and any an earlier
        attempt left out); returns why it could not, if so."""
        if self.tracker is None:
            return None
        with transaction(self.engine) as session:
            earlier = list_review_items(session, agent=agent, limit=_MIRRORED_AT_ONCE)
        wanted = {i.id: i for i in [*items, *earlier] if i.status is ReviewStatus.OPEN}
        missing = [i.model_dump(mode="json") for i in wanted.values() if i.mirror is None]
        try:
            made = self.tracker.mirror_review_items(agent, missing[:_MIRRORED_AT_ONCE])
        except Exception as error:  # noqa: BLE001 - MLflow is a mirror: the queue goes on
            log.warning("could not mirror the review queue of %s to MLflow: %s", agent, error)
            return str(error)
        with transaction(self.engine) as session:
            for item_id, ids in made.items():
                set_review_mirror(session, int(item_id), ids)
        return None

    def label(
        self,
        item_id: int,
        *,
        reviewer: str,
        label: str,
        score: float | None = None,
        note: str = "",
        via: str = "api",
    ) -> tuple[ReviewItem, ReviewLabel]:
        """Apply a label in one transaction: its rewards, its cases (a new version of the
        agent's evaluation set) and the label itself. A retry repeats nothing.

        Raises:
            evolution.review.LabelError: the item does not take this label.
            registry.InvalidRecordError: the item was closed.
        """
        with transaction(self.engine) as session:
            item = get_review_item(session, item_id)
            given = find_review_label(
                session, item_id, reviewer=reviewer, label=label, score=score, note=note
            )
            if given is not None:  # a repeated request: its rewards and cases are in
                return item, given
            settings = EvolutionSettings.of(get_agent(session, item.agent).settings)
            effects = label_effects(
                item, label, reviewer=reviewer, at=utcnow(), score=score, note=note
            )
            summary = effects.summary()
            add_rewards(session, effects.rewards)
            if effects.cases:
                kept = add_evaluation_cases(
                    session,
                    item.agent,
                    effects.cases,
                    name=settings.evaluation.name,
                    author=reviewer,
                    reason=f"review item {item.id} labelled {label}",
                    max_cases=settings.evaluation.max_cases,
                )
                summary["evaluation_set"] = kept.id
            recorded = label_review_item(
                session,
                item_id,
                reviewer=reviewer,
                label=label,
                score=score,
                note=note,
                effects=summary,
                via=via,
            )
            item = get_review_item(session, item_id)
        self._mirror_label(item, recorded, settings, summary.get("evaluation_set"))
        return item, recorded

    def _mirror_label(
        self,
        item: ReviewItem,
        label: ReviewLabel,
        settings: EvolutionSettings,
        set_id: str | None,
    ) -> None:
        if self.tracker is None or not settings.review.mirror:
            return
        try:
            if item.mirror is not None:
                self.tracker.mirror_review_label(
                    item.model_dump(mode="json"), label.model_dump(mode="json")
                )
            if set_id is not None:
                self.mirror_evaluation_set(item.agent, set_id)
        except Exception as error:  # noqa: BLE001 - MLflow is a mirror: the label stands
            log.warning("could not mirror the label of review item %s: %s", item.id, error)

    def mirror_evaluation_set(self, agent: str, set_id: str) -> None:
        name, _, number = set_id.rpartition("/")[2].partition("@v")
        with transaction(self.engine) as session:
            found = get_evaluation_set(session, agent, name, int(number))
        self.tracker.mirror_evaluation_set(agent, found.model_dump(mode="json"))

    def skip(self, item_id: int, *, reviewer: str, reason: str = "") -> ReviewItem:
        """`reviewer` passes on the item; it goes to another reviewer (also in MLflow)."""
        with transaction(self.engine) as session:
            agent = get_review_item(session, item_id).agent
            settings = EvolutionSettings.of(get_agent(session, agent).settings)
            item = skip_review_item(
                session,
                item_id,
                reviewer=reviewer,
                reason=reason,
                reviewers=settings.review.reviewers,
            )
        if self.tracker is not None and item.mirror is not None and settings.review.mirror:
            try:
                moved = self.tracker.move_review_item(item.model_dump(mode="json"))
                with transaction(self.engine) as session:
                    item = set_review_mirror(session, item.id, moved)
            except Exception as error:  # noqa: BLE001 - MLflow is a mirror
                log.warning("could not move review item %s in MLflow: %s", item.id, error)
        return item

    def close(self, item_ids: list[int], reason: str) -> list[ReviewItem]:
        with transaction(self.engine) as session:
            return close_review_items(session, item_ids, reason)

    def mlflow_labels(self, agent: str | None = None) -> list[dict[str, Any]]:
        """Labels reviewers gave in MLflow's UI to open mirrored items, not applied yet."""
        if self.tracker is None:
            return []
        with transaction(self.engine) as session:
            items = [i for i in list_review_items(session, agent=agent, limit=500) if i.mirror]
        if not items:
            return []
        try:
            return self.tracker.mlflow_review_labels([i.model_dump(mode="json") for i in items])
        except Exception as error:  # noqa: BLE001 - MLflow is a mirror
            log.warning("could not read labels from MLflow: %s", error)
            return []


def _with_answer(session: Session, draft: ReviewDraft) -> ReviewDraft:
    """The draft with the answer its user corrected, so a reviewer reads both."""
    answer = draft.subject.get("answer")
    if not answer:
        return draft
    try:
        event = get_event(session, draft.tenant, uuid.UUID(answer))
    except NotFoundError:
        return draft
    if event.kind is not EventKind.LLM_CALL or not isinstance(event.action, MessageAction):
        return draft
    body = {**draft.body, "answer_text": event.action.content or ""}
    return draft.model_copy(update={"body": body})


def keep_fixed_failures(session: Session, record: EvolutionRecord) -> EvaluationSet | None:
    """After a promotion: the past failures its replay gate fixed join the agent's
    evaluation set as fixed cases, with the facts and words their users gave, so a later
    candidate that breaks them again fails its replay gate. None when nothing was fixed
    (or the agent keeps no fixed failures)."""
    settings = EvolutionSettings.of(get_agent(session, record.agent).settings).evaluation
    fixed = [
        trajectory_id
        for stage in record.stages
        if stage.get("gate") == "replay"
        for trajectory_id in stage.get("fixed") or []
    ]
    if not fixed or not settings.keep_fixed:
        return None
    held = latest_evaluation_set(session, record.agent, settings.name)
    facts, feedback = _corrected(session, record, set(fixed))
    tenants = {}
    for trajectory_id in fixed:
        try:
            tenants[trajectory_id] = get_trajectory(
                session, ALL_TENANTS, uuid.UUID(trajectory_id)
            ).tenant
        except NotFoundError:
            continue  # gone (retention): nothing to keep
    origin = f"fixed by {record.candidate_version_id} ({record.id})"
    cases = fixed_failure_cases(
        fixed, tenants, held=held, facts=facts, feedback=feedback, origin=origin
    )
    if not cases:
        return None
    return add_evaluation_cases(
        session,
        record.agent,
        cases,
        name=settings.name,
        author=f"evolution:{record.id}",
        reason=f"past failures {record.candidate_version_id} fixed",
        max_cases=settings.max_cases,
    )


def _corrected(
    session: Session, record: EvolutionRecord, wanted: set[str]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Per fixed trajectory of the evolution's window: the facts its users supplied, and
    their words."""
    window = (record.decision or {}).get("window")
    if not window:
        return {}, {}
    facts: dict[str, list[str]] = {}
    words: dict[str, list[str]] = {}
    spec = WindowSpec.model_validate(window)
    for correction in correction_records(session, spec).corrections():
        key = str(correction.trajectory_id)
        if key not in wanted:
            continue
        words.setdefault(key, []).append(correction.text)
        fact = fact_text(correction.text) if correction.supplies_fact else None
        if fact and fact not in facts.get(key, []):
            facts.setdefault(key, []).append(fact)
    return facts, words
