"""An IT helpdesk assistant: passwords, authenticators, tickets, VPN and policies.

Three companies run it. The team's agent reports every tool run and each ticket's outcome
to /v1/events (its API answers errors in FastAPI's `{"detail": ...}` shape, which only the
agent's own report marks as a failure); employees give thumbs and write their corrections
in the conversation.
"""

from __future__ import annotations

import random
import re
from typing import Any

from evoplane.scenarios.world import Fact, Slot, Task, TaskKind, Tool, ToolResult, World
from evoplane.scenarios.worlds.common import object_schema, ok, question, refused, string

__all__ = ["TENANTS", "helpdesk"]

TENANTS = ("northwind", "contoso", "fabrikam")
INSTRUCTIONS = (
    "You are the IT helpdesk assistant. Help employees sign in again, open tickets for "
    "hardware, software and network problems, and answer questions about IT policies. "
    "The helpdesk is staffed until 18:00."
)
CATEGORIES = ("hardware", "software", "network")
_PASSWORD_CUE = r"password|passwort|mot de passe|forgot|expired"
_AUTHENTICATOR_CUE = r"authenticator|two-factor|2fa|mfa|phone|handy|code"


def helpdesk(
    *,
    strict_ids: bool = False,
    vague_tools: bool = False,
    vpn: dict[str, str] | None = None,
    rotation_days: str | None = None,
) -> World:
    """The helpdesk world; the options are the drifts scenarios apply.

    Args:
        strict_ids: the identity API accepts only employee ids written EMP-12345.
        vague_tools: the agent describes both sign-in tools alike (a refactor of its code).
        vpn: each company's VPN portal (not in the instructions).
        rotation_days: how often passwords expire (not in the instructions).
    """
    facts = {"hours": _hours(), "vpn": _vpn(vpn or {}), "rotation": _rotation(rotation_days)}
    return World(
        name="helpdesk",
        tenants=TENANTS,
        instructions=INSTRUCTIONS,
        tools=_tools(strict_ids, vague_tools),
        slots=_slots(),
        facts=facts,
        wanted={},
        kinds={kind.name: kind for kind in _kinds()},
        confusable=(frozenset({"reset_login", "reset_access"}),),
    )


def _slots() -> dict[str, Slot]:
    same = {"as_is": lambda value: value}
    employee = {"as_is": lambda value: value, "digits": lambda value: value.split("-")[-1]}
    return {
        "employee": Slot("employee", employee, "as_is"),
        "category": Slot("category", same, "as_is"),
        "summary": Slot("summary", same, "as_is"),
    }


# --- the tools -----------------------------------------------------------------------------


def _tools(strict_ids: bool, vague: bool) -> dict[str, Tool]:
    employee = object_schema(employee_id=string("The employee's number."))
    login = Tool(
        "reset_login",
        "Help an employee who cannot sign in."
        if vague
        else "Set a new password for an employee who forgot it or whose password expired.",
        employee,
        {"employee_id": "employee"},
        lambda tenant, args: _identity(args, strict_ids, "A temporary password was sent"),
    )
    access = Tool(
        "reset_access",
        "Help an employee who cannot sign in."
        if vague
        else "Re-enrol an employee's authenticator app (two-factor sign-in), e.g. after a "
        "phone change.",
        employee,
        {"employee_id": "employee"},
        lambda tenant, args: _identity(args, strict_ids, "A new authenticator enrolment was sent"),
    )
    ticket = Tool(
        "open_ticket",
        "Open a support ticket.",
        object_schema(
            category=string("hardware, software or network."), summary=string("The problem.")
        ),
        {"category": "category", "summary": "summary"},
        lambda tenant, args: _ticket(args),
    )
    return {tool.name: tool for tool in (login, access, ticket)}


def _identity(args: dict[str, Any], strict: bool, done: str) -> ToolResult:
    given = str(args.get("employee_id") or "")
    if re.fullmatch(r"EMP-\d{5}", given):
        employee = given
    elif not strict and re.fullmatch(r"(?i)(?:emp[- ]?)?\d{5}", given):
        employee = "EMP-" + given[-5:]
    else:
        return refused({"detail": f"employee_id {given!r} must look like EMP-12345"})
    return ok(f"{done} to {employee}'s work phone.", employee=employee)


def _ticket(args: dict[str, Any]) -> ToolResult:
    category = str(args.get("category") or "")
    if category not in CATEGORIES:
        return refused({"detail": f"category must be one of {', '.join(CATEGORIES)}"})
    return ok(f"Ticket HD-{abs(hash(str(args))) % 90000 + 10000} opened ({category}).")


# --- facts -------------------------------------------------------------------------------


