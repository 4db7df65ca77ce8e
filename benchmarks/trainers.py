"""The weights family side by side: GRPO, SFT and DPO (ours) and TRL's SFT and DPO, on the
same recorded traffic of the demo's tiny model, over several training seeds.

    nice -n 10 .venv/bin/python -m benchmarks.trainers [--quick] [--seeds 0,1,2] [--write]

Traffic: the demo's warm-started model (`evoplane/demo/model`) serves the new wave of terse,
slang and German requests, which it gets right about a third of the time. Each session is
one request: a wrong answer is rated down and regenerated once; still wrong, the user
restates the request the usual way (a correction), and the model answers again; every
answer is rated (right tool or not). The sessions are written to a SQLite registry and read
back through its training export, as a weights job reads them, so every algorithm trains on
what the export holds:

- GRPO: the recorded prompts with a reference (a rewarded call of the same user turn);
- SFT (ours and TRL's): those references as demonstrations;
- DPO (ours and TRL's): `correction_pairs`, the rewarded retry or correction over the
  answer it fixed. A correction pair gives the *hard* prompt a target even when no retry of
  it was ever rewarded, which is where GRPO's references are scarcest.

Each algorithm trains from each seed the same number of steps at the same batch size,
learning rate (constant) and clip norm; TRL gets the same prompts (rendered by our chat
template), targets and AdamW. Printed per algorithm: held-out reward before and after (the
strict tool reward on never-recorded requests, per intent), wall time and training tokens
per second (the completion tokens the loss read: for GRPO, the sampled groups).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.support import ROOT

AGENT, TENANT = "support-bot", "acme"
MAX_TOKENS = 96
LEARNING_RATE = 5e-4  # one for every algorithm: GRPO's on this model (tests/evolution/rl)


@dataclass(frozen=True)
class Scale:
    sessions: int
    held_out: int
    steps: int
    batch: int
    group_size: int
    eval_samples: int


FULL = Scale(sessions=160, held_out=48, steps=40, batch=6, group_size=8, eval_samples=4)
QUICK = Scale(sessions=40, held_out=16, steps=6, batch=4, group_size=4, eval_samples=2)


# --- recorded traffic -------------------------------------------------------------------------


def _view(messages: list[dict]) -> dict:
    """The request as the gateway sends the demo model: the agent's harness applied."""
    from atdp import Harness, ModelRef, VersionSpec
    from evoplane.demo import world
    from evoplane.demo.runner import MODEL_DIR
    from evoplane.demo.tools import Platform
    from proxy.overlays import apply_overlays

    spec = VersionSpec(
        model=ModelRef(engine="local", checkpoint=str(MODEL_DIR), model="demo@1"),
        harness=Harness(instructions=world.BASE_INSTRUCTIONS),
    )
    tools = Platform(release=1).specs(world.tools_of(TENANT))
    return apply_overlays({"messages": messages, "tools": tools}, spec).body


def _request(rng: random.Random) -> tuple[str, list[dict], str]:
    """A new-wave request: its intent, the bot's messages, and a usual restatement."""
    from evoplane.demo import world

    intent = rng.choice(world.intents_of(TENANT))
    messages = [
        {"role": "system", "content": world.agent_system(TENANT)},
        {"role": "user", "content": rng.choice(world.HARD[intent])},
    ]
    return intent.value, messages, rng.choice(world.NORMAL[intent])


def _right(text: str, tool: str) -> bool:
    from atdp.tool_text import parse_tool_calls

    content, calls = parse_tool_calls(text)
    return len(calls) == 1 and calls[0]["function"]["name"] == tool and not (content or "").strip()


def record_traffic(engine: Any, policy: Any, sessions: int, seed: int) -> dict[str, int]:
    """`sessions` sessions of the demo model as described above, into the registry."""
    import torch

    from evoplane.demo import world

    rng = random.Random(seed)
    generator = torch.Generator().manual_seed(seed)
    live = []
    for _ in range(sessions):
        intent, messages, restated = _request(rng)
        live.append({"intent": intent, "base": messages, "restated": restated, "turns": []})
    # Round 0: the request; 1: its regenerate; 2: after the user's correction.
    for round_ in range(3):
        waiting = [s for s in live if not s["turns"] or not s["turns"][-1]["right"]]
        waiting = [s for s in waiting if len(s["turns"]) == round_]
        if not waiting:
            break
        views = [_view(_messages(s, round_)) for s in waiting]
        samples = _sample(policy, views, generator)
        for session, view, sample in zip(waiting, views, samples, strict=True):
            tool = world.TOOL_OF[world.Intent(session["intent"])]
            session["turns"].append(
                {"view": view, "sample": sample, "right": _right(sample.text, tool)}
            )
    _write(engine, live)
    turns = [t for s in live for t in s["turns"]]
    return {
        "sessions": sessions,
        "llm_calls": len(turns),
        "right_first": sum(s["turns"][0]["right"] for s in live),
        "corrected": sum(len(s["turns"]) == 3 for s in live),
    }


