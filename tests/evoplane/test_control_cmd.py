"""The CLI's control commands as a person reads them, and the control API client's errors."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

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
