"""A travel agency's booking assistant: flights, cabins, bookings, baggage and check-in.

Three agencies run it. Their users write in the conversation when an answer is wrong and
score answers from 0 to 1; the team's agent names task types and reports nothing else.
"""

from __future__ import annotations

import random
import re
from datetime import date, timedelta
from typing import Any

from evoplane.scenarios.world import Fact, Instruction, Slot, Task, TaskKind, Tool, World
from evoplane.scenarios.worlds.common import (
    date_forms,
    date_slot,
    mentions_date,
    object_schema,
    ok,
    question,
    refused,
    string,
    words,
)

__all__ = ["TENANTS", "travel"]

TENANTS = ("skyways", "railjet", "bluewave")
CABINS = ("economy", "premium_economy", "business")
_SAID_CABIN = {
    "economy": ("economy", "coach", "the cheapest seats", "economy class"),
    "premium_economy": ("premium economy", "premium", "premium eco"),
    "business": ("business", "business class", "biz"),
}
_CITIES = ("Oslo", "Lisbon", "Vienna", "Dublin", "Athens", "Warsaw", "Madrid", "Prague")
INSTRUCTIONS = (
    "You are the booking assistant of a travel agency. Search flights, change cabins and "
    "look up bookings with the tools, and answer travellers' questions. "
    "Online check-in closes 2 hours before departure. "
    "The checked baggage allowance is 23 kg."
)


def travel(
    *,
    strict_dates: bool = False,
    strict_cabins: bool = False,
    baggage: dict[str, str] | None = None,
) -> World:
    """The travel world; the options are the drifts scenarios apply.

    Args:
        strict_dates: the flight API accepts only YYYY-MM-DD dates (a platform upgrade).
        strict_cabins: the cabin API accepts only its own cabin codes.
        baggage: each agency's real allowance in kg (the instructions say 23).
    """
    allowances = {tenant: "23" for tenant in TENANTS} | (baggage or {})
    return World(
        name="travel",
        tenants=TENANTS,
        instructions=INSTRUCTIONS,
        tools=_tools(strict_dates, strict_cabins),
        slots=_slots(),
        facts={"baggage": _baggage(allowances), "checkin": _checkin()},
        wanted={"confirm_date": _confirm_date()},
        kinds={kind.name: kind for kind in _kinds()},
    )


def _slots() -> dict[str, Slot]:
    same = {"as_is": lambda value: value}
    return {
        "date": date_slot("date", "us"),
        "origin": Slot("origin", same, "as_is"),
        "destination": Slot("destination", same, "as_is"),
        "booking": Slot("booking", same, "as_is"),
        "cabin": Slot("cabin", same, "as_is"),
    }


# --- the tools ---------------------------------------------------------------------------


def _tools(strict_dates: bool, strict_cabins: bool) -> dict[str, Tool]:
    search = Tool(
        "search_flights",
        "Search flights between two cities on a day.",
        object_schema(
            origin=string("City of departure."),
            destination=string("City of arrival."),
            date=string("Day of departure."),
        ),
        {"origin": "origin", "destination": "destination", "date": "date"},
        lambda tenant, args: _search(args, strict_dates),
    )
    cabin = Tool(
        "change_cabin",
        "Move a booking to another cabin class.",
        object_schema(booking=string("Booking reference."), cabin=string("Cabin to move to.")),
        {"booking": "booking", "cabin": "cabin"},
        lambda tenant, args: _change_cabin(args, strict_cabins),
    )
    lookup = Tool(
        "get_booking",
        "Look up a booking's status.",
        object_schema(booking=string("Booking reference.")),
        {"booking": "booking"},
        lambda tenant, args: ok(f"Booking {args.get('booking')} is confirmed and ticketed."),
    )
    return {tool.name: tool for tool in (search, cabin, lookup)}


def _search(args: dict[str, Any], strict: bool) -> Any:
    given = str(args.get("date") or "")
    day = _parse_date(given, strict)
    if day is None:
        return refused({"error": f"invalid date {given!r}: dates must be written as YYYY-MM-DD"})
    if not args.get("origin") or not args.get("destination"):
        return refused({"error": "origin and destination are required"})
    summary = (
        f"Found 3 flights from {args['origin']} to {args['destination']} on {words(day)}; "
        "the first leaves at 07:40."
    )
    return ok(summary, date=day)


def _parse_date(text: str, strict: bool) -> str | None:
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        return text
    if strict:
        return None
    for day in _dates_near():
        if text.strip().lower() in {form.lower() for form in date_forms(day)}:
            return day
    return None


def _dates_near() -> list[str]:
    start = date(2026, 12, 1)
    return [(start + timedelta(days=n)).isoformat() for n in range(120)]


def _change_cabin(args: dict[str, Any], strict: bool) -> Any:
    given = str(args.get("cabin") or "")
    cabin = given if given in CABINS else None
    if cabin is None and not strict:
        cabin = next((c for c, said in _SAID_CABIN.items() if given.lower() in said), None)
    if cabin is None:
        message = f"cabin: {given!r} is not one of {list(CABINS)}"
        return refused({"error": "validation_error", "message": message})
    return ok(f"Booking {args.get('booking')} now flies {cabin.replace('_', ' ')}.")


# --- facts and what users want ---------------------------------------------------------


