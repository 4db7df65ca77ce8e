"""Workflow ids people can read in the Temporal UI."""

from __future__ import annotations

from datetime import datetime

__all__ = ["evolution_workflow_id", "holdback_workflow_id", "rollback_workflow_id"]


def evolution_workflow_id(agent: str, at: datetime) -> str:
    return f"evolution-{agent}-{at:%Y%m%dT%H%M%S%fZ}"


def rollback_workflow_id(agent: str, at: datetime) -> str:
    return f"rollback-{agent}-{at:%Y%m%dT%H%M%S%fZ}"


def holdback_workflow_id(agent: str, at: datetime) -> str:
    return f"holdback-{agent}-{at:%Y%m%dT%H%M%S%fZ}"
