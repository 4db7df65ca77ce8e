"""Warm-start the demo's model: `init_tiny` taught the support desk's decisions by SFT.

    python -m evoplane.demo.warm_start            # writes evoplane/demo/model/ (~10-15 min)

A from-scratch SFT inside the live demo would depend on the seed and take minutes on two
cores, so the demo starts from this checkpoint, made once, reproducibly: a fixed seed, a
fixed number of steps, and demonstrations generated from `evoplane.demo.world`, hashed into
`provenance.json` beside the weights (`tests/demo/test_warm_start_provenance.py` re-derives
the hash and checks the config and seed).

Every demonstration is rendered the way the gateway renders a request for the model
(`runtime.version.overlays.apply_overlays`: harness instructions and demos, BM25-retrieved
memory block), so the model learns from the prompts it will be served. It learns:

- tool calls for the four tool intents, well for the usual phrasings and only about 40% of
  the time for the new wave of terse, slang and German ones (noisy labels): the skill gap
  a weight evolution closes;
- `"order_id": "latest"` as every tool's argument, except that it names `cancel_order`'s
  order `id` a quarter of the time (it was taught from traffic of two platform releases):
  which argument name a tool takes is its decision;
- to answer a question with the fact line in its context (instructions or memory block)
  that answers it, else "Let me check that for you."; a 0.56M byte-level model cannot copy
  arbitrary text, so it learns to say the demo's fact lines when, and only when, one is in
  its context: using the memory block or not is its decision;
- to acknowledge a correction.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from atdp import ChatMessage, FewShotDemo, Harness, ModelRef, VersionSpec
from evoplane.demo import world
from evoplane.demo.tools import ORDER_REF, Platform
from evoplane.demo.world import FACTS, HARD, NORMAL

__all__ = [
    "DEFAULT_OUT",
    "SCRIPT_VERSION",
    "WarmStartConfig",
    "data_hash",
    "demonstrations",
    "evaluate",
    "main",
    "warm_start",
]

SCRIPT_VERSION = 1
DEFAULT_OUT = Path(__file__).parent / "model"
PROVENANCE = "provenance.json"
_OTHERS = [fact.line for topic, fact in FACTS.items() if topic not in world.BASE_FACTS]
_LESSONS = "Lessons from answers users corrected:"  # the harness operator's heading
HARD_RIGHT = 0.2  # a hard phrasing's label is right this often, else any offered tool
CANCEL_ID = 0.25  # how often a cancel_order label names its order `id`
_DEMO_VERSION = "warm-start"


@dataclass(frozen=True)
class WarmStartConfig:
    """Everything that decides the checkpoint; recorded in its provenance."""

    seed: int = 0
    demonstrations: int = 12000
    steps: int = 8000
    batch_size: int = 8
    # (share of the steps, learning rate), each phase with a fresh optimiser: Adam's second
    # moments from the early, large boilerplate gradients would otherwise damp the small
    # ones of the decisions for a long time.
    schedule: tuple[tuple[float, float], ...] = (
        (0.2, 3e-3),
        (0.2, 3e-3),
        (0.2, 2e-3),
        (0.15, 1e-3),
        (0.15, 1e-3),
        (0.1, 3e-4),
    )
    threads: int = 1


# --- rendering what the model sees ----------------------------------------------------------


def _call(name: str, arguments: dict[str, Any]) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def model_view(
    body: dict[str, Any], instructions: str, demos: list[FewShotDemo], memory: list[str]
) -> dict[str, Any]:
    """The request the gateway sends the model for the agent's `body` under a version with
    these instructions, harness demos and memory items (retrieved by its own BM25)."""
    from registry.memory import MemoryItem, MemoryKind, memory_key
    from runtime.version.memory import MemoryIndex
    from runtime.version.overlays import apply_overlays

    now = datetime(2026, 1, 1, tzinfo=UTC)
    items = [
        MemoryItem(
            id=uuid.UUID(int=index + 1),
            agent=world.AGENT,
            tenant=None,
            kind=MemoryKind.FACT,
            key=memory_key(line),
            content=line,
            created_at=now,
            updated_at=now,
        )
        for index, line in enumerate(memory)
    ]
    spec = VersionSpec(
        model=ModelRef(engine="local", model=_DEMO_VERSION),
        harness=Harness(instructions=instructions, demos=demos),
    )
    return apply_overlays(body, spec, MemoryIndex(items)).body


def _system_text(view: dict[str, Any]) -> str:
    return "\n".join(
        m["content"] for m in view["messages"] if m["role"] == "system" and m.get("content")
    )


# --- the demonstrations ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Context:
    tenant: str
    instructions: str
    demos: list[FewShotDemo]
    memory: list[str]
    release: int


def _instructions(rng: random.Random, lessons: Sequence[str] | None = None) -> str:
    """The harness instructions a version may carry: the base, with the lessons a harness
    evolution adds, a person's shorter rewrite, or none at all."""
    if lessons is None and rng.random() < 0.3:
        lessons = rng.sample(_OTHERS, rng.randint(1, 2))
    if lessons:
        listed = "\n".join(f"- {line}" for line in lessons)
        return f"{world.BASE_INSTRUCTIONS}\n\n{_LESSONS}\n{listed}"
    return rng.choices([world.BASE_INSTRUCTIONS, world.HOTFIX_INSTRUCTIONS, ""], [5, 1, 1])[0]


