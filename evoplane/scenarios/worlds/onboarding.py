"""A people-operations desk: managers onboard new hires, step by step, through an agent.

Two companies run it. Onboarding is a procedure of four tools, one a turn, as managers walk
the agent through it ("ok, next"). The agent's model knows the steps but one: unless
something in its context says so, it schedules the welcome meeting before the new hire can
get into the building, and managers tell it, in their own words, every time. The team's
agent names each task type and reports how each onboarding ended; managers give thumbs.
"""

from __future__ import annotations

import random
import re

from evoplane.scenarios.world import Fact, Procedure, Slot, Task, TaskKind, Tool, World
from evoplane.scenarios.worlds.common import object_schema, ok, question, string

__all__ = ["TENANTS", "onboarding"]

TENANTS = ("brightline", "oakridge")
INSTRUCTIONS = (
    "You are the people-operations assistant. Onboard new hires for managers, order "
    "equipment, and answer questions about the office. The office opens at 07:30."
)
STEPS = ("create_account", "order_laptop", "grant_building_access", "schedule_welcome")
_ACCESS_CUE = re.compile(r"building|badge|door|gebäude|bâtiment|zugang", re.I)


def onboarding(*, forgets_access: bool = True) -> World:
    """The onboarding world.

    Args:
        forgets_access: the model leaves building access out of onboarding (the drift).
    """
    hidden = "grant_building_access" if forgets_access else ""
    procedure = Procedure(STEPS, hidden, _ACCESS_CUE, _GUIDANCE, _GO_ON)
    return World(
        name="onboarding",
        tenants=TENANTS,
        instructions=INSTRUCTIONS,
        tools={tool.name: tool for tool in _tools()},
        slots={"employee": Slot("employee", {"as_is": lambda value: value}, "as_is")},
        facts={"opening": _opening()},
        wanted={},
        kinds={kind.name: kind for kind in _kinds(procedure)},
    )


def _tools() -> list[Tool]:
    employee = object_schema(employee_id=string("The new hire's employee number."))
    done = {
        "create_account": "The account for {e} is created.",
        "order_laptop": "A laptop for {e} is ordered.",
        "grant_building_access": "{e}'s badge now opens the building.",
        "schedule_welcome": "The welcome meeting for {e} is scheduled.",
    }
    described = {
        "create_account": "Create a new hire's accounts.",
        "order_laptop": "Order a laptop for an employee.",
        "grant_building_access": "Let an employee's badge open the building.",
        "schedule_welcome": "Schedule a new hire's welcome meeting.",
    }

    def backend(name: str):
        return lambda tenant, args: ok(done[name].format(e=args.get("employee_id") or "them"))

    return [
        Tool(name, described[name], employee, {"employee_id": "employee"}, backend(name))
        for name in STEPS
    ]


def _opening() -> Fact:
    return Fact(
        key="opening",
        topic=re.compile(r"office|open", re.I),
        value=re.compile(r"opens at (\d{1,2}:\d{2})", re.I),
        values={tenant: "07:30" for tenant in TENANTS},
        guess="The office opens at 09:00.",
        answer="The office opens at {value}.",
        statements=("The office opens at {value}.",),
    )


def _kinds(procedure: Procedure) -> list[TaskKind]:
    def onboard(rng: random.Random, tenant: str) -> Task:
        employee = f"NH-{rng.randrange(10000, 99999)}"
        text = rng.choice(_REQUESTS).format(n=employee, name=rng.choice(_NAMES))
        return Task("onboard", text, {"employee": employee}, procedure=procedure)

    def laptop(rng: random.Random, tenant: str) -> Task:
        employee = f"NH-{rng.randrange(10000, 99999)}"
        text = rng.choice(_LAPTOPS).format(n=employee)
        return Task("laptop", text, {"employee": employee}, tool="order_laptop")

    return [
        TaskKind("onboard", onboard),
        TaskKind("laptop", laptop),
        TaskKind("opening", question("opening", ("When does the office open?",))),
    ]


_NAMES = ("Ana", "Tomasz", "Priya", "Lea", "Kwame")
_REQUESTS = (
    "{name} starts on Monday as a new hire, employee {n}. Please onboard them.",
    "New hire {n} ({name}) joins next week, can you onboard them step by step?",
    "Please onboard our new colleague {name}, employee number {n}, starting Monday.",
)
_LAPTOPS = (
    "Please order a laptop for {n}.",
    "Employee {n} needs a new laptop, can you order one?",
)
_GUIDANCE = (
    "Wait, before the welcome meeting they need building access, or they can't get in.",
    "You skipped the badge: grant building access first.",
    "No, the door badge comes before the welcome session.",
    "Erst den Gebäudezugang freischalten, dann das Willkommensgespräch.",
    "Il faut d'abord activer son badge pour le bâtiment.",
)
_GO_ON = (
    "ok, next",
    "Great, go on.",
    "Thanks, next step please.",
    "Weiter bitte.",
    "Parfait, la suite.",
)
