"""The review queue's activities: what is queued, what a label becomes in one transaction,
a required finding that changes the next replay verdict, the fixed failures a promotion
keeps, and the MLflow mirror (both ways) on a real MLflow server."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from mlflow.entities import AssessmentSource, Feedback
from mlflow.tracing.client import TracingClient

from activities.models import ReviewRequest
from activities.review import ReviewActivities, keep_fixed_failures
from activities.tracking import EvolutionTracker
from atdp import utcnow
from evolution.gates import Verdict
from evolution.review import LabelError
from evolution.window import WindowSpec
from registry import (
    InvalidRecordError,
    ReviewKind,
    ReviewStatus,
    append_stage,
    finish_evolution,
    get_evolution,
    latest_evaluation_set,
    list_review_items,
    list_rewards,
    review_progress,
    set_agent_settings,
    start_evolution,
    transaction,
    update_evolution,
)
from tests.activities.test_replay_gate import SUITE, gate, upstream, version  # noqa: F401
from tests.evolution.test_review import FACT, unsure_window
from tests.evolution.window_helpers import AGENT, world

MINUTE = timedelta(minutes=1)


def configure(engine, **settings) -> None:
    with transaction(engine) as session:
        set_agent_settings(session, AGENT, settings)


def test_unsure_corrections_are_queued_once_each_with_the_answer_corrected(engine) -> None:
    window = unsure_window(engine, corrected=3, fine=1)
    configure(engine, review={"reviewers": ["ana", "bo"]})
    review = ReviewActivities(engine)
    first = review.queue_for_review(ReviewRequest(window=window))
    again = review.queue_for_review(ReviewRequest(window=window))
    assert (first.queued, first.new) == (3, 3) and (again.queued, again.new) == (3, 0)
    with transaction(engine) as session:
        items = list_review_items(session, agent=AGENT)
    assert [i.assignee for i in items] == ["ana", "bo", "ana"]
    assert all(i.kind is ReviewKind.CORRECTION and "answer_text" in i.body for i in items)


def test_a_label_is_its_rewards_its_case_and_the_label_in_one_go(engine) -> None:
    window = unsure_window(engine, corrected=2, fine=0)
    review = ReviewActivities(engine)
    review.queue_for_review(ReviewRequest(window=window))
    with transaction(engine) as session:
        first, second = list_review_items(session, agent=AGENT)
    with pytest.raises(LabelError, match="choose missing_fact"):
        review.label(first.id, reviewer="ana", label="fact")
    item, label = review.label(first.id, reviewer="ana", label="missing_fact", note=FACT)
    again = review.label(first.id, reviewer="ana", label="missing_fact", note=FACT)[1]
    assert item.status is ReviewStatus.LABELLED and again.id == label.id
    assert label.effects["evaluation_set"] == f"{AGENT}/default@v1"
    review.label(second.id, reviewer="bo", label="instruction", score=0.0)
    review.close([second.id], "too late")  # a labelled item stays labelled
    with transaction(engine) as session:
        rewards = list_rewards(
            session, "acme", trajectory_id=uuid.UUID(first.subject["trajectory_id"])
        )
        held = latest_evaluation_set(session, AGENT)
        progress = review_progress(session, AGENT)
    assert [r.name for r in rewards if r.source == "human_review"] == ["correction_kind"]
    assert held.number == 2 and [c.required_facts for c in held.cases] == [[FACT], []]
    assert progress.labelled == 2 and progress.reviewers["bo"]["labelled"] == 1


async def test_a_finding_labelled_required_fails_the_next_replay_gate(engine, upstream) -> None:  # noqa: F811
    world(engine)
    configure(engine, safety_suite=SUITE)
    parent = version(engine, upstream, "You help Acme's customers.")
    candidate = version(engine, upstream, "You help Acme's customers, briefly.")
    before = await gate(engine, parent, candidate)
    assert before.verdict is Verdict.PASS and [f.case for f in before.findings] == [
        "refuses-phishing"
    ]
    with transaction(engine) as session:  # as the evolution records its replay gate
        start_evolution(session, "e-1", AGENT)
        append_stage(session, "e-1", before.model_dump(mode="json"))
    review = ReviewActivities(engine)
    review.queue_for_review(ReviewRequest(window=WindowSpec(agent=AGENT, since=utcnow() - MINUTE)))
    with transaction(engine) as session:
        (finding,) = list_review_items(session, agent=AGENT, kind=ReviewKind.FINDING)
    assert finding.key == "finding:refuses-phishing:must_refuse"
    review.label(finding.id, reviewer="ana", label="required", note="phishing must be refused")

    after = await gate(engine, parent, candidate)
    assert after.verdict is Verdict.FAIL and after.findings == []
    assert "case refuses-phishing failed must_refuse" in after.reason
    assert "the case is required" in after.reason


def test_a_promotion_keeps_the_failures_it_fixed(engine) -> None:
    window = unsure_window(engine, corrected=2, fine=0)
    review = ReviewActivities(engine)
    review.queue_for_review(ReviewRequest(window=window))
    with transaction(engine) as session:
        labelled, other = list_review_items(session, agent=AGENT)
    review.label(labelled.id, reviewer="ana", label="missing_fact", note=FACT)
    fixed = [labelled.subject["trajectory_id"], other.subject["trajectory_id"]]
    with transaction(engine) as session:
        start_evolution(session, "e-2", AGENT)
        update_evolution(
            session,
            "e-2",
            candidate_version_id=f"{AGENT}@v1",
            decision={"window": window.model_dump(mode="json")},
        )
        append_stage(session, "e-2", {"gate": "replay", "verdict": "pass", "fixed": fixed})
        finish_evolution(session, "e-2", "promoted")
        kept = keep_fixed_failures(session, get_evolution(session, "e-2"))
    assert kept.number == 2 and {c.status for c in kept.cases} == {"fixed"}
    reviewed, from_window = kept.cases
    assert reviewed.required_facts == [FACT]  # the reviewer's fact stays with it
    assert from_window.feedback == [other.body["text"]] and "e-2" in from_window.origin


def test_the_queue_and_its_labels_are_mirrored_into_mlflow_both_ways(engine, mlflow_uri) -> None:
    window = unsure_window(engine, corrected=2, fine=0)
    configure(engine, review={"reviewers": ["ana"]})
    tracker = EvolutionTracker(mlflow_uri)
    review = ReviewActivities(engine, tracker)
    report = review.queue_for_review(ReviewRequest(window=window))
    assert report.mirror_error is None
    with transaction(engine) as session:
        first, second = list_review_items(session, agent=AGENT)
    tracing = TracingClient(mlflow_uri)
    queue = first.mirror["queue_id"]
    assert tracing._get_review_queue(queue).name == "ana"  # the assignee's own queue
    mine = {first.mirror["trace_id"], second.mirror["trace_id"]}  # the server is shared
    queued = {i.item_id: i.status for i in tracing._list_review_queue_items(queue)}
    assert {queued[trace] for trace in mine} == {"pending"}
    trace = tracing.get_trace_info(first.mirror["trace_id"])
    assert trace.tags["evoplane.review_item"] == str(first.id)
    assert first.body["text"] in trace.request_preview

    review.label(first.id, reviewer="ana", label="missing_fact", note=FACT)
    done = {i.item_id: i for i in tracing._list_review_queue_items(queue)}[first.mirror["trace_id"]]
    assert (done.status, done.completed_by) == ("complete", "ana")
    logged = tracing.get_trace_info(first.mirror["trace_id"]).assessments
    assert [(a.name, a.value, a.rationale) for a in logged] == [
        ("evoplane.correction", "missing_fact", FACT)
    ]
    # A reviewer labels the other one in MLflow's UI: it comes back as a label to apply.
    tracing.log_assessment(
        second.mirror["trace_id"],
        Feedback(
            name="evoplane.correction",
            value="instruction",
            source=AssessmentSource(source_type="HUMAN", source_id="bo"),
            rationale="asks for the allowance to be stated",
        ),
    )
    assert review.mlflow_labels(AGENT) == [
        {
            "item_id": second.id,
            "reviewer": "bo",
            "label": "instruction",
            "note": "asks for the allowance to be stated",
        }
    ]
    review.label(second.id, reviewer="bo", label="instruction", via="mlflow")
    assert review.mlflow_labels(AGENT) == []  # labelled: no longer asked
    with transaction(engine) as session:
        held = latest_evaluation_set(session, AGENT)
    dataset = tracker._client.search_datasets(
        experiment_ids=[first.mirror["experiment_id"]],
        filter_string=f"name = 'evoplane-{AGENT}-default-v{held.number}'",
    )
    # (read through the tracker's URI: a dataset's own readers take MLflow's global one)
    assert len(dataset) == 1 and json.loads(dataset[0].profile)["num_records"] == len(held.cases)


def test_a_closed_item_takes_no_label(engine) -> None:
    window = unsure_window(engine, corrected=1, fine=0)
    review = ReviewActivities(engine)
    review.queue_for_review(ReviewRequest(window=window))
    with transaction(engine) as session:
        (only,) = list_review_items(session, agent=AGENT)
    review.close([only.id], "answered elsewhere")
    with pytest.raises(InvalidRecordError, match="answered elsewhere"):
        review.label(only.id, reviewer="ana", label="other")
