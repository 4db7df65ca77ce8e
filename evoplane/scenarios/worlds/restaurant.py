"""A restaurant group's reservation assistant, in Japanese: tables, cancellations, hours.

Three restaurants run it. Their guests write Japanese, never rate an answer and never use
a widget: when an answer leaves out what they needed, they ask for it in their next
message, in their own words. The team's agent is plain chat completions and reports
nothing.
"""

from __future__ import annotations

import random
import re
from typing import Any

from evoplane.scenarios.world import Fact, Instruction, Slot, Task, TaskKind, Tool, World
from evoplane.scenarios.worlds.common import object_schema, ok, question, refused, string

__all__ = ["TENANTS", "restaurant"]

TENANTS = ("sakura", "kaede", "momiji")
INSTRUCTIONS = (
    "あなたはレストランの予約アシスタントです。ツールで席の予約と取り消しを行い、"
    "お客様の質問に答えてください。ランチは11:30から14:00までです。"
)


def restaurant() -> World:
    return World(
        name="restaurant",
        tenants=TENANTS,
        instructions=INSTRUCTIONS,
        tools=_tools(),
        slots=_slots(),
        facts={"lunch": _lunch()},
        wanted={"confirm_booking": _confirm_booking()},
        kinds={kind.name: kind for kind in _kinds()},
    )


def _slots() -> dict[str, Slot]:
    same = {"as_is": lambda value: value}
    return {name: Slot(name, same, "as_is") for name in ("date", "time", "party", "booking")}


def _tools() -> dict[str, Tool]:
    reserve = Tool(
        "reserve_table",
        "Reserve a table: the date (M月D日), the time (HH:MM) and the number of guests.",
        object_schema(
            date=string("The day, e.g. 3月14日."),
            time=string("The time, e.g. 19:00."),
            party=string("How many guests."),
        ),
        {"date": "date", "time": "time", "party": "party"},
        lambda tenant, args: _reserve(args),
    )
    cancel = Tool(
        "cancel_reservation",
        "Cancel a reservation by its number.",
        object_schema(booking=string("The reservation number, e.g. R-1234.")),
        {"booking": "booking"},
        lambda tenant, args: ok("ご予約を取り消しました。またのご来店をお待ちしております。"),
    )
    return {tool.name: tool for tool in (reserve, cancel)}


def _reserve(args: dict[str, Any]) -> Any:
    if not args.get("date") or not args.get("time"):
        return refused({"error": "date and time are required"})
    # The API confirms the booking; what it booked is in its data, not in its summary.
    return ok("ご予約を承りました。ご来店をお待ちしております。", **args)


def _lunch() -> Fact:
    return Fact(
        key="lunch",
        topic=re.compile(r"ランチ|昼"),
        value=re.compile(r"(\d{1,2}:\d{2})から"),
        values={tenant: "11:30" for tenant in TENANTS},
        guess="ランチは12:00からです。",
        answer="ランチは{value}から14:00までです。",
        statements=("ランチは{value}からです。",),
    )


_DETAILS = r"日時|日付|時間|何日|何時|いつ|予約内容|内容"
_ASK = r"確認|教え|言って|復唱|繰り返|知りたい|伝え|書いて|ですか|ました|か[？?]"


def _confirm_booking() -> Instruction:
    """Guests want the answer to say back what was booked: the day and the time."""
    detector = re.compile(rf"(?:{_DETAILS}).{{0,30}}(?:{_ASK})|(?:{_ASK}).{{0,30}}(?:{_DETAILS})")

    def follow(answer: str, task: Task) -> str:
        if task.tool != "reserve_table":
            return answer
        slots = task.slots
        said = f"{slots['date']} {slots['time']}、{slots['party']}名様"
        return f"{answer} ご予約内容：{said}です。"

    def satisfied(answer: str, task: Task) -> bool:
        if task.tool != "reserve_table":
            return True
        return task.slots["date"] in answer and task.slots["time"] in answer

    return Instruction(
        name="confirm_booking",
        detector=detector,
        follow=follow,
        satisfied=satisfied,
        requests=(
            "予約の日時をもう一度確認してもらえますか？",
            "何日の何時で予約されましたか？",
            "予約した日付と時間を教えてください。",
            "予約内容を確認させてください。日時はいつですか？",
            "ちゃんと予約の日時を言ってください。",
            "念のため、予約の日付と時間を繰り返してください。",
        ),
    )


def _kinds() -> list[TaskKind]:
    return [
        TaskKind("reserve", _reserve_task),
        TaskKind("cancel", _cancel_task),
        TaskKind("lunch", question("lunch", _LUNCH_QUESTIONS)),
    ]


def _reserve_task(rng: random.Random, tenant: str) -> Task:
    day = f"{rng.randrange(1, 13)}月{rng.randrange(1, 29)}日"
    time = rng.choice(("18:00", "18:30", "19:00", "19:30", "20:00", "12:00", "12:30"))
    party = str(rng.randrange(2, 9))
    template = rng.choice(
        (
            "{day}の{time}に{n}名で予約をお願いします。",
            "{n}人で{day} {time}から席を取りたいです。",
            "{day}、{time}に{n}名で予約できますか？",
            "予約したいです。{day}の{time}、{n}人です。",
        )
    )
    text = template.format(day=day, time=time, n=party)
    return Task("reserve", text, {"date": day, "time": time, "party": party}, tool="reserve_table")


def _cancel_task(rng: random.Random, tenant: str) -> Task:
    booking = f"R-{rng.randrange(1000, 9999)}"
    text = rng.choice(("予約{r}を取り消してください。", "{r}の予約をキャンセルしたいです。"))
    return Task("cancel", text.format(r=booking), {"booking": booking}, tool="cancel_reservation")


_LUNCH_QUESTIONS = ("ランチは何時からですか？", "お昼は何時から営業していますか？")