def _harness_demos(rng: random.Random) -> list[FewShotDemo]:
    """Few-shot turns a harness optimiser may add: earlier questions and their answers."""
    if rng.random() < 0.8:
        return []
    demos = []
    for fact in rng.sample(list(FACTS.values()), 2):
        demos.append(
            FewShotDemo(
                messages=[
                    ChatMessage(role="user", content=rng.choice(fact.questions)),
                    ChatMessage(role="assistant", content=fact.line),
                ]
            )
        )
    return demos


def _context(rng: random.Random) -> _Context:
    tenant = rng.choice(list(world.COMPANIES))
    # The store holds facts evolutions may add; BM25 shows only those a question matches.
    store = [
        FACTS[topic].line for topic in FACTS if topic not in world.BASE_FACTS and rng.random() < 0.3
    ]
    return _Context(
        tenant=tenant,
        instructions=_instructions(rng),
        demos=_harness_demos(rng),
        memory=store,
        release=rng.choice([1, 2]),
    )


def _body(context: _Context, conversation: list[dict[str, Any]]) -> dict[str, Any]:
    platform = Platform(context.release)
    return {
        "messages": [
            {"role": "system", "content": world.agent_system(context.tenant)},
            *conversation,
        ],
        "tools": platform.specs(world.tools_of(context.tenant)),
    }


@dataclass(frozen=True)
class _Example:
    skill: str
    view: dict[str, Any]
    completion: str
    right: str  # the right answer (the completion may be a noisy label)


def _tool_request(rng: random.Random, context: _Context, hard: bool) -> _Example:
    intent = rng.choice(world.intents_of(context.tenant))
    text = rng.choice((HARD if hard else NORMAL)[intent])
    view = model_view(
        _body(context, [{"role": "user", "content": text}]),
        context.instructions,
        context.demos,
        context.memory,
    )
    right = _call(world.TOOL_OF[intent], _arguments(world.TOOL_OF[intent], rng))
    label = right
    if hard and rng.random() >= HARD_RIGHT:
        tool = rng.choice(world.tools_of(context.tenant))
        label = _call(tool, _arguments(tool, rng))
    return _Example("hard_tool" if hard else "tool", view, label, right)


def _arguments(tool: str, rng: random.Random) -> dict[str, str]:
    """Every tool's order is `"latest"`; `cancel_order` was taught from traffic of two
    platform releases, so the model names its argument `id` a quarter of the time."""
    if tool == "cancel_order" and rng.random() < CANCEL_ID:
        return {"id": ORDER_REF}
    return {"order_id": ORDER_REF}


