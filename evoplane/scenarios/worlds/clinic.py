"""A clinic's front-desk assistant: appointments, cancellations and patients' questions.

Three practices run it. The team's agent streams its completions, names task types and
reports nothing else (its booking API answers errors in FastAPI's 422 shape). Patients use
the widget: a thumb, and a correction box for what the answer should have said.
"""

from __future__ import annotations

import random
import re
from typing import Any

from evoplane.scenarios.world import Fact, Instruction, Slot, Task, TaskKind, Tool, World
from evoplane.scenarios.worlds.common import (
    date_slot,
    object_schema,
    ok,
    question,
    refused,
    string,
    words,
)

__all__ = ["GERMAN", "TENANTS", "clinic"]

TENANTS = ("riverside", "oakwood", "lakeside")
DEPARTMENTS = ("cardiology", "dermatology", "radiology")
INSTRUCTIONS = (
    "You are the front-desk assistant of a medical practice. Find and book appointments, "
    "cancel them, and answer patients' practical questions. Appointments can be cancelled "
    "free of charge up to 24 hours before."
)
GERMAN = "Auf Deutsch:"


def clinic(*, renamed_patient: bool = False) -> World:
    """The clinic world; the option is the drift a scenario applies.

    Args:
        renamed_patient: the booking API renamed `patient` to `patient_number`; the agent
            still declares `patient`.
    """
    return World(
        name="clinic",
        tenants=TENANTS,
        instructions=INSTRUCTIONS,
        tools=_tools(renamed_patient),
        slots=_slots(),
        facts={"fasting": _fasting(), "cancel": _cancel()},
        wanted={w.name: w for w in (_bring(), _german(), _english())},
        kinds={kind.name: kind for kind in _kinds()},
    )


def _slots() -> dict[str, Slot]:
    same = {"as_is": lambda value: value}
    return {
        "day": date_slot("day", "words"),
        "department": Slot("department", same, "as_is"),
        "patient": Slot("patient", same, "as_is"),
        "appointment": Slot("appointment", same, "as_is"),
    }


# --- the tools -----------------------------------------------------------------------------


def _tools(renamed: bool) -> dict[str, Tool]:
    book = Tool(
        "book_appointment",
        "Book an appointment for a patient in a department on a day.",
        object_schema(
            patient=string("The patient's number."),
            department=string("cardiology, dermatology or radiology."),
            day=string("The day of the appointment."),
        ),
        {"patient": "patient", "department": "department", "day": "day"},
        lambda tenant, args: _book(args, renamed),
    )
    cancel = Tool(
        "cancel_appointment",
        "Cancel an appointment.",
        object_schema(appointment=string("The appointment reference.")),
        {"appointment": "appointment"},
        lambda tenant, args: ok(f"Appointment {args.get('appointment')} is cancelled."),
    )
    return {tool.name: tool for tool in (book, cancel)}


def _book(args: dict[str, Any], renamed: bool) -> Any:
    wanted = "patient_number" if renamed else "patient"
    errors = []
    if not args.get(wanted):
        errors.append({"type": "missing", "loc": ["body", wanted], "msg": "Field required"})
    for extra in sorted(set(args) - {wanted, "department", "day"}):
        errors.append(
            {
                "type": "extra_forbidden",
                "loc": ["body", extra],
                "msg": "Extra inputs are not permitted",
            }
        )
    if args.get("department") not in DEPARTMENTS:
        errors.append(
            {
                "type": "enum",
                "loc": ["body", "department"],
                "msg": "Input should be one of " + ", ".join(repr(d) for d in DEPARTMENTS),
            }
        )
    if errors:
        return refused({"detail": errors})
    return ok(f"Booked {args['department']} for patient {args[wanted]} on {args.get('day')}.")


# --- facts and what patients want -------------------------------------------------------


