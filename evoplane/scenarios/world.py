"""What a scenario's world is made of: tenants, facts, tools, instructions and tasks.

A world is a domain the control plane was not built on (a travel desk, an IT helpdesk, a
clinic's front desk). It holds the ground truth a scenario is judged by: what each tenant's
facts are, what each tool accepts, which tool does which task, and what users want of an
answer. The scripted model (`evoplane.scenarios.model`) and the simulated users
(`evoplane.scenarios.users`) read it; the control plane never does: it sees only traffic.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Fact",
    "Instruction",
    "Procedure",
    "Slot",
    "Task",
    "TaskKind",
    "Tool",
    "ToolResult",
    "World",
    "shape",
]


def shape(text: str) -> str:
    """A value's shape: digits become 9, letters a ("EMP-40213" -> "aaa-99999")."""
    return re.sub(r"[A-Za-z]", "a", re.sub(r"\d", "9", text))


@dataclass(frozen=True)
class Slot:
    """A kind of value a task carries, and the ways it can be written.

    Args:
        renderings: format name -> how a canonical value is written in that format.
        habit: the format the model writes when nothing in its context asks for another.
        synonyms: words users say -> the canonical value (for closed sets).
    """

    name: str
    renderings: Mapping[str, Callable[[str], str]]
    habit: str
    synonyms: Mapping[str, str] = field(default_factory=dict)

    def render(self, value: str, how: str) -> str:
        return self.renderings[how](value)

    def forms(self, value: str) -> list[str]:
        """Every way this value can be written, habit first."""
        order = [self.habit, *(name for name in self.renderings if name != self.habit)]
        return list(dict.fromkeys(self.render(value, name) for name in order))


@dataclass(frozen=True)
class ToolResult:
    """What a tool's API answered: a result, or a refusal in the API's own words."""

    ok: bool
    body: Any

    @property
    def text(self) -> str:
        import json

        return self.body if isinstance(self.body, str) else json.dumps(self.body)


# (tenant, arguments) -> the API's answer
Backend = Callable[[str, dict[str, Any]], ToolResult]


@dataclass(frozen=True)
class Tool:
    """A tool as the agent declares it to the model, and the API that runs it.

    Args:
        parameters: the JSON schema the agent offers (which may lag behind the API).
        params: parameter name -> the slot it carries (what the API needs).
        backend: runs a call; refuses bad arguments as the real API would.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    params: Mapping[str, str]
    backend: Backend

    def spec(self) -> dict[str, Any]:
        function = {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
        }
        return {"type": "function", "function": function}


@dataclass(frozen=True)
class Fact:
    """Something true in a tenant's world, which the model knows only from its context.

    Args:
        topic: finds a sentence about this fact (in any language users write).
        value: captures the fact's value in such a sentence.
        values: tenant -> the true value (as `value` captures it, normalised by `norm`).
        guess: what the model says when its context does not hold the fact.
        answer: the model's answer, `{value}` filled in.
        statements: how people state the fact, `{value}` filled in (varied words and
            languages): users' corrections are drawn from these.
    """

    key: str
    topic: re.Pattern[str]
    value: re.Pattern[str]
    values: Mapping[str, str]
    guess: str
    answer: str
    statements: Sequence[str]

    def norm(self, text: str) -> str:
        return " ".join(text.lower().split())

    def found_in(self, text: str) -> str | None:
        """The fact's value as `text` states it last (later context is the newer word)."""
        found = None
        for sentence in re.split(r"(?<=[.!?\n])\s+|\n", text):
            if self.topic.search(sentence):
                match = self.value.search(sentence)
                if match:
                    found = self.norm(match.group(1))
        return found


@dataclass(frozen=True)
class Instruction:
    """Something users want of every answer that the agent's instructions do not say.

    Args:
        detector: finds the instruction where the model reads instructions (system
            messages, memory, demos): however a person worded it.
        follow: the answer the model writes when it follows the instruction.
        satisfied: whether an answer does what the user asked.
        requests: how users ask for it, in varied words and languages.
    """

    name: str
    detector: re.Pattern[str]
    follow: Callable[[str, Task], str]
    satisfied: Callable[[str, Task], bool]
    requests: Sequence[str]


@dataclass(frozen=True)
class Procedure:
    """A multi-step task: tools to run in order, one turn each, as users walk the agent
    through it. The model knows every step but `hidden` unless its context says it.

    Args:
        steps: the tools, in the order the task needs them.
        hidden: the step a model leaves out (going on with the next) unless told.
        cue: finds where the model's context says the hidden step.
        guidance: how users tell the agent the step it missed (varied words).
        go_on: what users say after a step that went right.
    """

    steps: tuple[str, ...]
    hidden: str
    cue: re.Pattern[str]
    guidance: tuple[str, ...]
    go_on: tuple[str, ...]


@dataclass(frozen=True)
class Task:
    """One thing a user wants, as the world knows it; the user writes `text`."""

    kind: str
    text: str
    slots: Mapping[str, str] = field(default_factory=dict)
    tool: str | None = None
    fact: str | None = None
    cue: str | None = None  # the words that tell this task's tool from a similar one
    complaints: tuple[str, ...] = ()  # what its user says when the wrong thing was done
    procedure: Procedure | None = None  # a multi-step task (one tool per turn)


@dataclass(frozen=True)
class TaskKind:
    """A kind of task users bring, and how a user of a tenant words one.

    Args:
        make: (rng, tenant) -> a task.
    """

    name: str
    make: Callable[[random.Random, str], Task]


@dataclass
class World:
    """A domain: tenants, the agent's first instructions, its tools, facts and tasks.

    Args:
        tenants: the tenants' names (suffixed per run by the runner).
        instructions: the agent's instructions at creation (its first harness).
        tools: the tools the agent declares, by name.
        slots: the kinds of values tasks carry, by name.
        facts: by key.
        instructions_users_want: by name.
        kinds: task kinds by name.
        confusable: groups of tools a model mixes up unless told apart.
        denials: how users say an answer is wrong without saying what is right (some say
            that first, and what is right in their next message).
    """

    name: str
    tenants: tuple[str, ...]
    instructions: str
    tools: dict[str, Tool]
    slots: dict[str, Slot]
    facts: dict[str, Fact]
    wanted: dict[str, Instruction]
    kinds: dict[str, TaskKind]
    confusable: tuple[frozenset[str], ...] = ()
    denials: tuple[str, ...] = ()
    said: dict[str, Task] = field(default_factory=dict)  # what each text users wrote means

    def remember(self, task: Task) -> Task:
        """The model understands what users write: the world records each task's text."""
        self.said[_key(task.text)] = task
        return task

    def understand(self, text: str) -> Task | None:
        return self.said.get(_key(text))

    def tool_specs(self, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
        return [tool.spec() for name, tool in self.tools.items() if names is None or name in names]


def _key(text: str) -> str:
    return " ".join(text.split()).lower()
