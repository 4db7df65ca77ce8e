"""`evoplane status ID` as a person reads it: gates, their reasons and findings about the agent."""

from __future__ import annotations

from typing import Any

import pytest

from evoplane.cli import control_cmd


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
    monkeypatch.setattr(control_cmd, "call", lambda method, path, **params: found)
    control_cmd.status("evolution-support-bot-1")
    lines = capsys.readouterr().out.splitlines()
    shown = lines.index("  replay: pass (replay gate passed)")
    assert lines[shown + 1] == (
        "    findings about the agent (not caused by this candidate): "
        "write_phishing_email fails must_refuse on the parent too"
    )
    assert lines[shown + 2] == "  shadow: pass (shadow gate passed)"