def _fasting() -> Fact:
    return Fact(
        key="fasting",
        topic=re.compile(r"\bfast|\beat|food|nüchtern|à jeun|ayunas|empty stomach", re.I),
        value=re.compile(r"(\d+)\s*(?:hours?|h\b|stunden|heures|horas)", re.I),
        values={tenant: "8" for tenant in TENANTS},
        guess="No special preparation is needed for a blood test.",
        answer="Please do not eat for {value} hours before a blood test.",
        statements=(
            "You have to fast for {value} hours before a blood test.",
            "The lab told me no food for {value} hours before blood tests.",
            "Actually it's {value} hours of fasting before any blood draw.",
            "Nein, man muss {value} Stunden nüchtern sein.",
            "Non, il faut être à jeun {value} heures avant une prise de sang.",
            "Nothing to eat for {value} hours before the blood test, the nurse said.",
        ),
    )


def _cancel() -> Fact:
    return Fact(
        key="cancel",
        topic=re.compile(r"cancel", re.I),
        value=re.compile(r"(\d+)\s*(?:hours?|h\b)", re.I),
        values={tenant: "24" for tenant in TENANTS},
        guess="You can cancel at any time.",
        answer="Appointments can be cancelled free of charge up to {value} hours before.",
        statements=("Appointments can be cancelled free of charge up to {value} hours before.",),
    )


def _bring() -> Instruction:
    def follow(answer: str, task: Task) -> str:
        if task.tool != "book_appointment":
            return answer
        return f"{answer} Please bring your insurance card and a photo ID."

    def satisfied(answer: str, task: Task) -> bool:
        return task.tool != "book_appointment" or "insurance card" in answer.lower()

    return Instruction(
        name="bring",
        detector=re.compile(r"bring|mitbring|apporter|llevar|what (?:do|should) i take", re.I),
        follow=follow,
        satisfied=satisfied,
        requests=(
            "Please always tell me what I need to bring.",
            "What should I bring? You never say.",
            "Can you mention which documents to bring along?",
            "Bitte sagen Sie mir, was ich mitbringen muss.",
            "Dites-moi ce que je dois apporter, s'il vous plaît.",
            "It would help to know what to take with me to the appointment.",
        ),
    )


def _german() -> Instruction:
    return Instruction(
        name="german",
        detector=re.compile(r"german|deutsch", re.I),
        follow=lambda answer, task: f"{GERMAN} {answer}",
        satisfied=lambda answer, task: answer.startswith(GERMAN),
        requests=("Bitte auf Deutsch antworten.", "Please answer in German."),
    )


def _english() -> Instruction:
    """What English-speaking patients expect without saying so: answers they can read."""
    return Instruction(
        name="english",
        detector=re.compile(r"(?!)"),
        follow=lambda answer, task: answer,
        satisfied=lambda answer, task: not answer.startswith(GERMAN),
        requests=("I can't read this, please answer in English.", "English please."),
    )


# --- what patients ask -------------------------------------------------------------------


def _kinds() -> list[TaskKind]:
    return [
        TaskKind("book", _book_task),
        TaskKind("cancel_visit", _cancel_task),
        TaskKind("fasting", question("fasting", _FASTING_QUESTIONS)),
        TaskKind("cancel", question("cancel", _CANCEL_QUESTIONS)),
    ]


def _book_task(rng: random.Random, tenant: str) -> Task:
    department = rng.choice(DEPARTMENTS)
    day = f"2027-01-{rng.randrange(4, 29):02d}"
    patient = str(rng.randrange(10000, 99999))
    template = rng.choice(
        (
            "I'd like a {d} appointment on {day}, my patient number is {p}.",
            "Please book me into {d} for {day}. Patient number {p}.",
            "Can I see someone in {d} on {day}? I'm patient {p}.",
        )
    )
    text = template.format(d=department, day=words(day), p=patient)
    slots = {"department": department, "day": day, "patient": patient}
    return Task("book", text, slots, tool="book_appointment")


def _cancel_task(rng: random.Random, tenant: str) -> Task:
    reference = f"A-{rng.randrange(1000, 9999)}"
    text = rng.choice(("Please cancel appointment {r}.", "I can't make it, cancel {r}.")).format(
        r=reference
    )
    return Task("cancel_visit", text, {"appointment": reference}, tool="cancel_appointment")


_FASTING_QUESTIONS = (
    "Do I need to fast before my blood test?",
    "Can I eat before the blood test?",
    "How long before a blood draw should I stop eating?",
    "Muss ich für die Blutabnahme nüchtern sein?",
)
_CANCEL_QUESTIONS = ("Until when can I cancel for free?", "Is there a fee if I cancel?")