def _baggage(allowances: dict[str, str]) -> Fact:
    return Fact(
        key="baggage",
        topic=re.compile(r"baggage|luggage|suitcase|bags?\b|gepäck|koffer|bagage|valise", re.I),
        value=re.compile(r"(\d+)\s*(?:kg|kilo)", re.I),
        values=allowances,
        guess="You may check one bag of 20 kg.",
        answer="Your checked baggage allowance is {value} kg.",
        statements=(
            "Actually the checked baggage allowance is {value} kg now.",
            "No, you can check in {value} kg of luggage.",
            "The website says {value} kg per suitcase.",
            "That's outdated, the limit for checked bags went up to {value} kg.",
            "Falsch, das Freigepäck beträgt jetzt {value} kg.",
            "Non, la franchise bagage est de {value} kg maintenant.",
            "I was told at the counter that my suitcase may weigh {value} kg.",
        ),
    )


def _checkin() -> Fact:
    return Fact(
        key="checkin",
        topic=re.compile(r"check-?\s?in|einchecken|enregistrement", re.I),
        value=re.compile(r"(\d+)\s*(?:hours?|h\b|stunden|heures)", re.I),
        values={tenant: "2" for tenant in TENANTS},
        guess="Online check-in closes 1 hour before departure.",
        answer="Online check-in closes {value} hours before departure.",
        statements=("Online check-in closes {value} hours before departure.",),
    )


_CONFIRM_WORD = r"confirm|repeat|restate|\bback\b|double[- ]check|verify|bestätig|wiederhol|répét"
_DATE_WORD = r"date|\bday\b|datum|\bjour\b|fecha"


def _confirm_date() -> Instruction:
    detector = re.compile(
        rf"(?:{_CONFIRM_WORD})[^.\n]{{0,80}}(?:{_DATE_WORD})"
        rf"|(?:{_DATE_WORD})[^.\n]{{0,80}}(?:{_CONFIRM_WORD})",
        re.IGNORECASE,
    )

    def follow(answer: str, task: Task) -> str:
        day = task.slots.get("date")
        return f"{answer} To confirm: your travel date is {words(day)}." if day else answer

    def satisfied(answer: str, task: Task) -> bool:
        day = task.slots.get("date")
        return day is None or ("confirm" in answer.lower() and mentions_date(answer, day))

    return Instruction(
        name="confirm_date",
        detector=detector,
        follow=follow,
        satisfied=satisfied,
        requests=(
            "Please always confirm the travel date back to me.",
            "Can you repeat the date so I know you got it right?",
            "I need you to read the date back to me when you search.",
            "Next time say the date back to me, please.",
            "Bitte bestätigen Sie mir das Reisedatum.",
            "Pouvez-vous me répéter la date du voyage ?",
            "Always double-check the day with me before you go on.",
        ),
    )


# --- what users ask ----------------------------------------------------------------------


def _kinds() -> list[TaskKind]:
    return [
        TaskKind("search", _search_task),
        TaskKind("cabin", _cabin_task),
        TaskKind("booking", _booking_task),
        TaskKind("baggage", question("baggage", _BAGGAGE_QUESTIONS)),
        TaskKind("checkin", question("checkin", _CHECKIN_QUESTIONS)),
    ]


def _search_task(rng: random.Random, tenant: str) -> Task:
    origin, destination = rng.sample(_CITIES, 2)
    day = rng.choice(_dates_near())
    said = day if rng.random() < 0.3 else words(day)
    template = rng.choice(
        (
            "Find me a flight from {o} to {d} on {day}.",
            "I need to fly {o} to {d}, leaving {day}.",
            "Any flights {o} -> {d} for {day}?",
            "Please search flights from {o} to {d}, departing {day}.",
        )
    )
    text = template.format(o=origin, d=destination, day=said)
    slots = {"origin": origin, "destination": destination, "date": day, "date:said": said}
    return Task("search", text, slots, tool="search_flights")


def _cabin_task(rng: random.Random, tenant: str) -> Task:
    cabin = rng.choice(CABINS)
    said = rng.choice(_SAID_CABIN[cabin])
    booking = f"BK-{rng.randrange(10000, 99999)}"
    template = rng.choice(
        (
            "Please move booking {b} to {c}.",
            "Can you switch {b} to {c}?",
            "I'd like {c} instead on booking {b}.",
        )
    )
    slots = {"booking": booking, "cabin": cabin, "cabin:said": said}
    return Task("cabin", template.format(b=booking, c=said), slots, tool="change_cabin")


def _booking_task(rng: random.Random, tenant: str) -> Task:
    booking = f"BK-{rng.randrange(10000, 99999)}"
    text = rng.choice(("What's the status of booking {b}?", "Is {b} confirmed?")).format(b=booking)
    return Task("booking", text, {"booking": booking}, tool="get_booking")


_BAGGAGE_QUESTIONS = (
    "How much checked baggage can I take?",
    "What's the luggage allowance on my flight?",
    "How heavy can my suitcase be?",
    "Is there a weight limit for checked bags?",
    "Wie viel Gepäck darf ich mitnehmen?",
)
_CHECKIN_QUESTIONS = (
    "When does online check-in close?",
    "How late can I check in online?",
    "Until when can I do the check-in?",
)
