"""A parcel carrier's tracking assistant, in Polish: tracking, redelivery, pickup points.

Three shops that ship with the carrier run it. Their customers write Polish and press a
thumb; when an answer is not what they needed they write, in the conversation, what they
want of every answer, with their own parcel number. The team's agent is on the Responses
API and names its task types.
"""

from __future__ import annotations

import random
import re

from evoplane.scenarios.world import Fact, Instruction, Slot, Task, TaskKind, Tool, World
from evoplane.scenarios.worlds.common import object_schema, ok, question, string

__all__ = ["TENANTS", "parcels"]

TENANTS = ("sklep-a", "sklep-b", "sklep-c")
INSTRUCTIONS = (
    "Jesteś asystentem firmy kurierskiej. Sprawdzaj status przesyłek i zamawiaj ponowne "
    "doręczenie narzędziami, odpowiadaj na pytania klientów. Paczkomaty są czynne 24 godziny."
)


def parcels() -> World:
    return World(
        name="parcels",
        tenants=TENANTS,
        instructions=INSTRUCTIONS,
        tools=_tools(),
        slots={"parcel": Slot("parcel", {"as_is": lambda v: v}, "as_is")},
        facts={"lockers": _lockers()},
        wanted={"quote_parcel": _quote_parcel()},
        kinds={kind.name: kind for kind in _kinds()},
    )


def _tools() -> dict[str, Tool]:
    track = Tool(
        "track_parcel",
        "Look up where a parcel is.",
        object_schema(parcel=string("The parcel number.")),
        {"parcel": "parcel"},
        lambda tenant, args: ok("Przesyłka jest w drodze, doręczenie jutro."),
    )
    redeliver = Tool(
        "order_redelivery",
        "Order a new delivery attempt for a parcel.",
        object_schema(parcel=string("The parcel number.")),
        {"parcel": "parcel"},
        lambda tenant, args: ok("Ponowne doręczenie zostało zamówione na jutro."),
    )
    return {tool.name: tool for tool in (track, redeliver)}


def _lockers() -> Fact:
    return Fact(
        key="lockers",
        topic=re.compile(r"paczkomat", re.I),
        value=re.compile(r"(\d+)\s*godzin", re.I),
        values={tenant: "24" for tenant in TENANTS},
        guess="Paczkomaty są czynne 24 godziny na dobę.",
        answer="Paczkomaty są czynne {value} godziny na dobę.",
        statements=("Paczkomaty są czynne {value} godziny.",),
    )


def _quote_parcel() -> Instruction:
    """Customers keep their own records: every answer must quote their parcel number."""
    detector = re.compile(
        r"(?:numer|nr\b).{0,40}(?:przesyłk|paczk)|(?:przesyłk|paczk)\w*.{0,40}(?:numer|nr\b)",
        re.IGNORECASE,
    )

    def follow(answer: str, task: Task) -> str:
        parcel = task.slots.get("parcel")
        return f"{answer} Numer przesyłki: {parcel}." if parcel else answer

    def satisfied(answer: str, task: Task) -> bool:
        parcel = task.slots.get("parcel")
        return parcel is None or parcel in answer

    return Instruction(
        name="quote_parcel",
        detector=detector,
        follow=follow,
        satisfied=satisfied,
        requests=(
            "Proszę zawsze podawać w odpowiedzi numer mojej przesyłki {parcel}.",
            "Następnym razem proszę wpisać numer paczki {parcel}, potrzebuję go do reklamacji.",
            "Zawsze podawaj numer przesyłki ({parcel}), bo mam kilka paczek.",
            "Chcę, żeby odpowiedź zawierała numer mojej paczki {parcel}.",
            "Proszę powtórzyć numer przesyłki {parcel} w każdej odpowiedzi.",
        ),
    )


def _kinds() -> list[TaskKind]:
    return [
        TaskKind("track", _parcel_task("track_parcel", _TRACK)),
        TaskKind("redeliver", _parcel_task("order_redelivery", _REDELIVER)),
        TaskKind("lockers", question("lockers", ("Czy paczkomaty są czynne w nocy?",))),
    ]


def _parcel_task(tool: str, templates: tuple[str, ...]):
    def make(rng: random.Random, tenant: str) -> Task:
        parcel = f"PL{rng.randrange(100000, 999999)}"
        kind = "track" if tool == "track_parcel" else "redeliver"
        text = rng.choice(templates).format(p=parcel)
        return Task(kind, text, {"parcel": parcel}, tool=tool)

    return make


_TRACK = (
    "Gdzie jest moja przesyłka {p}?",
    "Proszę sprawdzić status paczki {p}.",
    "Kiedy dotrze paczka {p}?",
)
_REDELIVER = ("Nie było mnie w domu, proszę o ponowne doręczenie {p}.",)