def _question(rng: random.Random, context: _Context) -> _Example:
    """A question, mostly without tools (agents offer tools for order tickets only, and a
    harness optimiser's program asks without them too). Its fact line sits in the base
    instructions, in lessons, in the memory store, or nowhere, in even shares, so each
    place is learned; the label is read off the rendered context either way."""
    fact = rng.choice(list(FACTS.values()))
    others = [line for line in _OTHERS if line != fact.line]
    where = rng.choice(["base", "lessons", "memory", "nowhere"])
    lessons = None
    memory = [line for line in others if rng.random() < 0.3]
    if where == "lessons" and fact.topic not in world.BASE_FACTS:
        lessons = rng.sample([fact.line, *rng.sample(others, 1)], rng.randint(1, 2))
        if fact.line not in lessons:
            lessons.append(fact.line)
    elif where == "memory":
        memory.append(fact.line)
    elif where == "nowhere":
        lessons = rng.sample(others, rng.randint(1, 2)) if rng.random() < 0.5 else None
    instructions = _instructions(rng, lessons)
    body = _body(context, [{"role": "user", "content": rng.choice(fact.questions)}])
    if rng.random() < 0.8:
        del body["tools"]
    view = model_view(body, instructions, context.demos, memory)
    answer = fact.line if fact.line in _system_text(view) else world.FALLBACK
    return _Example("question" if answer == fact.line else "no_fact", view, answer, answer)


def _correction(rng: random.Random, context: _Context) -> _Example:
    fact = rng.choice(list(FACTS.values()))
    conversation = [
        {"role": "user", "content": rng.choice(fact.questions)},
        {"role": "assistant", "content": world.FALLBACK},
        {"role": "user", "content": fact.correction},
    ]
    view = model_view(
        _body(context, conversation), context.instructions, context.demos, context.memory
    )
    return _Example("ack", view, world.ACK, world.ACK)


_SKILLS: list[tuple[float, Callable[[random.Random, _Context], _Example]]] = [
    (0.40, lambda rng, c: _tool_request(rng, c, hard=False)),
    (0.16, lambda rng, c: _tool_request(rng, c, hard=True)),
    (0.38, _question),
    (0.06, _correction),
]


def _examples(count: int, seed: int) -> list[_Example]:
    rng = random.Random(seed)
    weights = [weight for weight, _ in _SKILLS]
    makers = [make for _, make in _SKILLS]
    return [rng.choices(makers, weights)[0](rng, _context(rng)) for _ in range(count)]


def demonstrations(count: int, seed: int):
    """The SFT data: (messages, completion, tools) as the gateway would send the model."""
    from evolution.rl.sft import Demonstration

    return [
        Demonstration(example.view["messages"], example.completion, example.view.get("tools"))
        for example in _examples(count, seed)
    ]


def data_hash(demos: Sequence[Any]) -> str:
    """SHA-256 of the demonstrations as canonical JSON: what the provenance pins."""
    digest = hashlib.sha256()
    for demo in demos:
        record = {"messages": demo.messages, "completion": demo.completion, "tools": demo.tools}
        digest.update(json.dumps(record, sort_keys=True, separators=(",", ":")).encode())
        digest.update(b"\n")
    return digest.hexdigest()


# --- training and measuring -----------------------------------------------------------------


