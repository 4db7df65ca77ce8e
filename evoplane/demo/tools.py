"""The shops' commerce platform: real tools with argument validation.

Each tool has a JSON schema (what the agent offers the model) and an implementation that
validates the arguments against it before acting, answering a refusal the way APIs do:
`{"error": ..., "error_type": "validation_error", "parameter": ...}`. Order numbers come
from the ticket, so a tool takes `"latest"` (the ticket's order) or a number.

The platform changes under the agent: release 2 renames `cancel_order`'s `order_id` to
`id` (beside a new `customer_id`), and every shop's agent offers the new schema at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import jsonschema

__all__ = [
    "ORDER_REF",
    "Platform",
    "Ticket",
    "ToolRun",
    "simulate",
]

ORDER_REF = "latest"
_ORDER = {
    "type": "string",
    "description": 'An order number, or "latest" for the order this ticket is about.',
    "pattern": r"^(latest|\d+)$",
}


def _schema(**properties: dict[str, Any]) -> dict[str, Any]:
    """An object schema; a property marked `"optional": True` is left out of `required`."""
    required = [name for name, spec in properties.items() if not spec.get("optional")]
    cleaned = {
        name: {k: v for k, v in spec.items() if k != "optional"}
        for name, spec in properties.items()
    }
    return {
        "type": "object",
        "properties": cleaned,
        "required": required,
        "additionalProperties": False,
    }


def _function(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def _tool_specs(release: int) -> dict[str, dict[str, Any]]:
    cancel = (
        _schema(order_id=_ORDER)
        if release < 2
        else _schema(
            id=_ORDER,
            customer_id={
                "type": "string",
                "description": "The customer, if not the ticket's.",
                "optional": True,
            },
        )
    )
    return {
        "lookup_order": _function(
            "lookup_order", "Look up an order's status and delivery date.", _schema(order_id=_ORDER)
        ),
        "refund": _function("refund", "Refund an order.", _schema(order_id=_ORDER)),
        "cancel_order": _function("cancel_order", "Cancel an order that has not shipped.", cancel),
        "escalate": _function(
            "escalate", "Hand the ticket to a human agent.", _schema(order_id=_ORDER)
        ),
    }


@dataclass(frozen=True)
class Ticket:
    """What the agent's own code knows about a conversation: shop, customer, order."""

    tenant: str
    customer: str
    order: str


@dataclass(frozen=True)
class ToolRun:
    """One execution: what ran, with which arguments, and what came back."""

    name: str
    arguments: dict[str, Any] | None
    result: dict[str, Any]
    side_effects: bool

    @property
    def ok(self) -> bool:
        return "error" not in self.result

    @property
    def content(self) -> str:
        """The result as the tool message the agent sends back to the model."""
        return json.dumps(self.result)


@dataclass
class Platform:
    """The tools as the platform serves them now; `release` moves on with the drifts."""

    release: int = 1
    _validators: dict[tuple[int, str], Any] = field(default_factory=dict, repr=False)

    def specs(self, names: list[str]) -> list[dict[str, Any]]:
        """The OpenAI `tools` an agent offering `names` sends."""
        specs = _tool_specs(self.release)
        return [specs[name] for name in names]

    def run(self, name: str, arguments: str, ticket: Ticket) -> ToolRun:
        """Validate and execute one call; a refusal names the parameter it is about."""
        specs = _tool_specs(self.release)
        if name not in specs:
            return ToolRun(name, None, _refusal(f"unknown tool '{name}'", "unknown_tool"), False)
        try:
            parsed = json.loads(arguments or "{}")
        except ValueError:
            return ToolRun(
                name, None, _refusal("arguments are not JSON", "json_decode_error"), False
            )
        if not isinstance(parsed, dict):
            return ToolRun(name, None, _refusal("arguments must be an object", "type_error"), False)
        problem = self._problem(name, parsed, specs[name]["function"]["parameters"])
        if problem is not None:
            return ToolRun(name, parsed, problem, False)
        return ToolRun(name, parsed, _act(name, ticket), name != "lookup_order")

    def _problem(self, name: str, arguments: dict, schema: dict) -> dict[str, Any] | None:
        for required in schema.get("required", []):
            if required not in arguments:
                return _refusal(f"missing required parameter '{required}'", parameter=required)
        for given in arguments:
            if given not in schema["properties"]:
                return _refusal(f"unexpected parameter '{given}'", parameter=given)
        key = (self.release, name)
        if key not in self._validators:
            self._validators[key] = jsonschema.Draft202012Validator(schema)
        error = next(iter(self._validators[key].iter_errors(arguments)), None)
        if error is not None:
            where = error.path[0] if error.path else None
            return _refusal(f"{where}: {error.message}", parameter=where)
        return None


def _refusal(
    message: str, error_type: str = "validation_error", parameter: str | None = None
) -> dict[str, Any]:
    refusal: dict[str, Any] = {"error": message, "error_type": error_type}
    if parameter is not None:
        refusal["parameter"] = parameter
    return refusal


def _act(name: str, ticket: Ticket) -> dict[str, Any]:
    order = ticket.order
    if name == "lookup_order":
        return {"order": order, "status": "shipped", "arrives": "in 2 days"}
    if name == "refund":
        return {"order": order, "refunded": True, "days": 5}
    if name == "cancel_order":
        return {"order": order, "cancelled": True}
    return {"order": order, "escalated": True, "queue": "human agents"}


def simulate(name: str, arguments: str, *, release: int = 2) -> str:
    """A tool simulator for replay (`evolution.replay`): the platform's answer to a call,
    with a placeholder ticket (replays never act on real orders)."""
    run = Platform(release).run(name, arguments, Ticket("replay", "replay", "0"))
    return run.content