def _messages(session: dict, round_: int) -> list[dict]:
    if round_ < 2:
        return session["base"]
    wrong = session["turns"][-1]["sample"].text
    return [
        *session["base"],
        {"role": "assistant", "content": wrong},
        {"role": "user", "content": session["restated"]},
    ]


def _sample(policy: Any, views: list[dict], generator: Any) -> list[Any]:
    from atdp.tool_text import offered_tool_names

    ids = [policy.prompt_ids(v["messages"], v["tools"]) for v in views]
    names = [offered_tool_names(v["tools"]) for v in views]
    found = []
    for start in range(0, len(ids), 16):
        found += policy.sample_many(
            ids[start : start + 16],
            1,
            max_new_tokens=MAX_TOKENS,
            temperature=1.0,
            generator=generator,
            tool_names=names[start : start + 16],
        )
    return [samples[0] for samples in found]


def _write(engine: Any, sessions: list[dict]) -> None:
    """Each session as a trajectory: its llm_calls, the user's correcting turn, the ratings."""
    from atdp import ChatMessage, MessageAction, Observation, ToolCall, ToolSpec, new_id
    from atdp.tool_text import parse_tool_calls
    from registry import add_rewards, insert_events, record_trajectory, transaction
    from tests.registry.helpers import event, reward, trajectory

    with transaction(engine) as session:
        for index, live in enumerate(sessions):
            owner = trajectory(TENANT, session=f"s-{index}")
            owner = owner.model_copy(update={"task_type": live["intent"]})
            record_trajectory(session, owner)
            events, rewards, previous = [], [], None
            for round_, turn in enumerate(live["turns"]):
                if round_ == 2:
                    correcting = ChatMessage(role="user", content=live["restated"])
                    events.append(
                        event(
                            owner,
                            len(events),
                            kind="user_message",
                            parent_id=previous,
                            observation=Observation(messages=[correcting]),
                        )
                    )
                content, calls = parse_tool_calls(turn["sample"].text)
                view = turn["view"]
                made = event(
                    owner,
                    len(events),
                    observation=Observation(
                        messages=[ChatMessage.model_validate(m) for m in view["messages"]],
                        tools=[ToolSpec.model_validate(t["function"]) for t in view["tools"]],
                    ),
                    action=MessageAction(
                        content=content,
                        tool_calls=[
                            ToolCall(
                                id=str(new_id()),
                                name=c["function"]["name"],
                                arguments=c["function"]["arguments"],
                            )
                            for c in calls
                        ],
                        token_ids=turn["sample"].token_ids,
                        logprobs=[min(lp, 0.0) for lp in turn["sample"].logprobs],
                    ),
                )
                events.append(made)
                rewards.append(reward(owner, float(turn["right"]), made))
                previous = made.id
            insert_events(session, events)
            add_rewards(session, rewards)


def held_out(count: int, seed: int) -> list[tuple[str, Any]]:
    """Never-recorded requests with the tool each needs, by intent."""
    from evolution.rl.samples import RecordedPrompt
    from evoplane.demo import world
    from evoplane.demo.tools import ORDER_REF

    rng = random.Random(seed)
    made = []
    for _ in range(count):
        intent, messages, _ = _request(rng)
        view = _view(messages)
        made.append(
            (
                intent,
                RecordedPrompt(
                    event_id=str(uuid.UUID(int=rng.getrandbits(128))),
                    tenant=TENANT,
                    messages=view["messages"],
                    tools=view["tools"],
                    reference={
                        "name": world.TOOL_OF[world.Intent(intent)],
                        "arguments": {"order_id": ORDER_REF},
                    },
                ),
            )
        )
    return made


# --- training -------------------------------------------------------------------------------


