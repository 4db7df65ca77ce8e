"""The CLI's control commands as a person reads them, and the control API client's errors."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import typer

from evoplane.cli import control_cmd
from evoplane.control.client import ControlAPIError, ControlClient


def answering(routes: dict[tuple[str, str], httpx.Response]) -> ControlClient:
    """A client whose transport answers `routes` ((method, path) -> response), 404 otherwise."""

    def handle(request: httpx.Request) -> httpx.Response:
        key = (request.method, request.url.path)
        return routes.get(key) or httpx.Response(404, json={"detail": f"no route {key}"})

    client = ControlClient("http://control.test", "evpadm_token")
    client.http = httpx.Client(
        base_url=client.base_url, headers=client.http.headers, transport=httpx.MockTransport(handle)
    )
    return client


def test_status_says_findings_are_about_the_agent_not_the_candidate(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    finding = {
        "case": "write_phishing_email",
        "checks": ["must_refuse"],
        "reason": "must_refuse: the answer does not refuse",
        "parent_reason": "must_refuse: the answer does not refuse",
    }
    gates = [
        {
            "gate": "replay",
            "verdict": "pass",
            "reason": "replay gate passed",
            "findings": [finding],
        },
        {"gate": "shadow", "verdict": "pass", "reason": "shadow gate passed", "findings": []},
    ]
    found: dict[str, Any] = {
        "live": {"stage": "canary", "action": "harness", "reason": "why", "gates": gates},
        "record": {},
        "ui": None,
    }
    route = ("GET", "/api/evolutions/evolution-support-bot-1")
    monkeypatch.setattr(
        control_cmd, "_control", lambda: answering({route: httpx.Response(200, json=found)})
    )
    control_cmd.status("evolution-support-bot-1")
    lines = capsys.readouterr().out.splitlines()
    shown = lines.index("  replay: pass (replay gate passed)")
    assert lines[shown + 1] == (
        "    findings about the agent (not caused by this candidate): "
        "write_phishing_email fails must_refuse on the parent too"
    )
    assert lines[shown + 2] == "  shadow: pass (shadow gate passed)"


def test_a_refusal_says_which_call_and_why() -> None:
    with answering({}) as client, pytest.raises(ControlAPIError) as raised:
        client.decide("evolution-x", "approve", actor="ana")
    assert str(raised.value) == (
        "POST /api/evolutions/evolution-x/approve: 404: "
        "no route ('POST', '/api/evolutions/evolution-x/approve')"
    )


def test_an_unreachable_api_says_how_to_start_it(unused_tcp_port: int) -> None:
    with ControlClient(f"http://127.0.0.1:{unused_tcp_port}", "t") as client:
        with pytest.raises(ControlAPIError, match="start it with `evoplane up`"):
            client.versions("support-bot")


def test_a_diff_reads_each_part_as_a_person_would(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fact = {"id": "1", "tenant": "acme", "kind": "fact", "key": "refunds", "content": "14 days."}
    diff = {
        "from": "support-bot@v2",
        "to": "support-bot@v3",
        "changed": ["model", "memory", "tools"],
        "parts": {
            "model": {"checkpoint": {"from": None, "to": "ckpt-7"}},
            "memory": {
                "added": [{**fact, "id": "2", "tenant": None, "content": "Greet [by] name."}],
                "removed": [{"id": "9", "content": None}],
                "changed": [{"from": fact, "to": {**fact, "id": "3", "content": "30 days."}}],
                "top_k": {"from": 3, "to": 5},
            },
            "tools": {
                "added": ["lookup"],
                "removed": [],
                "changed": [],
                "diff": "--- a/tools/lookup.json\n+++ b/tools/lookup.json\n+{}\n",
            },
        },
    }
    route = ("GET", "/api/agents/support-bot/versions/support-bot@v2/diff/v3")
    monkeypatch.setattr(
        control_cmd, "_control", lambda: answering({route: httpx.Response(200, json=diff)})
    )
    control_cmd.diff_versions("support-bot@v2", "v3")
    assert capsys.readouterr().out.splitlines() == [
        "support-bot@v2 -> support-bot@v3",
        "model",
        '  checkpoint: null -> "ckpt-7"',
        "memory",
        "  + [fact, all tenants] Greet [by] name.",
        "  - 9 (not in the registry)",
        "  ~ [fact, acme] 14 days.  ->  30 days.",
        "  top_k: 3 -> 5",
        "tools",
        "  added tools: lookup",
        "--- a/tools/lookup.json",
        "+++ b/tools/lookup.json",
        "+{}",
    ]


def test_a_skills_diff_names_each_skill(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    skill = {"name": "onboard procedure", "description": "onboard: new hire", "steps": ["a", "b"]}
    diff = {
        "from": "support-bot@v2",
        "to": "support-bot@v3",
        "changed": ["skills"],
        "parts": {
            "skills": {
                "added": [{**skill, "task_types": ["onboard"]}],
                "removed": [{**skill, "name": "old"}],
                "changed": [{"name": "x", "before": skill, "after": {**skill, "name": "x"}}],
                "top_k": {"from": 2, "to": 3},
            }
        },
    }
    route = ("GET", "/api/agents/support-bot/versions/support-bot@v2/diff/v3")
    monkeypatch.setattr(
        control_cmd, "_control", lambda: answering({route: httpx.Response(200, json=diff)})
    )
    control_cmd.diff_versions("support-bot@v2", "v3")
    assert capsys.readouterr().out.splitlines() == [
        "support-bot@v2 -> support-bot@v3",
        "skills",
        "  + onboard procedure [onboard]: 2 steps (onboard: new hire)",
        "  - old",
        "  ~ x [any task]: 2 steps (onboard: new hire)",
        "  top_k: 2 -> 3",
    ]


def test_a_version_named_without_its_agent_is_refused_before_any_call() -> None:
    with pytest.raises(typer.BadParameter, match="support-bot@v3"):
        control_cmd.show_version("v3", as_json=False)
