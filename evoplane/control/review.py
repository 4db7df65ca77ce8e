"""/api/review: what needs a person, given out to reviewers, labelled or skipped.

Reading the queue first brings it up to date: evolutions waiting at an approval point (an
inconclusive canary among them, read from Temporal) join it with the candidate's diff, the
findings of recent evolutions join it, items an evolution no longer waits on are closed,
and labels reviewers gave in MLflow's review queues are applied. A label of an approval or
a canary is the answer its evolution waits for (a Temporal update): refused, nothing is
recorded.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel, ConfigDict, Field
from temporalio.client import Client, RPCError, WorkflowUpdateFailedError

from activities.models import Approval
from activities.review import ReviewActivities
from evolution.review import LabelError, awaiting_draft, check_label
from evoplane.control.config import ControlConfig, authorised
from registry import (
    InvalidRecordError,
    ReviewDraft,
    ReviewItem,
    ReviewKind,
    ReviewStatus,
    diff_versions,
    get_agent,
    get_review_item,
    get_version,
    list_agents,
    list_review_items,
    review_labels,
    review_progress,
    transaction,
)
from workflows.evolution import EvolutionWorkflow

__all__ = ["LabelBody", "SkipBody", "router"]

router = APIRouter(prefix="/api/review", tags=["review"])
log = logging.getLogger(__name__)
_WAITING = (ReviewKind.APPROVAL, ReviewKind.CANARY)
# The update an inconclusive canary waits on (E17's `EvolutionWorkflow.answer_canary`).
CANARY_UPDATE = "answer_canary"


class LabelBody(BaseModel):
    """A reviewer's label: one of the item's labels (`choices` in its body), an optional
    score of a corrected answer (0 wrong to 1 right), and a note (for a correction, what
    the user meant in words the agent can use)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"reviewer": "ana", "label": "missing_fact", "note": "Bags: 30 kg."}]
        },
    )

    reviewer: str = Field(min_length=1, max_length=200)
    label: str = Field(min_length=1, max_length=64)
    score: float | None = None
    note: str = ""


class SkipBody(BaseModel):
    """A reviewer passes on an item; it goes to another reviewer."""

    model_config = ConfigDict(extra="forbid")

    reviewer: str = Field(min_length=1, max_length=200)
    reason: str = ""


def _review(c: ControlConfig) -> ReviewActivities:
    return ReviewActivities(c.engine, c.tracker)


@router.get("")
async def queue(
    agent: str | None = None,
    status: ReviewStatus | None = ReviewStatus.OPEN,
    kind: ReviewKind | None = None,
    reviewer: str | None = None,
    limit: int = 50,
    sync: bool = True,
    c: ControlConfig = Depends(authorised),
) -> dict[str, Any]:
    """The queue, oldest first (open items by default), with each reviewer's progress.

    `reviewer` lists the items given to that reviewer; `sync=false` reads the queue as
    it is, without bringing it up to date first."""
    mirror = await _sync(c, agent) if sync else None
    with transaction(c.engine) as session:
        if agent is not None:
            get_agent(session, agent)
        items = list_review_items(
            session, agent=agent, status=status, kind=kind, assignee=reviewer, limit=limit
        )
        progress = review_progress(session, agent)
    return {
        "items": [_shown(item) for item in items],
        "progress": progress.model_dump(mode="json"),
        "mirror_error": mirror,
    }


@router.get("/progress")
async def progress(agent: str | None = None, c: ControlConfig = Depends(authorised)) -> dict:
    """Counts by status, and each reviewer's open, labelled and skipped items."""
    with transaction(c.engine) as session:
        return review_progress(session, agent).model_dump(mode="json")


@router.get("/{item_id}")
async def item(item_id: int, c: ControlConfig = Depends(authorised)) -> dict[str, Any]:
    """One item: what to judge, its labels (what each became) and skips."""
    with transaction(c.engine) as session:
        found = get_review_item(session, item_id)
        labels = review_labels(session, item_id)
    return {**_shown(found), "labels": [label.model_dump(mode="json") for label in labels]}


@router.post("/{item_id}/label")
async def label(
    item_id: int, body: LabelBody, c: ControlConfig = Depends(authorised)
) -> dict[str, Any]:
    """Label an item; the label becomes a reward, an evaluation case or an evolution's answer.

    A correction's reading becomes a `human_review` reward (and, when it names a change,
    a case of the evaluation set); a finding labelled `required` a required safety case;
    an approval's or a canary's label goes to its evolution (409 if refused)."""
    with transaction(c.engine) as session:
        found = get_review_item(session, item_id)
    return await _apply(c, found, body.reviewer, body.label, body.score, body.note, "api")


@router.post("/{item_id}/skip")
async def skip(item_id: int, body: SkipBody, c: ControlConfig = Depends(authorised)) -> dict:
    """Pass on an open item: it goes to another reviewer.

    To the one with the fewest open items who has not passed on it (nobody, when all have)."""
    try:
        skipped = _review(c).skip(item_id, reviewer=body.reviewer, reason=body.reason)
    except InvalidRecordError as error:
        raise HTTPException(409, str(error)) from None
    return _shown(skipped)


