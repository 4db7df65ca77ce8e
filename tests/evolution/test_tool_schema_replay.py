"""A tool-schema candidate, proven by the real replay gate on held-out failures and successes.

Customers give bare order numbers; the order tool only takes "ORD-" ids, but the agent's own
schema for it says just "a string", and the model behind the gateway (a scripted upstream
that writes arguments the way the schema describes them) passes the number as it is. The
operator learns from one window recorded through the gateway; the gate then replays *other*
trajectories (held out) on the parent and the candidate, through the gateway's overlays.
The candidate also renames the ambiguous `id` (next to `customer_id`) to `order_id`, so the
argument map must carry the model's calls back to the agent's names.

Tenants register tool simulators (a sandbox of the tool over HTTP for acme, one the worker
offers by name for globex): a replayed call that leaves the recorded path is answered by
them, and only such calls are.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from activities.evidence import read_window, recorded_cases
from activities.operators import tool_schema_operator
from activities.replay_gate import ReplayGate
from atdp import ToolOverride, utcnow
from evolution.analysis import measure_window
from evolution.decision import Action, DecisionRecord
from evolution.gates import GateConfig, GateResult, Verdict
from evolution.operators import Candidate
from evolution.replay import ToolOutput, action_of, replay_trajectory
from evolution.window import FailureKind, WindowSpec
from registry import AgentVersion, register_version, set_agent_settings, transaction
from tests.evolution.gateway_agent import AGENT, Agent, LiveGateway, live_gateway
from tests.evolution.replay_helpers import held_out_gate, improvement
from tests.evolution.test_operator_replay import SUITE
from tests.evolution.tool_sandbox import ToolSandbox
from tests.support.upstream import Behaviour

LOOKUP = {  # the agent's own declaration: ambiguous and silent about the format
    "type": "function",
    "function": {
        "name": "lookup_order",
        "description": "Look up an order.",
        "parameters": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "Which order."},
                "customer_id": {"type": "string", "description": "Who asks."},
            },
            "required": ["id"],
        },
    },
}
REAL_SCHEMA = {  # what the tool itself accepts
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": "^ORD-[0-9]{6}$"},
        "customer_id": {"type": "string", "pattern": "^CUS-[0-9]{4}$"},
    },
    "required": ["id", "customer_id"],
    "additionalProperties": False,
}
_VALIDATOR = jsonschema.Draft202012Validator(REAL_SCHEMA)


def lookup_order(arguments: dict[str, Any]) -> dict[str, Any]:
    """The real tool: refuses arguments its schema rejects, naming the parameter."""
    error = next(iter(_VALIDATOR.iter_errors(arguments)), None)
    if error is None:
        return {"status": "shipped", "order": arguments["id"]}
    parameter = error.path[0] if error.path else "id"
    return {
        "error": f"{parameter}: invalid value, expected like ORD-000000",
        "error_type": "validation_error",
        "parameter": parameter,
    }


def record(live: LiveGateway, label: str, orders: list[str]) -> None:
    """One conversation per order number, through the gateway, with its outcome reported."""
    for i, order in enumerate(orders):
        tenant = ("acme", "globex")[i % 2]
        agent = Agent(live, tenant, f"{label}-{i}", [LOOKUP], lambda _, a: lookup_order(a))
        agent.say(f'call lookup_order with {{"id": "{order}", "customer_id": "CUS-{i:04d}"}}')
        tool_result = agent.messages[-2]["content"]
        agent.report(success="validation_error" not in tool_result)
    live.server.flush()


def window(since, until=None) -> WindowSpec:
    return WindowSpec(agent=AGENT, since=since, until=until or utcnow())


def build_candidate(
    live: LiveGateway, training: WindowSpec
) -> tuple[AgentVersion, AgentVersion, Candidate]:
    """Analyse the training window, aim at the format cluster, and register the candidate."""
    with transaction(live.engine) as session:
        stats = measure_window(read_window(session, training))
        (cluster,) = [c for c in stats.failures if c.kind is FailureKind.TOOL_ARGUMENT]
        decision = DecisionRecord(
            action=Action.TOOL_SCHEMA,
            reason="test",
            target=cluster,
            scores=[],
            signals={},
            window=training,
            stable_version=stats.stable_version,
        )
        parent = live.version()
        built = tool_schema_operator().run(session, parent, decision, training)
        candidate = register_version(
            session, AGENT, built.spec, parent_id=parent.id, author="t", reason=built.summary
        )
    return parent, candidate, built


class NamedSandbox:
    """globex's simulator, which the worker offers under a name: the real tool, in process."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, tool: str, arguments: str) -> ToolOutput:
        parsed = json.loads(arguments)
        self.calls.append(parsed)
        returned = lookup_order(parsed)
        return ToolOutput(output=json.dumps(returned), error=returned.get("error_type"))


async def run_gate(
    live: LiveGateway,
    parent: AgentVersion,
    candidate: AgentVersion,
    held_out: WindowSpec,
    named: NamedSandbox,
) -> GateResult:
    simulators = {"orders-sandbox": named}
    return await held_out_gate(
        live.engine, parent.id, candidate.id, Action.TOOL_SCHEMA, held_out, simulators
    )


