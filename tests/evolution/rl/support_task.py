"""The verifiable task the GRPO test learns: the demo's skill gap, on the demo's own model.

The committed demo checkpoint (`evoplane/demo/model/`, made by `evoplane.demo.warm_start`)
calls the right tool for the usual phrasings, but for the new wave of terse, slang and German
requests only about a third of the time: a decision it partly masters, so a group of its
samples has mixed outcomes, which is where GRPO learns. (A model that had not learned the
decision at all barely moved in 60 steps; see the test's module docstring.)

A request is what the demo's support bot sends for one of Acme's customers; the right answer
is one call of the intent's tool with a valid argument.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from atdp import Harness, ModelRef, VersionSpec
from evolution.rl.samples import RecordedPrompt
from evoplane.demo import world
from evoplane.demo.runner import MODEL_DIR
from evoplane.demo.tools import ORDER_REF, Platform
from runtime.version.overlays import apply_overlays

TENANT = "acme"
TOOLS = Platform(release=1).specs(world.tools_of(TENANT))


def version(model: str = "demo@1") -> VersionSpec:
    """The version the gateway serves: the demo model under the agent's base instructions."""
    return VersionSpec(
        model=ModelRef(engine="local", checkpoint=str(MODEL_DIR), model=model),
        harness=Harness(instructions=world.BASE_INSTRUCTIONS),
    )


def request(rng: random.Random) -> tuple[list[dict[str, Any]], str]:
    """A new-wave customer's request as the bot sends it, and the tool it needs."""
    intent = rng.choice(world.intents_of(TENANT))
    messages = [
        {"role": "system", "content": world.agent_system(TENANT)},
        {"role": "user", "content": rng.choice(world.HARD[intent])},
    ]
    return messages, world.TOOL_OF[intent]


def held_out(count: int, *, seed: int) -> list[RecordedPrompt]:
    """Requests never recorded, rendered as the gateway renders them for `version()`."""
    rng = random.Random(seed)
    spec = version()
    made = []
    for _ in range(count):
        messages, tool = request(rng)
        view = apply_overlays({"messages": messages, "tools": TOOLS}, spec).body
        made.append(
            RecordedPrompt(
                event_id=str(uuid.UUID(int=rng.getrandbits(128))),
                tenant=TENANT,
                messages=view["messages"],
                tools=view["tools"],
                reference={"name": tool, "arguments": {"order_id": ORDER_REF}},
            )
        )
    return made