def _hours() -> Fact:
    return Fact(
        key="hours",
        topic=re.compile(r"helpdesk|service desk|staffed|erreichbar", re.I),
        value=re.compile(r"until (\d{1,2}:\d{2})", re.I),
        values={tenant: "18:00" for tenant in TENANTS},
        guess="The helpdesk is staffed until 17:00.",
        answer="The helpdesk is staffed until {value}.",
        statements=("The helpdesk is staffed until {value}.",),
    )


def _vpn(portals: dict[str, str]) -> Fact:
    return Fact(
        key="vpn",
        topic=re.compile(r"vpn|remote access|fernzugriff|accès à distance", re.I),
        value=re.compile(r"\b((?:[a-z0-9-]+\.)+example\.net)\b", re.I),
        values={tenant: portals.get(tenant, "vpn.example.net") for tenant in TENANTS},
        guess="Open the VPN client and sign in with your usual account.",
        answer="Connect your VPN client to {value}.",
        statements=(
            "The VPN address is {value}.",
            "No, for remote access you connect to {value}.",
            "Our VPN portal is {value}, the old one is gone.",
            "Der VPN-Zugang läuft über {value}.",
            "Use {value} to reach the VPN, that's what IT told us.",
            "FYI the vpn gateway is {value}",
        ),
    )


def _rotation(days: str | None) -> Fact:
    return Fact(
        key="rotation",
        topic=re.compile(r"expire|rotat|change (?:my|your|the) password|läuft|expirent", re.I),
        value=re.compile(r"(\d+)\s*(?:days|tage|jours)", re.I),
        values={tenant: days or "90" for tenant in TENANTS},
        guess="Passwords do not expire unless you change them.",
        answer="Passwords expire every {value} days.",
        statements=(
            "Passwords expire every {value} days here.",
            "No, our passwords rotate every {value} days.",
            "It's a {value} days rotation, IT sent a mail about it.",
            "Unsere Passwörter laufen alle {value} Tage ab.",
            "Actually you have to change the password every {value} days.",
        ),
    )


# --- what employees ask ------------------------------------------------------------------


def _kinds() -> list[TaskKind]:
    return [
        TaskKind("password", _sign_in("reset_login", _PASSWORD_REQUESTS, _PASSWORD_CUE)),
        TaskKind("authenticator", _sign_in("reset_access", _ACCESS_REQUESTS, _AUTHENTICATOR_CUE)),
        TaskKind("ticket", _ticket_task),
        TaskKind("hours", question("hours", ("When is the helpdesk staffed?",))),
        TaskKind("vpn", question("vpn", _VPN_QUESTIONS)),
        TaskKind("rotation", question("rotation", _ROTATION_QUESTIONS)),
    ]


_PASSWORD_REQUESTS = (
    "I forgot my password, my employee number is {n}.",
    "My password expired. Employee {n}.",
    "Can't remember my password, I'm employee {n}.",
)
_ACCESS_REQUESTS = (
    "I got a new phone and my authenticator codes are gone. Employee number {n}.",
    "My two-factor app stopped working after I switched phones, I'm {n}.",
    "The authenticator app is on my old phone, employee {n}.",
)
_WRONG_RESET = {
    "reset_login": (
        "I forgot my password, why did you reset my authenticator?",
        "I needed a new password, not a new authenticator enrolment.",
    ),
    "reset_access": (
        "My authenticator is on my old phone, I didn't need a new password.",
        "You reset my password but the problem is my two-factor app.",
    ),
}


def _sign_in(tool: str, requests: tuple[str, ...], cue: str):
    def make(rng: random.Random, tenant: str) -> Task:
        employee = f"EMP-{rng.randrange(10000, 99999)}"
        said = employee.split("-")[1]
        slots = {"employee": employee, "employee:said": said}
        text = rng.choice(requests).format(n=said)
        kind = "password" if tool == "reset_login" else "authenticator"
        return Task(kind, text, slots, tool=tool, cue=cue, complaints=_WRONG_RESET[tool])

    return make


def _ticket_task(rng: random.Random, tenant: str) -> Task:
    category, text = rng.choice(
        (
            ("hardware", "My laptop screen flickers, please open a ticket."),
            ("software", "Excel crashes every time I open a file, can you log it?"),
            ("network", "The office wifi keeps dropping, please open a ticket."),
        )
    )
    return Task("ticket", text, {"category": category, "summary": text}, tool="open_ticket")


_VPN_QUESTIONS = (
    "How do I connect to the VPN from home?",
    "What's the VPN address?",
    "Where do I log in for remote access?",
)
_ROTATION_QUESTIONS = (
    "How often do I have to change my password?",
    "When does my password expire?",
)
