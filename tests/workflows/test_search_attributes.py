"""Our search attributes work on a real Temporal server: set by a workflow, found by a filter."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio import workflow
from temporalio.common import TypedSearchAttributes
from temporalio.worker import Worker

from workflows.search_attributes import ACTION, AGENT, OUTCOME, STAGE, TENANT, dev_server_flags

pytestmark = pytest.mark.temporal


@workflow.defn(sandboxed=False)
class TagsItself:
    """Test-only workflow: moves through stages the way an evolution will."""

    @workflow.run
    async def run(self, agent: str) -> str:
        workflow.upsert_search_attributes(
            [
                AGENT.value_set(agent),
                TENANT.value_set(["acme", "globex"]),
                ACTION.value_set("rollback"),
            ]
        )
        workflow.upsert_search_attributes(
            [STAGE.value_set("promoted"), OUTCOME.value_set("rolled_back")]
        )
        return agent


def test_dev_server_flags_cover_every_attribute() -> None:
    assert dev_server_flags()[1::2] == [
        "Agent=Keyword",
        "Tenant=KeywordList",
        "Action=Keyword",
        "Stage=Keyword",
        "Outcome=Keyword",
    ]


async def test_evolutions_are_findable_by_search_attributes(temporal_env) -> None:
    client = temporal_env.client
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue="search-attr-test", workflows=[TagsItself]):
        await client.execute_workflow(
            TagsItself.run, agent, id=f"evolution-{agent}", task_queue="search-attr-test"
        )
    query = f'Agent = "{agent}" AND Action = "rollback" AND Tenant = "globex"'
    for _ in range(50):  # visibility is eventually consistent
        found = [w async for w in client.list_workflows(query)]
        if found:
            break
        await asyncio.sleep(0.2)
    assert [w.id for w in found] == [f"evolution-{agent}"]
    attributes: TypedSearchAttributes = found[0].typed_search_attributes
    assert attributes.get(OUTCOME) == "rolled_back"
    assert [
        w async for w in client.list_workflows(f'Agent = "{agent}" AND Action = "memory"')
    ] == []
