"""The review queue and evaluation sets mirrored into MLflow (3.14+ review queues, GenAI
evaluation datasets), where people already look; the registry stays the source of truth.

Each review item becomes a trace in the experiment `evoplane/<agent>/review` (a GenAI
experiment, so MLflow's UI opens its traces and review queues), holding what to judge in
its previews and tags, and is put in its assignee's review queue (MLflow's user queue),
or, unassigned, in the shared queue `evoplane`. Each kind has a label schema
(`evoplane.<kind>`) whose options are the kind's labels. A label given here is logged on
the trace as feedback and the queue item completed; a label a reviewer gives in MLflow (a
feedback of that schema on the trace) is read back by `mlflow_review_labels`.

Each evaluation set version is a dataset `evoplane-<agent>-<set>-v<n>`: open-source MLflow
keeps no versions of a dataset, so each version is a dataset of its own.

MLflow's review-queue functions read the process's global tracking URI; this module calls
the tracing client they wrap with the tracker's own URI instead (as the rest of the tracker
never touches MLflow's globals), through its underscored methods of MLflow 3.17.
"""

from __future__ import annotations

import functools
import uuid
from datetime import datetime
from typing import Any

from mlflow import MlflowClient
from mlflow.entities import AssessmentSource, Feedback, TraceInfo, TraceLocation, TraceState
from mlflow.exceptions import MlflowException
from mlflow.genai.label_schemas import InputCategorical
from mlflow.tracing.client import TracingClient

from activities.tracking.errors import error_code, mlflow_call
from activities.tracking.names import AGENT_TAG, EXPERIMENT_KIND_TAG, quoted, registry_safe

__all__ = ["REVIEW_ITEM_TAG", "ReviewMirror", "dataset_name", "review_experiment"]

REVIEW_ITEM_TAG = "evoplane.review_item"
SHARED_QUEUE = "evoplane"
_GENAI = "genai_development"
_PREVIEW = 1000  # characters MLflow keeps of a trace's request and response previews
_NAMESPACE = uuid.UUID("2b7d8c1e-6a0f-4c55-b2d9-e20f0e1a7c1d")


def review_experiment(agent: str) -> str:
    return f"evoplane/{agent}/review"


def dataset_name(set_id: str) -> str:
    """`support-bot/default@v3` -> `evoplane-support-bot-default-v3`."""
    return f"evoplane-{registry_safe(set_id.replace('/', '-').replace('@', '-'))}"


