"""The demo's world without a stack: its tools, its drifts, its warm-start data, its verdicts."""

from __future__ import annotations

import json

from evoplane.demo import warm_start, world
from evoplane.demo.drifts import ROUNDS, by_name
from evoplane.demo.report import facts
from evoplane.demo.reporting import EvolutionRow
from evoplane.demo.tools import ORDER_REF, Platform, Ticket
from evoplane.demo.world import FACTS, Intent

TICKET = Ticket("acme", "ann", "4711")


def test_release_2_refuses_the_old_cancel_argument_and_names_the_new_one() -> None:
    old = json.dumps({"order_id": ORDER_REF})
    assert Platform(1).run("cancel_order", old, TICKET).ok
    refused = Platform(2).run("cancel_order", old, TICKET)
    assert refused.result == {
        "error": "missing required parameter 'id'",
        "error_type": "validation_error",
        "parameter": "id",
    }
    assert Platform(2).run("cancel_order", json.dumps({"id": ORDER_REF}), TICKET).ok


def test_tools_validate_values_and_act_on_the_tickets_order() -> None:
    platform = Platform()
    bad = platform.run("refund", json.dumps({"order_id": "A-1"}), TICKET)
    assert bad.result["error_type"] == "validation_error" and bad.result["parameter"] == "order_id"
    assert platform.run("refund", "not json", TICKET).result["error_type"] == "json_decode_error"
    done = platform.run("refund", json.dumps({"order_id": ORDER_REF}), TICKET)
    assert done.ok and done.result["order"] == "4711" and done.side_effects
    assert not platform.run("lookup_order", json.dumps({"order_id": "12"}), TICKET).side_effects


def test_every_round_asks_what_its_shops_can_do() -> None:
    assert [r.name for r in ROUNDS] == [
        "memory",
        "tool_schema",
        "harness",
        "weights",
        "gate",
        "rollback",
        "review",
    ]
    for round_ in ROUNDS:
        labels = {kind.label for kind, _ in round_.mix}
        assert set(round_.scenario) <= labels, round_.name
        for kind, weight in round_.mix:
            assert weight > 0 and kind.tenants
            if kind.intent is not Intent.QUESTION:
                assert all(world.TOOL_OF[kind.intent] in world.tools_of(t) for t in kind.tenants)
    assert [r.name for r in by_name(count=2)] == ["memory", "tool_schema"]
    assert [r.name for r in by_name(["rollback", "memory"])] == ["memory", "rollback"]


def test_a_correction_distils_to_the_fact_line_the_model_says() -> None:
    from evolution.memory.distil import fact_text
    from evolution.memory.topic import topic

    for fact in FACTS.values():
        assert fact_text(fact.correction) == fact.line
        assert topic(fact.correction) == topic(fact.line)


def test_a_customers_story_reads_as_unsure_until_a_person_names_its_fact() -> None:
    """The review round's premise: no reading of the words alone finds the fact in what its
    customers tell (so the evolution queues it), and the reviewer's note does."""
    from evolution.corrections.classify import CorrectionKind, classify
    from evolution.memory.distil import fact_text

    told = [(fact, story) for fact in FACTS.values() for story in fact.told]
    assert told, "some fact's customers tell stories"
    for fact, story in told:
        assert classify(story) is CorrectionKind.OTHER, story
        assert world.told_fact(story) is fact
        assert classify(fact.line) is CorrectionKind.MISSING_FACT
        assert fact_text(fact.line) == fact.line
    assert world.told_fact(FACTS["holiday"].correction) is None


def test_warm_start_data_is_what_the_gateway_would_send() -> None:
    examples = warm_start._examples(400, seed=3)
    assert {e.skill for e in examples} == {
        "tool",
        "hard_tool",
        "question",
        "no_fact",
        "ack",
    }
    for example in examples:
        system = "\n".join(m["content"] for m in example.view["messages"] if m["role"] == "system")
        if example.skill == "question":
            assert example.completion in system  # the line it says is in its context
        if example.skill == "no_fact":
            assert example.completion == world.FALLBACK
        if example.skill == "tool":
            assert example.completion == example.right
    memory = [e for e in examples if "<evoplane-memory>" in json.dumps(e.view["messages"])]
    assert memory, "no demonstration had a retrieved memory block"
    assert warm_start.data_hash(warm_start.demonstrations(50, 1)) == warm_start.data_hash(
        warm_start.demonstrations(50, 1)
    )


def test_the_verdicts_read_the_rows() -> None:
    good = EvolutionRow(
        "memory",
        "d",
        "memory",
        "e1",
        action="memory",
        outcome="promoted",
        stable_before="v1",
        stable_after="v2",
        reward_before=0.5,
        reward_after=0.9,
    )
    stopped = EvolutionRow(
        "gate",
        "d",
        "canary",
        "e2",
        action="harness",
        forced=True,
        outcome="rolled_back",
        stable_before="v2",
        stable_after="v2",
        gates=[{"gate": "shadow", "verdict": "pass"}, {"gate": "canary", "verdict": "fail"}],
    )
    rolled = EvolutionRow(
        "rollback",
        "d",
        "rollback",
        "e3",
        action="rollback",
        outcome="rolled_back",
        stable_before="v3",
        stable_after="v2",
    )
    wrong = EvolutionRow("weights", "d", "weights", "e4", action="harness", outcome="promoted")
    shown = {fact.claim: fact.shown for fact in facts([good, stopped, rolled, wrong])}
    assert shown == {
        "memory: diagnosed as memory": True,
        "memory: promoted with a measured reward improvement": True,
        "gate: a bad candidate is stopped by a gate, stable unchanged": True,
        "rollback: diagnosed as rollback": True,
        "rollback: the regressed version is rolled back": True,
        "weights: diagnosed as weights": False,
        "weights: promoted with a measured reward improvement": False,
    }
