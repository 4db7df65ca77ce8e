"""MCP server registrations on both backends: who may use them, and refusals that say why."""

from __future__ import annotations

import pytest

from atdp import ModelRef, VersionSpec
from registry import (
    AlreadyExistsError,
    InvalidRecordError,
    NotFoundError,
    add_mcp_server,
    allow_mcp_tenant,
    create_agent,
    create_tenant,
    get_mcp_server,
    list_mcp_servers,
    remove_mcp_server,
    transaction,
)


@pytest.fixture
def seeded(engine):
    spec = VersionSpec(model=ModelRef(engine="openai", model="m"))
    with transaction(engine) as session:
        create_agent(session, "bot", spec, author="t")
        create_agent(session, "other", spec, author="t")
        create_tenant(session, "acme")
        create_tenant(session, "globex")
    return engine


def test_a_server_is_stored_with_its_tenants_and_found_by_agent(seeded) -> None:
    with transaction(seeded) as session:
        add_mcp_server(session, "bot", "orders", url="http://127.0.0.1:9/mcp", tenants=["acme"])
        add_mcp_server(
            session, "other", "files", command=["python", "-m", "srv"], tenants=["globex"]
        )
    with transaction(seeded) as session:
        allow_mcp_tenant(session, "orders", "globex")
        orders = get_mcp_server(session, "orders")
        assert orders.allows("acme") and orders.allows("globex")
        assert [s.name for s in list_mcp_servers(session, "other")] == ["files"]
        assert get_mcp_server(session, "files").command == ["python", "-m", "srv"]
        remove_mcp_server(session, "files")
        assert [s.name for s in list_mcp_servers(session)] == ["orders"]


def test_bad_registrations_are_refused(seeded) -> None:
    cases = [
        (dict(agent="bot", name="a", url="http://h/mcp", command=["x"]), InvalidRecordError),
        (dict(agent="bot", name="a"), InvalidRecordError),
        (dict(agent="bot", name="a", url="ftp://h/mcp"), InvalidRecordError),
        (dict(agent="bot", name="Bad Name", url="http://h/mcp"), InvalidRecordError),
        (dict(agent="nobody", name="a", url="http://h/mcp"), NotFoundError),
    ]
    for kwargs, error in cases:
        with pytest.raises(error), transaction(seeded) as session:
            add_mcp_server(session, tenants=["acme"], **kwargs)
    with pytest.raises(NotFoundError), transaction(seeded) as session:
        add_mcp_server(session, "bot", "a", url="http://h/mcp", tenants=["initech"])
    with transaction(seeded) as session:
        add_mcp_server(session, "bot", "a", url="http://h/mcp", tenants=["acme"])
    with pytest.raises(AlreadyExistsError), transaction(seeded) as session:
        add_mcp_server(session, "other", "a", url="http://h/mcp", tenants=["acme"])