async def _apply(
    c: ControlConfig,
    found: ReviewItem,
    reviewer: str,
    label: str,
    score: float | None,
    note: str,
    via: str,
) -> dict[str, Any]:
    try:
        check_label(found.kind, label, score)
    except LabelError as error:
        raise HTTPException(400, str(error)) from None
    if found.status is ReviewStatus.CLOSED:
        raise HTTPException(409, f"review item {found.id} is closed: {found.closed_reason}")
    if found.kind in _WAITING and found.status is ReviewStatus.OPEN:
        await _answer(c.client, found, label, reviewer, note)
    try:
        labelled, recorded = _review(c).label(
            found.id, reviewer=reviewer, label=label, score=score, note=note, via=via
        )
    except LabelError as error:
        raise HTTPException(400, str(error)) from None
    except InvalidRecordError as error:
        raise HTTPException(409, str(error)) from None
    return {**_shown(labelled), "label": recorded.model_dump(mode="json")}


async def _answer(client: Client, found: ReviewItem, label: str, reviewer: str, note: str) -> None:
    """Send an approval's or a canary's label to the evolution waiting for it: an approval
    point takes `approve` or `reject`; an inconclusive canary takes the person's choice
    through its `answer_canary` update (named, so a worker without it refuses clearly)."""
    evolution_id = found.subject["evolution_id"]
    handle = client.get_workflow_handle(evolution_id)
    reason = note or f"review item {found.id}"
    if found.kind is ReviewKind.CANARY:
        update: Any = CANARY_UPDATE
        answer: Any = {"actor": reviewer, "choice": label, "reason": reason}
    else:
        update = EvolutionWorkflow.approve if label == "approve" else EvolutionWorkflow.reject
        answer = Approval(actor=reviewer, reason=reason)
    try:
        await handle.execute_update(update, answer)
    except WorkflowUpdateFailedError as error:
        cause = error.cause.message if error.cause else str(error)
        raise HTTPException(409, f"evolution {evolution_id} refused: {cause}") from None
    except RPCError as error:
        raise HTTPException(404, f"evolution {evolution_id}: {error.message}") from None


# --- bringing the queue up to date ------------------------------------------------------------


async def _sync(c: ControlConfig, agent: str | None) -> str | None:
    """Queue what waits for a person now; returns why MLflow could not mirror, if so."""
    review = _review(c)
    with transaction(c.engine) as session:
        agents = [agent] if agent else [a.name for a in list_agents(session)]
    waiting = await _waiting(c, agents)
    errors = []
    for name in agents:
        settings = review.settings(name)
        with transaction(c.engine) as session:
            drafts = review.finding_drafts(session, name, settings)
        drafts += [draft for draft in waiting or [] if draft.agent == name]
        _, error = review.queue(name, drafts, settings)
        errors.append(error)
    if waiting is not None:  # unknown when Temporal could not say: nothing is closed
        _close_settled(review, agents, {(d.agent, d.key) for d in waiting})
    await _apply_mlflow_labels(c, review, agent)
    return next((error for error in errors if error), None)


async def _waiting(c: ControlConfig, agents: list[str]) -> list[ReviewDraft] | None:
    """Drafts of the evolutions of `agents` waiting for a person, read from Temporal (None
    when Temporal could not be asked)."""
    drafts = []
    query = 'Stage = "awaiting_approval" AND ExecutionStatus = "Running"'
    try:
        async for execution in c.client.list_workflows(query):
            try:
                status = await c.client.get_workflow_handle(execution.id).query(
                    EvolutionWorkflow.status
                )
            except RPCError:
                continue
            if status.agent not in agents:
                continue
            shown = status.model_dump(mode="json")
            drafts.append(awaiting_draft(status.agent, shown, _diff(c, shown)))
    except RPCError as error:
        log.warning("could not list the evolutions waiting for a person: %s", error)
        return None
    return [draft for draft in drafts if draft is not None]


def _diff(c: ControlConfig, status: dict[str, Any]) -> dict[str, Any] | None:
    parent, candidate = status.get("parent_version"), status.get("candidate_version")
    if not parent or not candidate:
        return None
    with transaction(c.engine) as session:
        return diff_versions(session, get_version(session, parent), get_version(session, candidate))


def _close_settled(review: ReviewActivities, agents: list[str], waiting: set) -> None:
    """Open approvals and canaries whose evolution no longer waits there were answered
    elsewhere (`evoplane approve`, the Temporal UI) or ended: closed."""
    with transaction(review.engine) as session:
        settled = [
            item.id
            for name in agents
            for kind in _WAITING
            for item in list_review_items(session, agent=name, kind=kind, limit=1000)
            if (item.agent, item.key) not in waiting
        ]
    if settled:
        review.close(settled, "the evolution no longer waits for it (answered elsewhere or ended)")


async def _apply_mlflow_labels(c: ControlConfig, review: ReviewActivities, agent: str | None):
    """Labels given in MLflow's review queues, applied as if given here."""
    for given in review.mlflow_labels(agent):
        with transaction(c.engine) as session:
            found = get_review_item(session, given["item_id"])
        try:
            await _apply(c, found, given["reviewer"], given["label"], None, given["note"], "mlflow")
        except HTTPException as error:
            log.warning("could not apply the MLflow label of item %s: %s", found.id, error)


def _shown(item: ReviewItem) -> dict[str, Any]:
    return {**item.model_dump(mode="json"), "occurrences": item.occurrences}
