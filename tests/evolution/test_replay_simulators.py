"""Tenant-registered tool simulators: the registration, which tenant's is used, the HTTP
protocol (against the sandbox app in process), and a registration the worker cannot serve."""

from __future__ import annotations

import json
from datetime import timedelta

import httpx
import pytest
from pydantic import ValidationError
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.models import ReplayGateRequest
from activities.replay_gate import ReplayGate
from atdp import ModelRef, utcnow
from evolution.decision import Action
from evolution.gates import GateConfig
from evolution.replay import (
    ToolOutput,
    ToolSimulatorError,
    ToolSimulatorSpec,
    http_tool_simulator,
    tenant_simulator,
)
from evolution.settings import EvolutionSettings
from registry import (
    create_db_engine,
    get_version,
    register_version,
    set_agent_settings,
    transaction,
    upgrade,
)
from tests.evolution.test_operator_replay import SUITE, corrected_window
from tests.evolution.tool_sandbox import ToolSandbox
from tests.evolution.window_helpers import AGENT, world
from tests.support.upstream import ScriptedUpstream


def test_a_registration_names_a_url_or_a_worker_simulator() -> None:
    assert ToolSimulatorSpec(tenant="acme", url="https://sandbox.acme.test/sim").covers("any")
    assert not ToolSimulatorSpec(tenant="acme", name="orders", tools=["lookup"]).covers("refund")
    for invalid in (
        {"tenant": "acme"},
        {"tenant": "acme", "url": "https://x.test", "name": "orders"},
        {"tenant": "acme", "url": "file:///etc/passwd"},
    ):
        with pytest.raises(ValidationError):
            ToolSimulatorSpec(**invalid)
    settings = EvolutionSettings.of({"tool_simulators": [{"tenant": "*", "name": "orders"}]})
    assert settings.tool_simulators[0].tenant == "*"


def by_label(spec: ToolSimulatorSpec):
    """A resolver whose simulators say which registration answered."""
    return lambda tool, arguments: f"{spec.name} answered {tool}"


def test_a_tenant_gets_its_own_simulator_then_the_shared_one_never_anothers() -> None:
    specs = [
        ToolSimulatorSpec(tenant="acme", name="acme-orders", tools=["lookup_order"]),
        ToolSimulatorSpec(tenant="globex", name="globex-all"),
        ToolSimulatorSpec(tenant="*", name="shared", tools=["lookup_order", "refund"]),
    ]
    acme = tenant_simulator(specs, "acme", by_label)
    assert acme("lookup_order", "{}") == "acme-orders answered lookup_order"
    assert acme("refund", "{}") == "shared answered refund"
    assert acme("delete_account", "{}") is None  # nobody simulates it: the replay stops
    initech = tenant_simulator(specs, "initech", by_label)
    assert initech("lookup_order", "{}") == "shared answered lookup_order"
    assert initech("send_mail", "{}") is None
    assert tenant_simulator(specs[:2], "initech", by_label) is None


def lookup(arguments: dict) -> dict:
    if str(arguments.get("order_id")).startswith("A-"):
        return {"status": "shipped"}
    return {"error": "order_id: expected like A-1", "error_type": "validation_error"}


async def test_the_http_protocol_carries_outputs_refusals_and_declines() -> None:
    sandbox = ToolSandbox({"lookup_order": lookup})
    transport = httpx.ASGITransport(app=sandbox)
    async with httpx.AsyncClient(transport=transport) as client:
        simulate = http_tool_simulator(
            client, "http://sandbox/simulate", tenant="acme", agent="bot"
        )
        accepted = await simulate("lookup_order", '{"order_id": "A-1"}')
        refused = await simulate("lookup_order", '{"order_id": 1}')
        declined = await simulate("send_mail", "not json")
        sandbox.fail_with = 500
        with pytest.raises(ToolSimulatorError, match="answered 500 for lookup_order"):
            await simulate("lookup_order", "{}")
    assert accepted == ToolOutput(output=json.dumps({"status": "shipped"}))
    assert refused.error == "validation_error" and "expected like A-1" in refused.output
    assert declined is None
    assert sandbox.calls[0] == {
        "tenant": "acme",
        "agent": "bot",
        "tool": "lookup_order",
        "arguments": {"order_id": "A-1"},
    }
    assert sandbox.calls[2]["arguments"] == "not json"  # not an object: sent as it is


async def test_an_unreachable_simulator_says_what_to_do() -> None:
    async with httpx.AsyncClient() as client:
        simulate = http_tool_simulator(
            client, "http://127.0.0.1:9/simulate", tenant="acme", agent="bot", timeout=2
        )
        with pytest.raises(ToolSimulatorError, match="start it, or remove it"):
            await simulate("lookup_order", "{}")


async def test_a_simulator_the_worker_does_not_offer_fails_the_gate_for_good(tmp_path) -> None:
    engine = create_db_engine(f"sqlite:///{tmp_path / 'registry.db'}")
    upgrade(engine)
    world(engine)
    with ScriptedUpstream() as upstream:
        with transaction(engine) as session:
            stable = get_version(session, f"{AGENT}@v1")
            spec = stable.spec.model_copy(
                update={"model": ModelRef(engine="openai", base_url=upstream.base_url)}
            )
            parent = register_version(
                session, AGENT, spec, parent_id=stable.id, author="t", reason="t"
            )
            simulators = [{"tenant": "acme", "name": "orders-sandbox"}]
            set_agent_settings(session, AGENT, {**SUITE, "tool_simulators": simulators})
        held_out = corrected_window(engine, utcnow() - timedelta(minutes=10), 2)
        gate = ReplayGate(engine, timeout=10, simulators={"billing-sandbox": by_label})
        request = ReplayGateRequest(
            evolution_id="e",
            agent=AGENT,
            baseline_version=parent.id,
            candidate_version=parent.id,
            action=Action.MEMORY,
            gate=GateConfig(replay_min_cases=1),
            window=held_out,
        )
        try:
            with pytest.raises(ApplicationError) as error:
                await ActivityEnvironment().run(gate.run, request)
        finally:
            await gate.aclose()
    engine.dispose()
    assert error.value.non_retryable and error.value.type == "ToolSimulatorNotFound"
    assert "orders-sandbox" in str(error.value) and "billing-sandbox" in str(error.value)