def train_ours(kind: str, data: Any, out: Path, scale: Scale, seed: int) -> tuple[Path, int]:
    """(checkpoint, completion tokens the loss read) of our trainer."""
    from evolution.rl.config import TrainConfig
    from evolution.rl.objectives import ObjectiveConfig
    from evolution.rl.offline import train_offline
    from evolution.rl.rewards import ToolCallReward
    from evolution.rl.trainer import train
    from evoplane.demo.runner import MODEL_DIR

    config = TrainConfig(
        objective=ObjectiveConfig(kind=kind, eps_high=0.28, beta=0.1),
        steps=scale.steps,
        prompts_per_step=scale.batch,
        group_size=scale.group_size,
        learning_rate=LEARNING_RATE,
        max_new_tokens=MAX_TOKENS,
        checkpoint_every=scale.steps,
        seed=seed,
        threads=1,
    )
    if kind == "grpo":
        result = train(MODEL_DIR, out, data, ToolCallReward(format_credit=0.1), config)
    else:
        result = train_offline(MODEL_DIR, out, data, config)
    return result.checkpoint, sum(m.tokens for m in result.history)


def train_trl(kind: str, data: Any, out: Path, scale: Scale, seed: int) -> tuple[Path, int]:
    """TRL's SFTTrainer or DPOTrainer on the same examples, prompts rendered as ours."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer

    from evolution.rl.policy import Policy
    from evoplane.demo.runner import MODEL_DIR

    policy = Policy.load(MODEL_DIR)
    tokenizer = policy.tokenizer

    def prompt(messages: list[dict], tools: Any) -> str:
        return tokenizer.decode(policy.prompt_ids(messages, tools))

    common = dict(
        output_dir=str(out),
        max_steps=scale.steps,
        per_device_train_batch_size=scale.batch,
        learning_rate=LEARNING_RATE,
        lr_scheduler_type="constant",
        weight_decay=0.01,  # torch's AdamW default, which ours uses
        max_grad_norm=1.0,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_steps=max(1, scale.steps // 4),
        seed=seed,
        gradient_checkpointing=False,
        disable_tqdm=True,
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(MODEL_DIR, dtype=torch.float32)
    if kind == "sft":
        rows = [{"prompt": prompt(d.messages, d.tools), "completion": d.completion} for d in data]
        trainer: Any = SFTTrainer(
            model=model,
            args=SFTConfig(**common, completion_only_loss=True),
            train_dataset=Dataset.from_list(rows),
            processing_class=tokenizer,
        )
        per_row = [len(tokenizer.encode(r["completion"])) + 1 for r in rows]
    else:
        rows = [
            {
                "prompt": prompt(p.prompt.messages, p.prompt.tools or None),
                "chosen": p.chosen,
                "rejected": p.rejected,
            }
            for p in data
        ]
        trainer = DPOTrainer(
            model=model,
            args=DPOConfig(**common, beta=0.1),
            train_dataset=Dataset.from_list(rows),
            processing_class=tokenizer,
        )
        per_row = [len(tokenizer.encode(r["chosen"] + r["rejected"])) + 2 for r in rows]
    trainer.train()
    trainer.save_model(str(out / "final"))
    tokenizer.save_pretrained(out / "final")
    # The same number of examples as ours read: steps x batch, of the mean size.
    return out / "final", round(statistics.mean(per_row) * scale.steps * scale.batch)


# --- measuring ------------------------------------------------------------------------------


def held_out_rewards(checkpoint: Path, prompts: list[tuple[str, Any]], scale: Scale) -> dict:
    """Mean strict reward overall and per intent (the same evaluation seed every time)."""
    from evolution.rl.evaluation import evaluate
    from evolution.rl.policy import Policy
    from evolution.rl.rewards import ToolCallReward

    policy = Policy.load(checkpoint)
    strict = ToolCallReward()
    by_intent: dict[str, float] = {}
    for intent in sorted({i for i, _ in prompts}):
        mine = [p for i, p in prompts if i == intent]
        by_intent[intent] = evaluate(
            policy, mine, strict, samples=scale.eval_samples, max_new_tokens=MAX_TOKENS, seed=7
        )
    counts = {i: sum(1 for j, _ in prompts if j == i) for i in by_intent}
    overall = sum(by_intent[i] * counts[i] for i in by_intent) / len(prompts)
    return {"all": overall, **by_intent}


def run(scale: Scale, seeds: list[int], algorithms: list[str]) -> dict:
    import torch

    from evolution.rl.data import call_text, correction_pairs
    from evolution.rl.policy import Policy
    from evolution.rl.samples import record_prompts, training_records
    from evolution.rl.sft import Demonstration
    from evoplane.demo.runner import MODEL_DIR
    from registry import create_db_engine, transaction, upgrade
    from tests.registry.helpers import seed_world

    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp(prefix="trainers-"))
    engine = create_db_engine(f"sqlite:///{work / 'registry.db'}")
    upgrade(engine)
    seed_world(engine, tenants=(TENANT,), agent=AGENT)
    began = time.perf_counter()
    traffic = record_traffic(engine, Policy.load(MODEL_DIR), scale.sessions, seed=1)
    traffic["seconds"] = round(time.perf_counter() - began, 1)
    with transaction(engine) as session:
        records = list(training_records(session, AGENT, [TENANT]))
    prompts = [p for r in records for p in record_prompts(r)]
    usable = [p for p in prompts if p.reference is not None]
    demos = [
        Demonstration(p.messages, call_text(p.reference["name"], p.reference["arguments"]), p.tools)
        for p in usable
    ]
    pairs = correction_pairs(records)
    references: dict[str, int] = {}
    for p in usable:
        references[p.reference["name"]] = references.get(p.reference["name"], 0) + 1
    data = {
        "prompts": len(prompts),
        "references": references,
        "pairs": {s: sum(p.source == s for p in pairs) for s in ("retry", "correction")},
        **traffic,
    }
    print("data:", json.dumps(data))
    evaluation = held_out(scale.held_out, seed=99)
    before = held_out_rewards(MODEL_DIR, evaluation, scale)
    print("held-out reward before:", _rounded(before))
    rows = []
    for algorithm in algorithms:
        framework, kind = algorithm.split("-")
        examples = {"grpo": usable, "sft": demos, "dpo": pairs}[kind]
        trainer = train_ours if framework == "ours" else train_trl
        for seed in seeds:
            out = work / f"{algorithm}-{seed}"
            began = time.perf_counter()
            checkpoint, tokens = trainer(kind, examples, out, scale, seed)
            seconds = time.perf_counter() - began
            after = held_out_rewards(checkpoint, evaluation, scale)
            row = {
                "algorithm": algorithm,
                "seed": seed,
                "seconds": round(seconds, 1),
                "tokens_per_s": round(tokens / seconds, 1),
                "after": _rounded(after),
            }
            print(json.dumps(row))
            rows.append(row)
    return {"data": data, "before": _rounded(before), "rows": rows}


def _rounded(values: dict) -> dict:
    return {k: round(v, 3) for k, v in values.items()}


def table(result: dict) -> str:
    """Means over the seeds (and the seeds' range of the overall reward), one row each."""
    before = result["before"]
    intents = [k for k in before if k != "all"]
    head = ["algorithm", "held-out reward after (seeds)", *intents, "wall s", "tokens/s"]
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        "| before | "
        + f"{before['all']:.3f} | "
        + " | ".join(f"{before[i]:.2f}" for i in intents)
        + " | | |",
    ]
    for algorithm in dict.fromkeys(r["algorithm"] for r in result["rows"]):
        mine = [r for r in result["rows"] if r["algorithm"] == algorithm]
        alls = [r["after"]["all"] for r in mine]
        cells = [
            algorithm,
            f"{statistics.mean(alls):.3f} ({', '.join(f'{a:.2f}' for a in alls)})",
            *(f"{statistics.mean(r['after'][i] for r in mine) - before[i]:+.2f}" for i in intents),
            f"{statistics.mean(r['seconds'] for r in mine):.0f}",
            f"{statistics.mean(r['tokens_per_s'] for r in mine):.0f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small run that checks the path")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--algorithms", default="ours-grpo,ours-sft,trl-sft,ours-dpo,trl-dpo")
    parser.add_argument("--write", action="store_true", help="append to benchmarks/RESULTS.md")
    args = parser.parse_args()
    scale = QUICK if args.quick else FULL
    seeds = [int(s) for s in args.seeds.split(",")]
    result = run(scale, seeds, args.algorithms.split(","))
    text = table(result)
    print(text)
    if args.write:
        host = f"{platform.machine()}, {len(__import__('os').sched_getaffinity(0))} cores"
        day = datetime.now(UTC).date().isoformat()
        with (ROOT / "benchmarks" / "RESULTS.md").open("a") as results:
            results.write(
                f"\n## Trainers side by side ({day}, {host})\n\n"
                f"`python -m benchmarks.trainers{' --quick' if args.quick else ''} "
                f"--seeds {args.seeds}`: {scale}; data {json.dumps(result['data'])}. "
                "Per intent: the mean change of the held-out reward.\n\n"
                f"{text}\n"
            )


if __name__ == "__main__":
    main()