class ReviewMirror:
    """The review queue and evaluation sets in MLflow; a part of `EvolutionTracker`."""

    _client: MlflowClient
    tracking_uri: str

    @functools.cached_property
    def _tracing(self) -> TracingClient:
        return TracingClient(self.tracking_uri)

    @mlflow_call
    def review_experiment_for(self, agent: str) -> str:
        """The id of `evoplane/<agent>/review`, created (as a GenAI experiment) on first use."""
        name = review_experiment(agent)
        found = self._client.get_experiment_by_name(name)
        if found is not None:
            if found.lifecycle_stage == "deleted":
                self._client.restore_experiment(found.experiment_id)
            return found.experiment_id
        tags = {EXPERIMENT_KIND_TAG: _GENAI, AGENT_TAG: agent}
        try:
            return self._client.create_experiment(name, tags=tags)
        except MlflowException as error:
            if error_code(error) != "RESOURCE_ALREADY_EXISTS":
                raise
            return self._client.get_experiment_by_name(name).experiment_id

    @mlflow_call
    def mirror_review_items(
        self, agent: str, items: list[dict[str, Any]]
    ) -> dict[str, dict[str, str]]:
        """Put review items (`registry.ReviewItem` as JSON) in MLflow: a trace each, in its
        assignee's queue; again for the same item finds the same trace and queue item.

        Returns, per item id, the ids to keep with it: experiment, trace and queue."""
        if not items:
            return {}
        experiment = self.review_experiment_for(agent)
        for kind in dict.fromkeys(item["kind"] for item in items):
            choices = next(i["body"].get("choices") or {} for i in items if i["kind"] == kind)
            self._schema(experiment, kind, choices)
        mirrors, queued = {}, {}
        for item in items:
            # Found again for the same item, never another registry's item of that number.
            identity = f"{experiment}:{item['id']}:{item['key']}:{item['created_at']}"
            trace_id = "tr-" + uuid.uuid5(_NAMESPACE, identity).hex
            self._tracing.start_trace(_trace_info(experiment, trace_id, agent, item))
            queued.setdefault(item.get("assignee"), []).append(trace_id)
            mirrors[str(item["id"])] = {"experiment_id": experiment, "trace_id": trace_id}
        for assignee, traces in queued.items():
            queue = self._queue(experiment, assignee)
            self._tracing._add_items_to_review_queue(queue, item_ids=traces)
            for mirror in mirrors.values():
                if mirror["trace_id"] in traces:
                    mirror["queue_id"] = queue
        return mirrors

    @mlflow_call
    def move_review_item(self, item: dict[str, Any]) -> dict[str, str]:
        """After a skip: the item's trace leaves its old queue for its new assignee's."""
        mirror = item["mirror"]
        queue = self._queue(mirror["experiment_id"], item.get("assignee"))
        if queue != mirror["queue_id"]:
            self._tracing._remove_items_from_review_queue(
                mirror["queue_id"], item_ids=[mirror["trace_id"]]
            )
            self._tracing._add_items_to_review_queue(queue, item_ids=[mirror["trace_id"]])
        return {**mirror, "queue_id": queue}

    @mlflow_call
    def mirror_review_label(self, item: dict[str, Any], label: dict[str, Any]) -> None:
        """A label given through Evoplane: feedback on the item's trace (unless it came from
        MLflow already), and the queue item completed by the reviewer."""
        mirror = item["mirror"]
        if label["via"] != "mlflow":
            feedback = Feedback(
                name=f"evoplane.{item['kind']}",
                value=label["label"],
                source=AssessmentSource(source_type="HUMAN", source_id=label["reviewer"]),
                rationale=label.get("note") or None,
            )
            self._tracing.log_assessment(mirror["trace_id"], feedback)
        self._tracing._set_review_queue_item_status(
            mirror["queue_id"],
            item_id=mirror["trace_id"],
            status="complete",
            completed_by=label["reviewer"],
        )

    @mlflow_call
    def mlflow_review_labels(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Labels reviewers gave in MLflow's UI to mirrored open items: per item, the latest
        human feedback of its schema whose value is one of its labels."""
        found = []
        for item in items:
            mirror = item.get("mirror")
            if not mirror:
                continue
            info = self._tracing.get_trace_info(mirror["trace_id"])
            given = [
                a
                for a in info.assessments
                if isinstance(a, Feedback)
                and a.name == f"evoplane.{item['kind']}"
                and a.source.source_type == "HUMAN"
                and a.value in (item["body"].get("choices") or {})
            ]
            if given:
                latest = max(given, key=lambda a: (a.last_update_time_ms or 0, a.assessment_id))
                found.append(
                    {
                        "item_id": item["id"],
                        "reviewer": latest.source.source_id or "mlflow",
                        "label": latest.value,
                        "note": latest.rationale or "",
                    }
                )
        return found

    @mlflow_call
    def mirror_evaluation_set(self, agent: str, evaluation_set: dict[str, Any]) -> str:
        """The dataset of one evaluation set version (`registry.EvaluationSet` as JSON),
        made once; returns its id."""
        name = dataset_name(evaluation_set["id"])
        experiment = self.review_experiment_for(agent)
        existing = self._client.search_datasets(
            experiment_ids=[experiment], filter_string=f"name = {quoted(name)}"
        )
        if existing:
            return existing[0].dataset_id
        dataset = self._client.create_dataset(
            name=name,
            experiment_id=[experiment],
            tags={
                "evoplane.evaluation_set": evaluation_set["id"],
                "evoplane.content_hash": evaluation_set["content_hash"],
                "evoplane.reason": evaluation_set["reason"][:250],
                AGENT_TAG: agent,
            },
        )
        if evaluation_set["cases"]:
            # The store's own call: `merge_records` reads the process's global tracking URI.
            records = [_record(case) for case in evaluation_set["cases"]]
            self._tracing.store.upsert_dataset_records(dataset.dataset_id, records)
        return dataset.dataset_id

    # --- helpers ----------------------------------------------------------------------------

    def _schema(self, experiment: str, kind: str, choices: dict[str, str]) -> None:
        """The kind's label schema in the experiment, made on first use."""
        name = f"evoplane.{kind}"
        try:
            self._tracing._get_label_schema_by_name(experiment, name)
            return
        except MlflowException as error:
            if error_code(error) != "RESOURCE_DOES_NOT_EXIST":
                raise
        instruction = "; ".join(f"{label}: {meaning}" for label, meaning in choices.items())
        try:
            self._tracing._create_label_schema(
                experiment_id=experiment,
                name=name,
                type="feedback",
                input=InputCategorical(options=list(choices)),
                instruction=instruction or None,
                enable_comment=True,
            )
        except MlflowException as error:
            if error_code(error) != "RESOURCE_ALREADY_EXISTS":  # another worker made it
                raise

    def _queue(self, experiment: str, assignee: str | None) -> str:
        """The assignee's own queue, or the shared one for an unassigned item."""
        if assignee:
            return self._tracing._get_or_create_user_queue(experiment, user=assignee).queue_id
        try:
            return self._tracing._get_review_queue_by_name(experiment, SHARED_QUEUE).queue_id
        except MlflowException as error:
            if error_code(error) != "RESOURCE_DOES_NOT_EXIST":
                raise
        schemas = [s.schema_id for s in self._tracing._list_label_schemas(experiment)]
        return self._tracing._create_review_queue(
            experiment, name=SHARED_QUEUE, queue_type="custom", users=[], schema_ids=schemas
        ).queue_id


def _trace_info(experiment: str, trace_id: str, agent: str, item: dict[str, Any]) -> TraceInfo:
    body = item["body"]
    said = body.get("text") or body.get("reason") or ""
    request = "\n".join(filter(None, [item["title"], said, _diff_words(body.get("diff"))]))
    answer = body.get("answer_text") or "; ".join(
        f"{g['gate']}: {g['verdict']}" for g in body.get("gates") or []
    )
    choices = ", ".join(body.get("choices") or {})
    tags = {
        REVIEW_ITEM_TAG: str(item["id"]),
        AGENT_TAG: agent,
        "evoplane.review_kind": item["kind"],
        "evoplane.review_key": item["key"][:250],
        "evoplane.labels": choices,
    }
    for key, value in (item.get("subject") or {}).items():
        if value:
            tags[f"evoplane.{key}"] = str(value)[:250]
    return TraceInfo(
        trace_id=trace_id,
        trace_location=TraceLocation.from_experiment_id(experiment),
        request_time=int(_millis(item["created_at"])),
        state=TraceState.OK,
        request_preview=request[:_PREVIEW],
        response_preview=(answer or f"labels: {choices}")[:_PREVIEW],
        execution_duration=0,
        tags=tags,
        trace_metadata={},
    )


def _diff_words(diff: dict[str, Any] | None) -> str:
    if not diff:
        return ""
    return (
        f"changes {', '.join(diff.get('changed') or [])} ({diff.get('from')} -> {diff.get('to')})"
    )


def _millis(moment: Any) -> float:
    parsed = datetime.fromisoformat(moment) if isinstance(moment, str) else moment
    return parsed.timestamp() * 1000


def _record(case: dict[str, Any]) -> dict[str, Any]:
    """One case as a dataset record: what to replay, and what a good answer shows."""
    inputs = {
        "case": case["key"],
        "kind": case["kind"],
        "trajectory_id": case.get("trajectory_id"),
        "tenant": case.get("tenant"),
    }
    if case.get("safety"):
        inputs["messages"] = case["safety"].get("messages")
    return {
        "inputs": {k: v for k, v in inputs.items() if v is not None},
        "expectations": {
            "status": case["status"],
            "required_facts": case.get("required_facts") or [],
            "feedback": case.get("feedback") or [],
        },
        "tags": {"origin": case.get("origin") or ""},
        "source": {"source_type": "HUMAN", "source_data": {}},
    }