def evaluate(policy: Any, *, count: int = 200, seed: int = 10_000) -> dict[str, float]:
    """Share of right answers per skill on fresh contexts: greedy, and sampled at T=1 for
    the tool decisions (how the agents sample)."""
    import torch

    from atdp.tool_text import parse_tool_calls

    generator = torch.Generator().manual_seed(seed)
    scores: dict[str, list[float]] = {}
    for example in _examples(count, seed):
        prompt = policy.prompt_ids(example.view["messages"], example.view.get("tools"))
        modes = [("greedy", 0.0)]
        if example.skill in {"tool", "hard_tool"}:
            modes.append(("sampled", 1.0))
        for mode, temperature in modes:
            (completion,) = policy.sample(
                prompt, 1, max_new_tokens=96, temperature=temperature, generator=generator
            )
            right = _same_answer(completion.text, example.right, parse_tool_calls)
            scores.setdefault(f"{example.skill}_{mode}", []).append(float(right))
    return {key: round(sum(values) / len(values), 3) for key, values in sorted(scores.items())}


def _same_answer(text: str, right: str, parse: Callable) -> bool:
    if right.startswith("<tool_call>"):
        content, calls = parse(text)
        wanted = json.loads(right.removeprefix("<tool_call>").removesuffix("</tool_call>"))
        if len(calls) != 1 or (content or "").strip():
            return False
        function = calls[0]["function"]
        try:
            arguments = json.loads(function["arguments"])
        except ValueError:
            return False
        # Either name of cancel_order's order is the model's habit, not a mistake.
        return function["name"] == wanted["name"] and list(arguments.values()) == [ORDER_REF]
    return text.strip() == right


def warm_start(
    out: Path = DEFAULT_OUT,
    config: WarmStartConfig | None = None,
    *,
    on_step: Callable[[int, float], None] | None = None,
) -> dict[str, Any]:
    """Train the demo model into `out` and write its provenance; returns the provenance."""
    import torch

    from evolution.rl.policy import Policy
    from evolution.rl.sft import supervised_finetune
    from evoplane.demo.tiny import TinyModelSpec, init_tiny

    config = config or WarmStartConfig()
    torch.set_num_threads(config.threads)
    started = time.monotonic()
    spec = TinyModelSpec(seed=config.seed)
    out = Path(out)
    policy = Policy.load(init_tiny(out, spec))
    demos = demonstrations(config.demonstrations, config.seed)
    done, loss = 0, float("nan")
    for phase, (share, learning_rate) in enumerate(config.schedule):
        steps = round(config.steps * share)
        loss = supervised_finetune(
            policy,
            demos,
            steps=steps,
            batch_size=config.batch_size,
            learning_rate=learning_rate,
            seed=config.seed + phase,
            on_step=(lambda step, value, base=done: on_step(base + step, value))
            if on_step
            else None,
        )
        done += steps
    policy.model.save_pretrained(out)
    policy.tokenizer.save_pretrained(out)
    provenance = {
        "script": "evoplane.demo.warm_start",
        "script_version": SCRIPT_VERSION,
        "seed": config.seed,
        "config": asdict(config),
        "tiny_model": asdict(spec),
        "demonstrations": config.demonstrations,
        "data_sha256": data_hash(demos),
        "final_loss": round(loss, 5),
        "accuracy": evaluate(policy),
        "train_seconds": round(time.monotonic() - started),
        "versions": _versions(),
    }
    (out / PROVENANCE).write_text(json.dumps(provenance, indent=2) + "\n")
    return provenance


def _versions() -> dict[str, str]:
    import tokenizers
    import torch
    import transformers

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--steps", type=int, default=WarmStartConfig.steps)
    parser.add_argument("--seed", type=int, default=WarmStartConfig.seed)
    args = parser.parse_args(argv)
    config = WarmStartConfig(seed=args.seed, steps=args.steps)
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (
        TextColumn("warm start"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} steps, loss {task.fields[loss]:.3f}"),
        TimeRemainingColumn(),
    )
    with Progress(*columns) as progress:
        task = progress.add_task("sft", total=config.steps, loss=float("nan"))
        provenance = warm_start(
            args.out,
            config,
            on_step=lambda step, loss: progress.update(task, completed=step, loss=loss),
        )
    print(json.dumps({k: provenance[k] for k in ("data_sha256", "accuracy")}, indent=2))


if __name__ == "__main__":
    main()
