"""Pieces the scenario worlds share: dates written several ways, schemas, API refusals."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from datetime import date
from typing import Any

from evoplane.scenarios.world import Slot, Task, ToolResult

__all__ = ["date_slot", "object_schema", "ok", "question", "refused", "string", "words"]

_MONTHS = (
    "January February March April May June July August September October November December"
).split()


def date_slot(name: str, habit: str) -> Slot:
    """A date slot: canonical ISO, also written 03/14/2026, 14.03.2026 or March 14, 2026."""

    def us(value: str) -> str:
        day = date.fromisoformat(value)
        return f"{day.month:02d}/{day.day:02d}/{day.year}"

    def dotted(value: str) -> str:
        day = date.fromisoformat(value)
        return f"{day.day:02d}.{day.month:02d}.{day.year}"

    renderings = {"iso": lambda v: v, "us": us, "dot": dotted, "words": words}
    return Slot(name, renderings, habit)


def words(value: str) -> str:
    day = date.fromisoformat(value)
    return f"{_MONTHS[day.month - 1]} {day.day}, {day.year}"


def date_forms(value: str) -> list[str]:
    return date_slot("date", "iso").forms(value)


def mentions_date(text: str, value: str) -> bool:
    lowered = text.lower()
    return any(form.lower() in lowered for form in date_forms(value))


def string(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def object_schema(**properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties)}


def ok(summary: str, **data: Any) -> ToolResult:
    return ToolResult(True, {"status": "ok", "summary": summary, **data})


def refused(body: Any) -> ToolResult:
    return ToolResult(False, body)


def question(fact: str, questions: Sequence[str]) -> Callable[[random.Random, str], Task]:
    """A task kind: asking about `fact` in one of these wordings."""

    def make(rng: random.Random, tenant: str) -> Task:
        return Task(fact, rng.choice(list(questions)), fact=fact)

    return make
