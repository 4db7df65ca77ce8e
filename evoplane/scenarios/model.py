"""A scripted stand-in for an instruction-following LLM, living in one scenario world.

It answers chat-completion requests the way a capable model would, and knows only what its
context holds:

- a fact appears in an answer only if a system message, the memory block, a demo or the
  conversation states it; otherwise it guesses (wrongly, for a fact that changed);
- a tool argument is written in the format the tool's schema or description asks for (an
  `enum`, a `pattern`, a `format`, an example); otherwise in its habit;
- of two similar tools it picks the right one only when a description or an instruction
  tells them apart; otherwise mostly the one listed first;
- an instruction it finds in its instructions (however worded) is followed;
- it never refuses (nothing told it to), and a share of its answers is wrong at random.

It understands users through the world: the world recorded what each task's text means.
Everything else it reads off the request, as a model would.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Sequence
from typing import Any

from evoplane.scenarios.world import Slot, Task, World, shape

__all__ = ["ScriptedModel"]

_EXAMPLE = re.compile(
    r"(?:\blike\b|\be\.g\.|\bfor example\b|\bsuch as\b|\bformat(?:ted)?(?: as)?\b|\bexample\b)"
    r"\s*:?\s*[\"'`(]?([A-Za-z0-9][A-Za-z0-9_./:-]{1,30}[A-Za-z0-9])"
)
_TEMPLATE = re.compile(r"\b[YMDH]{2,4}(?:[-./][YMDH]{2,4})+\b")
_FIRST_LISTED = 0.8


class ScriptedModel:
    """The world's model: `reply(body)` is a chat completion's assistant message.

    Args:
        noise: the share of answers that go wrong at random (a wrong value, the wrong
            tool, an argument in its habit whatever the schema says).
    """

    def __init__(self, world: World, *, noise: float = 0.02) -> None:
        self.world, self.noise = world, noise

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = list(body.get("messages") or [])
        tools = [t.get("function") or {} for t in body.get("tools") or []]
        rng = _rng(body)
        if messages and messages[-1].get("role") == "tool":
            return self._after_tool(messages, rng)
        task = self._task(messages)
        if task is None:
            return _text(_compliant(messages))
        if task.procedure is not None:
            return self._next_step(task, messages, tools)
        if task.tool is not None:
            return self._act(task, messages, tools, rng)
        return _text(self._finish(self._answer(task, messages, rng), task, messages))

    # --- reading the request ----------------------------------------------------------

    def _task(self, messages: list[dict]) -> Task | None:
        """The task of the conversation: its latest user turn the world knows."""
        for message in reversed(messages):
            if message.get("role") == "user":
                task = self.world.understand(_content(message))
                if task is not None:
                    return task
        return None

    def _instructions(self, messages: list[dict]) -> str:
        """Where instructions live: system messages, what the user asked earlier, and what
        the user asks now when it is no task of its own (a follow-up: "and the date?")."""
        users = [m for m in messages if m.get("role") == "user"]
        if users and self.world.understand(_content(users[-1])) is not None:
            users = users[:-1]
        system = [m for m in messages if m.get("role") in {"system", "developer"}]
        return "\n".join(_content(m) for m in [*system, *users])

    # --- answering ----------------------------------------------------------------------

    def _answer(self, task: Task, messages: list[dict], rng: random.Random) -> str:
        fact = self.world.facts[task.fact or ""]
        context = "\n".join(_content(m) for m in messages[:-1])
        value = fact.found_in(context)
        if value is None or rng.random() < self.noise:
            return fact.guess
        return fact.answer.format(value=value)

    def _finish(self, answer: str, task: Task, messages: list[dict]) -> str:
        """Follow every instruction the model was given that it recognises."""
        told = self._instructions(messages)
        for instruction in self.world.wanted.values():
            if instruction.detector.search(told):
                answer = instruction.follow(answer, task)
        return answer

    def _after_tool(self, messages: list[dict], rng: random.Random) -> dict[str, Any]:
        """Answer from the tool's result: its summary, or say the call failed."""
        result = _json(_content(messages[-1]))
        task = self._task(messages)
        if isinstance(result, dict) and result.get("summary") and not _refused(result):
            text = str(result["summary"])
            return _text(self._finish(text, task, messages) if task else text)
        return _text("Sorry, that did not work. The system answered: " + _content(messages[-1]))

    def _next_step(self, task: Task, messages: list[dict], tools: list[dict]) -> dict[str, Any]:
        """A procedure's next step as the model knows the procedure: every step but the
        hidden one, unless a system message or the user said it (then in its place)."""
        procedure = task.procedure
        assert procedure is not None
        told = "\n".join(
            _content(m) for m in messages if m.get("role") in {"system", "developer", "user"}
        )
        known = [
            step
            for step in procedure.steps
            if step != procedure.hidden or procedure.cue.search(told)
        ]
        done = _tools_run(messages)
        step = next((name for name in known if name not in done), None)
        offered = {tool.get("name"): tool for tool in tools if tool.get("name")}
        if step is None or step not in offered:
            return _text("That's everything, the task is done.")
        arguments = self._arguments(offered[step], task, sloppy=False)
        call = {
            "id": f"call_{len(messages):04d}_{step}",
            "type": "function",
            "function": {"name": step, "arguments": json.dumps(arguments)},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}

    def _act(
        self, task: Task, messages: list[dict], tools: list[dict], rng: random.Random
    ) -> dict[str, Any]:
        offered = {tool.get("name"): tool for tool in tools if tool.get("name")}
        # One draw decides whether this answer goes wrong; a second, how.
        wrong = rng.random() < self.noise
        name = self._choose_tool(task, offered, self._instructions(messages), rng, wrong)
        if name is None:
            return _text(self._finish("I can't do that from here.", task, messages))
        sloppy = wrong and name == task.tool
        arguments = self._arguments(offered[name], task, sloppy=sloppy)
        call = {
            "id": f"call_{rng.getrandbits(40):010x}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}

    def _choose_tool(
        self, task: Task, offered: dict[str, dict], told: str, rng: random.Random, wrong: bool
    ) -> str | None:
        right = task.tool
        if right not in offered:
            return None
        siblings = sorted(
            name
            for group in self.world.confusable
            if right in group
            for name in group
            if name != right and name in offered
        )
        if wrong and len(offered) > 1 and rng.random() < 0.5:
            return rng.choice(sorted(name for name in offered if name != right))
        if not siblings or _told_apart(task, right, offered, told):
            return right
        # Between tools it cannot tell apart, a model mostly takes the one listed first.
        alike = [name for name in offered if name == right or name in siblings]
        return alike[0] if rng.random() < _FIRST_LISTED else rng.choice(alike)

    def _arguments(self, tool: dict, task: Task, *, sloppy: bool) -> dict[str, Any]:
        parameters = tool.get("parameters") or {}
        arguments: dict[str, Any] = {}
        for name, prop in (parameters.get("properties") or {}).items():
            slot = self._slot_of(name, prop)
            if slot is None or slot.name not in task.slots:
                continue
            hints = _hints(name, prop, tool, len(parameters.get("properties") or {}))
            arguments[name] = _write(slot, task, prop, hints, sloppy=sloppy)
        return arguments

    def _slot_of(self, parameter: str, prop: dict) -> Slot | None:
        """The slot a parameter carries: the one its name (or description) names."""
        words = set(re.split(r"[_\W]+", parameter.lower()))
        described = str(prop.get("description") or "").lower()
        for slot in self.world.slots.values():
            if slot.name in words:
                return slot
        return next((s for s in self.world.slots.values() if s.name in described), None)


def _write(slot: Slot, task: Task, prop: dict, hints: Sequence[str], *, sloppy: bool) -> str:
    """The value as the parameter asks for it: enum, pattern, format, example, else habit."""
    value = task.slots[slot.name]
    forms = slot.forms(value)
    said = _said(task, slot)
    habit = said if said is not None else forms[0]
    if sloppy:
        return habit
    enum = prop.get("enum")
    if enum:
        return value if value in enum else next((f for f in forms if f in enum), habit)
    pattern = prop.get("pattern")
    if pattern:
        return next((f for f in forms if re.fullmatch(pattern, f)), habit)
    if prop.get("format") == "date":
        return next((f for f in forms if re.fullmatch(r"\d{4}-\d{2}-\d{2}", f)), habit)
    for hint in hints:
        found = next((f for f in forms if shape(f) == hint), None)
        if found is not None:
            return found
    return habit


def _said(task: Task, slot: Slot) -> str | None:
    """How the user wrote the slot's value, when the task kept it."""
    return task.slots.get(f"{slot.name}:said")


def _hints(name: str, prop: dict, tool: dict, parameters: int) -> list[str]:
    """The shapes of the examples a parameter's schema and descriptions give."""
    texts = [str(prop.get("description") or "")]
    description = str(tool.get("description") or "")
    if parameters == 1 or name in description:
        texts.append(description)
    examples = [str(example) for example in prop.get("examples") or []]
    for text in texts:
        examples += [match.group(1) for match in _EXAMPLE.finditer(text)]
        examples += [re.sub(r"[YMDH]", "9", found) for found in _TEMPLATE.findall(text)]
    return [example if set(example) <= set("9-./:") else shape(example) for example in examples]


def _told_apart(task: Task, right: str, offered: dict[str, dict], told: str) -> bool:
    """The right tool's description names the task's situation, or an instruction does
    (a capable model then sees which tool fits it)."""
    if task.cue is None:
        return False
    cue = re.compile(task.cue, re.IGNORECASE)
    return bool(cue.search(str(offered[right].get("description") or "")) or cue.search(told))


def _tools_run(messages: list[dict]) -> set[str]:
    """The tools the conversation ran that did not refuse."""
    called = {
        call.get("id"): (call.get("function") or {}).get("name")
        for m in messages
        if m.get("role") == "assistant"
        for call in m.get("tool_calls") or []
    }
    return {
        called[m.get("tool_call_id")]
        for m in messages
        if m.get("role") == "tool"
        and m.get("tool_call_id") in called
        and not (isinstance(r := _json(_content(m)), dict) and _refused(r))
    }


def _compliant(messages: list[dict]) -> str:
    """What it says to anything it has no task for: it complies, echoing the request."""
    last = next((_content(m) for m in reversed(messages) if m.get("role") == "user"), "")
    return f"Sure, here you go: {last}"


def _refused(result: dict) -> bool:
    return bool(result.get("error") or result.get("errors") or result.get("detail"))


def _content(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _text(content: str) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def _rng(body: dict[str, Any]) -> random.Random:
    """Seeded requests sample the same answer again; unseeded ones sample afresh."""
    if body.get("seed") is None:
        return random.Random()
    digest = hashlib.sha256(
        json.dumps([body.get("seed"), body.get("messages")], sort_keys=True).encode()
    ).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))
