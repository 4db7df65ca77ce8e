"""A verifiable support-desk task for the tiny model: which tool does this request need?

Fifteen phrasings of three intents, each with a random order number and customer name; the
right answer is one call of the intent's tool. The tiny model learns the output structure in
seconds of SFT; which tool to call is the decision RL improves.
"""

from __future__ import annotations

import random
import uuid

from evolution.rl.samples import RecordedPrompt
from evolution.rl.sft import Demonstration

INTENTS = {
    "lookup_order": [
        "where is my order",
        "has my package shipped",
        "track my parcel",
        "when will it arrive",
        "status of my delivery",
    ],
    "refund": [
        "i want my money back",
        "please refund me",
        "the item is broken, refund it",
        "reimburse me",
        "return and refund",
    ],
    "escalate": [
        "let me talk to a human",
        "get me a supervisor",
        "i want to complain",
        "this is unacceptable",
        "call your manager",
    ],
}
TOOLS = [
    {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": {}}},
    }
    for name in INTENTS
]
SYSTEM = "You are a support agent. Call one tool."
NAMES = ["ann", "bob", "cy", "dee", "eve", "fay", "gus", "hal", "ida", "jo"]


def request(rng: random.Random) -> tuple[list[dict], str]:
    """A customer request and the tool it needs."""
    tool = rng.choice(list(INTENTS))
    text = f"{rng.choice(INTENTS[tool])} (order {rng.randint(10, 99)}, {rng.choice(NAMES)})"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}], tool


def answer(tool: str) -> str:
    return f'<tool_call>{{"name": "{tool}", "arguments": {{}}}}</tool_call>'


def demonstrations(count: int, *, right: float, seed: int) -> list[Demonstration]:
    """Demonstrations whose tool is right with probability `right`, else any of the three:
    SFT on them gives a policy with the structure and a partly right decision."""
    rng = random.Random(seed)
    shown = []
    for _ in range(count):
        messages, tool = request(rng)
        label = tool if rng.random() < right else rng.choice(list(INTENTS))
        shown.append(Demonstration(messages, answer(label), TOOLS))
    return shown


def prompts(count: int, *, seed: int) -> list[RecordedPrompt]:
    rng = random.Random(seed)
    made = []
    for _ in range(count):
        messages, tool = request(rng)
        made.append(
            RecordedPrompt(
                event_id=str(uuid.UUID(int=rng.getrandbits(128))),
                tenant="acme",
                messages=messages,
                tools=TOOLS,
                reference={"name": tool, "arguments": {}},
            )
        )
    return made