async def test_a_tool_schema_candidate_fixes_held_out_format_failures_on_replay(tmp_path) -> None:
    named = NamedSandbox()
    with live_gateway(tmp_path, Behaviour(follows_schema=True)) as live:
        start = utcnow()
        record(live, "train-ok", [f"ORD-{100000 + 37 * i}" for i in range(6)])
        record(live, "train-bad", [f"{200000 + 53 * i}" for i in range(4)])
        split = utcnow()
        record(live, "held-bad", [f"{300000 + 71 * i}" for i in range(8)])
        record(live, "held-ok", [f"ORD-{400000 + 89 * i}" for i in range(8)])
        held_out = window(split)
        parent, candidate, built = build_candidate(live, window(start, split))
        override: ToolOverride = candidate.spec.tools.tools["lookup_order"]

        with transaction(live.engine) as session:
            set_agent_settings(session, AGENT, SUITE)
        unsimulated = await run_gate(live, parent, candidate, held_out, named)
        with ToolSandbox({"lookup_order": lookup_order}) as sandbox:
            simulators = [
                {"tenant": "acme", "tools": ["lookup_order"], "url": sandbox.url},
                {"tenant": "globex", "name": "orders-sandbox"},
            ]
            with transaction(live.engine) as session:
                set_agent_settings(session, AGENT, {**SUITE, "tool_simulators": simulators})
            simulated = await run_gate(live, parent, candidate, held_out, named)
        replays = await replay_held_out_failures(live, parent, candidate, held_out)

    # Learned from the training window only: its 6 successful and 4 failing calls.
    assert (built.evidence["successful_calls"], built.evidence["failing_calls"]) == (6, 4)
    # The edit: a learned format, stated with examples, on a clearer name mapped back.
    assert override.argument_map == {"order_id": "id"}
    prop = override.parameters["properties"]["order_id"]
    assert prop["pattern"] == "^ORD-\\d{6}$" and prop["examples"][0].startswith("ORD-")
    for label, result in (("stop at divergence", unsimulated), ("simulated", simulated)):
        failures, successes = improvement(label, result)
        assert failures.candidate_mean > failures.baseline_mean  # held-out failures improve
        assert len(result.fixed) == failures.n_baseline == 8
        assert successes.n_baseline == 8 and result.broken == []
        assert successes.candidate_mean >= successes.baseline_mean - GateConfig().tolerance
        assert result.verdict is Verdict.PASS, result.reason
    # Simulators were called only for the candidate's calls that left the recorded path
    # (the held-out failures), each tenant's by its own registration, in the agent's names;
    # the tool's real schema accepts every one of them.
    sandbox_calls = [(call["tenant"], call["arguments"]) for call in sandbox.calls]
    assert len(sandbox_calls) == 4 and {tenant for tenant, _ in sandbox_calls} == {"acme"}
    assert len(named.calls) == 4
    replayed_calls = [arguments for _, arguments in sandbox_calls] + named.calls
    assert all(_VALIDATOR.is_valid(arguments) for arguments in replayed_calls)
    assert {arguments["id"] for arguments in replayed_calls} == {
        f"ORD-{300000 + 71 * i}" for i in range(8)
    }
    # Replayed directly: the parent's calls break the real schema, the candidate's do not.
    assert not any(_VALIDATOR.is_valid(arguments) for arguments in replays["parent"])
    assert all(_VALIDATOR.is_valid(arguments) for arguments in replays["candidate"])
    # The model saw and answered `order_id`; the agent got `id` back.
    assert replays["model_saw"] == {"order_id", "customer_id"}


async def replay_held_out_failures(
    live: LiveGateway, parent: AgentVersion, candidate: AgentVersion, held_out: WindowSpec
) -> dict[str, Any]:
    """The held-out failures' first steps on both versions, with what the model was offered."""
    with transaction(live.engine) as session:
        failures = [c for c in recorded_cases(session, held_out) if not c.recorded_success]
    gate = ReplayGate(live.engine, timeout=10)
    found: dict[str, Any] = {"parent": [], "candidate": []}
    try:
        for label, version in (("parent", parent), ("candidate", candidate)):
            live.upstream.reset()
            for case in failures:
                replayed = await replay_trajectory(
                    case.events, gate.serve(version, case.tenant), mode="approximate"
                )
                call = action_of(replayed.steps[0].response).tool_calls[0]
                found[label].append(json.loads(call.arguments))
        offered = live.upstream.requests[-1]["tools"][0]["function"]["parameters"]
        found["model_saw"] = set(offered["properties"])
    finally:
        await gate.aclose()
    return found


async def test_a_candidate_learned_from_refusals_alone_fixes_held_out_failures(tmp_path) -> None:
    """Every training call was refused, each refusal saying what the tool wants: the rule is
    learned from those words, and the real replay gate proves it on held-out traffic."""
    with live_gateway(tmp_path, Behaviour(follows_schema=True)) as live:
        start = utcnow()
        record(live, "train-bad", [f"{200000 + 53 * i}" for i in range(6)])
        split = utcnow()
        record(live, "held-bad", [f"{300000 + 71 * i}" for i in range(8)])
        record(live, "held-ok", [f"ORD-{400000 + 89 * i}" for i in range(8)])
        parent, candidate, built = build_candidate(live, window(start, split))
        with transaction(live.engine) as session:
            set_agent_settings(session, AGENT, SUITE)
        held_out = window(split)
        result = await held_out_gate(
            live.engine, parent.id, candidate.id, Action.TOOL_SCHEMA, held_out
        )

    assert (built.evidence["successful_calls"], built.evidence["failing_calls"]) == (0, 6)
    assert built.evidence["rule_source"] == "refusals"
    assert built.evidence["learned_from"] == "6 error messages"
    prop = candidate.spec.tools.tools["lookup_order"].parameters["properties"]["order_id"]
    assert prop["pattern"] == "^ORD-\\d{6}$" and prop["examples"] == ["ORD-000000"]
    failures, successes = improvement("learned from refusals", result)
    assert len(result.fixed) == failures.n_baseline == 8 and result.broken == []
    assert successes.candidate_mean >= successes.baseline_mean - GateConfig().tolerance
    assert result.verdict is Verdict.PASS, result.reason
