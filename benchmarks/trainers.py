"""The weights family side by side: GRPO, SFT, DPO and on-policy distillation (ours) and TRL's
SFT and DPO, on the same recorded traffic of the demo's tiny model, over several training
seeds; and the relative judges that can run here, measured on that traffic.

    nice -n 10 .venv/bin/python -m benchmarks.trainers [--quick] [--seeds 0,1,2]
        [--algorithms ours-grpo,ours-dpo,ours-rpo,trl-rpo,...] [--lr 5e-4]
        [--scarce 1] [--judges] [--write]

Traffic: the demo's warm-started model (`evoplane/demo/model`) serves the new wave of terse,
slang and German requests, which it gets right about a third of the time. Each session is
one request: a wrong answer is rated down and regenerated once; still wrong, the user
restates the request the usual way (a correction), and the model answers again; every
answer is rated (right tool or not). With `--scarce K`, K intents (drawn with the traffic's
seed) are ones the model fails: four in five of their sessions whose first answer was right
are left out of the record, and their users restate a wrong answer at once instead of
regenerating it, so their rewarded references on the request itself are few and their
corrections many. The sessions are written to a SQLite registry and read back through its
training export, as a weights job reads them, so every algorithm trains on what the export
holds:

- GRPO: the recorded prompts with a reference (a rewarded call of the same user turn);
- SFT (ours and TRL's): those references as demonstrations;
- DPO (ours and TRL's): `correction_pairs`, the rewarded retry or correction over the
  answer it fixed. A correction pair gives the *hard* prompt a target even when no retry of
  it was ever rewarded, which is where GRPO's references are scarcest;
- RPO (`ours-rpo`, `trl-rpo`, not run by default): DPO on the same pairs with the chosen
  answer's own negative log-likelihood added at weight 1, so its likelihood cannot fall
  with the rejected one's (`ObjectiveConfig.chosen_nll`; TRL's `loss_type` sigmoid + sft);
- mix (`ours-mix`, not run by default): what the product's DPO job trains
  (`evolution.rl.plan`): RPO on the pairs whose fix no rewarded call of the request gives
  (corrections, not retries) and, beside them, every rewarded reference as a demonstration
  (its likelihood), so the pairs move what the model gets wrong while the references hold
  what it gets right;
- distillation (ours): every recorded prompt, referenced or not, sampled by the student and
  scored token by token by a teacher: our SFT result of the same seed, trained first.

With `--judges`, the relative judges that run here (the untrained tiny model, and our SFT
result of the first seed) score recorded answers to the same request four at a time, and
their agreement with the answers' explicit ratings is printed beside the threshold a weights
job requires (`JudgeSettings.min_agreement`).

Each algorithm trains from each seed the same number of steps at the same batch size,
learning rate (constant) and clip norm; TRL gets the same prompts (rendered by our chat
template), targets and AdamW. Printed per algorithm: held-out reward before and after (the
strict tool reward on never-recorded requests, per intent), wall time and training tokens
per second (the completion tokens the loss read: for GRPO, the sampled groups). The
held-out requests are every distinct new-wave request of the tenant (never recorded as such,
but written as the recorded ones are), each sampled `eval_samples` times; the "usual" column
is every usual request, sampled alike: what training must keep.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.support import ROOT

AGENT, TENANT = "support-bot", "acme"
MAX_TOKENS = 96
LEARNING_RATE = 5e-4  # one for every algorithm: GRPO's on this model (tests/evolution/rl)


RPO = {"loss_type": ["sigmoid", "sft"], "loss_weights": [1.0, 1.0]}  # TRL's DPO + chosen NLL


@dataclass(frozen=True)
class Scale:
    sessions: int
    steps: int
    batch: int
    group_size: int
    eval_samples: int  # per distinct held-out request
    judge_groups: int  # recorded answer groups each judge scores
    learning_rate: float = LEARNING_RATE  # every algorithm's alike (`--lr`)


FULL = Scale(sessions=160, steps=40, batch=6, group_size=8, eval_samples=32, judge_groups=40)
QUICK = Scale(sessions=40, steps=6, batch=4, group_size=4, eval_samples=4, judge_groups=6)
SCARCE_KEEP_RIGHT = 0.2  # of a scarce intent's sessions whose first answer was right


# --- recorded traffic -------------------------------------------------------------------------


def _view(messages: list[dict]) -> dict:
    """The request as the gateway sends the demo model: the agent's harness applied."""
    from atdp import Harness, ModelRef, VersionSpec
    from evoplane.demo import world
    from evoplane.demo.runner import MODEL_DIR
    from evoplane.demo.tools import Platform
    from runtime.version.overlays import apply_overlays

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


def record_traffic(
    engine: Any, policy: Any, sessions: int, seed: int, scarce: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """`sessions` sessions of the demo model as described above, into the registry."""
    import torch

    from evoplane.demo import world

    rng = random.Random(seed)
    generator = torch.Generator().manual_seed(seed)
    live = []
    for _ in range(sessions):
        intent, messages, restated = _request(rng)
        live.append(
            {
                "intent": intent,
                "scarce": intent in scarce,
                "base": messages,
                "restated": restated,
                "turns": [],
            }
        )
    # Round 0: the request; 1: its regenerate; 2: after the user's correction.
    for round_ in range(3):
        waiting = [s for s in live if _next_round(s) == round_]
        views = [_view(_messages(s, round_)) for s in waiting]
        samples = _sample(policy, views, generator) if views else []
        for session, view, sample in zip(waiting, views, samples, strict=True):
            tool = world.TOOL_OF[world.Intent(session["intent"])]
            right = _right(sample.text, tool)
            session["turns"].append(
                {"view": view, "sample": sample, "right": right, "round": round_}
            )
        if round_ == 0:
            live = [s for s in live if not _left_out(s, rng)]
    _write(engine, live)
    turns = [t for s in live for t in s["turns"]]
    return {
        "sessions": len(live),
        "left_out": sessions - len(live),
        "scarce": sorted(scarce),
        "llm_calls": len(turns),
        "right_first": sum(s["turns"][0]["right"] for s in live),
        "corrected": sum(s["turns"][-1]["round"] == 2 for s in live),
    }


def _next_round(session: dict) -> int | None:
    """The round a session's next answer is given in; None when it is over."""
    turns = session["turns"]
    if not turns:
        return 0
    if turns[-1]["right"] or turns[-1]["round"] == 2:
        return None
    return 2 if session["scarce"] else turns[-1]["round"] + 1


def _left_out(session: dict, rng: random.Random) -> bool:
    """Whether a scarce intent's session with a right first answer stays out of the record."""
    right = session["turns"][0]["right"]
    return session["scarce"] and right and rng.random() >= SCARCE_KEEP_RIGHT


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
            for turn in live["turns"]:
                if turn["round"] == 2:
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


def held_out() -> list[tuple[str, Any]]:
    """Every distinct new-wave request of the tenant, with the tool each needs, by intent;
    then every usual request, as intent "usual": what training must not break."""
    from evolution.rl.samples import RecordedPrompt
    from evoplane.demo import world
    from evoplane.demo.tools import ORDER_REF

    made = []
    for label, phrasings in (("new", world.HARD), ("usual", world.NORMAL)):
        for intent in world.intents_of(TENANT):
            for index, text in enumerate(phrasings[intent]):
                messages = [
                    {"role": "system", "content": world.agent_system(TENANT)},
                    {"role": "user", "content": text},
                ]
                view = _view(messages)
                prompt = RecordedPrompt(
                    event_id=f"held-out-{label}-{intent.value}-{index}",
                    tenant=TENANT,
                    messages=view["messages"],
                    tools=view["tools"],
                    reference={
                        "name": world.TOOL_OF[intent],
                        "arguments": {"order_id": ORDER_REF},
                    },
                )
                made.append((intent.value if label == "new" else label, prompt))
    return made


# --- training -------------------------------------------------------------------------------


def train_ours(
    kind: str, data: Any, out: Path, scale: Scale, seed: int, teacher: Path | None = None
) -> tuple[Path, int]:
    """(checkpoint, completion tokens the loss read) of our trainer."""
    from evolution.rl.config import TrainConfig
    from evolution.rl.objectives import ObjectiveConfig
    from evolution.rl.offline import train_offline
    from evolution.rl.rewards import ToolCallReward
    from evolution.rl.trainer import train
    from evoplane.demo.runner import MODEL_DIR

    # RPO: DPO with the chosen completion's NLL added at weight 1 (TRL's ["sigmoid", "sft"]);
    # mix: RPO's pairs with every rewarded reference's likelihood beside them (the product's
    # DPO job, `evolution.rl.plan`).
    objective = ObjectiveConfig(kind=kind, eps_high=0.28, beta=0.1)
    if kind in ("rpo", "mix"):
        objective = ObjectiveConfig(kind="dpo", beta=0.1, chosen_nll=1.0)
    config = TrainConfig(
        objective=objective,
        steps=scale.steps,
        prompts_per_step=scale.batch,
        group_size=scale.group_size,
        learning_rate=scale.learning_rate,
        max_new_tokens=MAX_TOKENS,
        checkpoint_every=scale.steps,
        seed=seed,
        threads=1,
        dynamic_sampling=kind != "distill",
    )
    if kind in ("grpo", "distill"):
        reward = ToolCallReward(format_credit=0.1)
        result = train(MODEL_DIR, out, data, reward, config, teacher=teacher)
    else:
        result = train_offline(MODEL_DIR, out, data, config)
    return result.checkpoint, sum(m.tokens for m in result.history)


def train_trl(
    kind: str, data: Any, out: Path, scale: Scale, seed: int, teacher: Path | None = None
) -> tuple[Path, int]:
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
        learning_rate=scale.learning_rate,
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
            args=DPOConfig(**common, beta=0.1, **RPO if kind == "rpo" else {}),
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
    """Every sample's strict reward, per intent (the same evaluation seed every time)."""
    from evolution.rl.evaluation import prompt_rewards
    from evolution.rl.policy import Policy
    from evolution.rl.rewards import ToolCallReward

    scores = prompt_rewards(
        Policy.load(checkpoint),
        [p for _, p in prompts],
        ToolCallReward(),
        samples=scale.eval_samples,
        max_new_tokens=MAX_TOKENS,
        seed=7,
    )
    by_intent: dict[str, list[float]] = {}
    for (intent, _), rewards in zip(prompts, scores, strict=True):
        by_intent.setdefault(intent, []).extend(rewards)
    return by_intent


def _means(by_intent: dict[str, list[float]]) -> dict[str, float]:
    """The mean reward over the new wave ("all"), per intent, and on the usual requests."""
    every = [r for intent, rewards in by_intent.items() if intent != "usual" for r in rewards]
    return {"all": statistics.mean(every), **{i: statistics.mean(r) for i, r in by_intent.items()}}


def judge_agreements(judges: dict[str, Path], records: list[dict], scale: Scale) -> list[dict]:
    """Each judge's agreement with the explicit ratings of recorded answers to one request."""
    from evolution.rl.data.judge import RelativeJudge, answer_groups, measure_agreement, trusted
    from evolution.rl.policy import Policy
    from evolution.rl.settings import JudgeSettings

    groups = answer_groups(records, size=4, limit=scale.judge_groups)
    gate = JudgeSettings(base_url="-", model="-")
    found = []
    for name, checkpoint in judges.items():
        began, replies = time.perf_counter(), []
        agreed = measure_agreement(RelativeJudge(_greedy(Policy.load(checkpoint), replies)), groups)
        ok, why = trusted(agreed, gate.min_agreement, gate.min_pairs)
        row = {
            "judge": name,
            "groups": len(groups),
            "pairs": agreed.pairs,
            "agreement": None if agreed.rate is None else round(agreed.rate, 3),
            "unparsed": agreed.unparsed,
            "trusted": ok,
            "why": why,
            "seconds": round(time.perf_counter() - began, 1),
            "first_reply": replies[0][:120] if replies else None,
        }
        print(json.dumps(row))
        found.append(row)
    return found


def _greedy(policy: Any, replies: list[str]) -> Any:
    """A local model as a judge's `complete`: its greedy reply to one user message (each
    kept in `replies`)."""

    def complete(text: str) -> str:
        ids = policy.prompt_ids([{"role": "user", "content": text}])
        (reply,) = policy.sample(ids, 1, max_new_tokens=64, temperature=0.0)
        replies.append(reply.text)
        return reply.text

    return complete


def run(scale: Scale, seeds: list[int], algorithms: list[str], scarce: int, judges: bool) -> dict:
    import torch

    from evolution.rl.data import call_text, correction_pairs
    from evolution.rl.policy import Policy
    from evolution.rl.samples import record_prompts
    from evolution.rl.sft import Demonstration
    from evoplane.demo import world
    from evoplane.demo.runner import MODEL_DIR
    from registry import create_db_engine, training_records, transaction, upgrade
    from tests.registry.helpers import seed_world

    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp(prefix="trainers-"))
    engine = create_db_engine(f"sqlite:///{work / 'registry.db'}")
    upgrade(engine)
    seed_world(engine, tenants=(TENANT,), agent=AGENT)
    intents = [i.value for i in world.intents_of(TENANT)]
    rare = frozenset(random.Random(1).sample(intents, scarce))
    began = time.perf_counter()
    traffic = record_traffic(engine, Policy.load(MODEL_DIR), scale.sessions, seed=1, scarce=rare)
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
    data = {
        "prompts": len(prompts),
        "references": _by_tool(p.reference["name"] for p in usable),
        "references_on_the_request": _by_tool(
            p.reference["name"] for p in usable if not _answered_before(p)
        ),
        "pairs": {s: sum(p.source == s for p in pairs) for s in ("retry", "correction")},
        "pairs_by_tool": _by_tool(_called(p.chosen) for p in pairs),
        **traffic,
    }
    print("data:", json.dumps(data))
    evaluation = held_out()
    before = held_out_rewards(MODEL_DIR, evaluation, scale)
    print("held-out reward before:", _rounded(_means(before)))
    rows, teachers = [], {}
    for algorithm in algorithms:
        framework, kind = algorithm.split("-")
        examples = {
            "grpo": usable,
            "sft": demos,
            "dpo": pairs,
            "rpo": pairs,
            "mix": [*(p for p in pairs if p.prompt.reference is None), *demos],
            "distill": prompts,
        }[kind]
        trainer = train_ours if framework == "ours" else train_trl
        for seed in seeds:
            teacher = None
            if kind == "distill" and seed not in teachers:
                teachers[seed], _ = train_ours("sft", demos, work / f"teacher-{seed}", scale, seed)
            if kind == "distill":
                teacher = teachers[seed]
            out = work / f"{algorithm}-{seed}"
            began = time.perf_counter()
            checkpoint, tokens = trainer(kind, examples, out, scale, seed, teacher)
            seconds = time.perf_counter() - began
            if algorithm == "ours-sft":
                teachers.setdefault(seed, checkpoint)
            after = held_out_rewards(checkpoint, evaluation, scale)
            row = {
                "algorithm": algorithm,
                "seed": seed,
                "seconds": round(seconds, 1),
                "tokens_per_s": round(tokens / seconds, 1),
                "after": _rounded(_means(after)),
                "samples": {i: len(r) for i, r in after.items()},
            }
            print(json.dumps(row))
            rows.append(row)
    judged = []
    if judges:
        if seeds[0] not in teachers:
            teachers[seeds[0]], _ = train_ours(
                "sft", demos, work / f"teacher-{seeds[0]}", scale, seeds[0]
            )
        judged = judge_agreements(
            {
                "tiny, untrained": MODEL_DIR,
                f"tiny after our SFT (seed {seeds[0]})": teachers[seeds[0]],
            },
            records,
            scale,
        )
    return {"data": data, "before": _rounded(_means(before)), "rows": rows, "judges": judged}


def _by_tool(names: Any) -> dict[str, int]:
    counted: dict[str, int] = {}
    for name in names:
        counted[name] = counted.get(name, 0) + 1
    return counted


def _answered_before(prompt: Any) -> bool:
    """Whether the prompt holds an earlier answer (a correction's), not the request alone."""
    return any(m.get("role") == "assistant" for m in prompt.messages)


def _called(text: str) -> str:
    from atdp.tool_text import parse_tool_calls

    _, calls = parse_tool_calls(text)
    return calls[0]["function"]["name"] if calls else "-"


def _rounded(values: dict) -> dict:
    return {k: round(v, 3) for k, v in values.items()}


def table(result: dict) -> str:
    """Means over the seeds (and the seeds' range), one row each."""
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
            *(_change([r["after"][i] - before[i] for r in mine]) for i in intents),
            f"{statistics.mean(r['seconds'] for r in mine):.0f}",
            f"{statistics.mean(r['tokens_per_s'] for r in mine):.0f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _change(changes: list[float]) -> str:
    """The mean change over the seeds and, with more than one, their range."""
    mean = f"{statistics.mean(changes):+.2f}"
    return mean if len(changes) < 2 else f"{mean} ({min(changes):+.2f}..{max(changes):+.2f})"


def judge_table(judges: list[dict]) -> str:
    lines = [
        "| judge | answer groups | pairs | agreement | replies without scores | trusted |",
        "|---|---|---|---|---|---|",
    ]
    for j in judges:
        agreement = "-" if j["agreement"] is None else f"{j['agreement']:.2f}"
        lines.append(
            f"| {j['judge']} | {j['groups']} | {j['pairs']} | {agreement} | {j['unparsed']} | "
            f"{'yes' if j['trusted'] else 'no'}: {j['why']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small run that checks the path")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument(
        "--algorithms", default="ours-grpo,ours-sft,trl-sft,ours-dpo,trl-dpo,ours-distill"
    )
    parser.add_argument("--scarce", type=int, default=0, help="intents the model mostly fails")
    parser.add_argument("--judges", action="store_true", help="measure the relative judges")
    parser.add_argument(
        "--lr", type=float, default=LEARNING_RATE, help="the learning rate of every algorithm"
    )
    parser.add_argument("--write", action="store_true", help="append to benchmarks/RESULTS.md")
    args = parser.parse_args()
    scale = replace(QUICK if args.quick else FULL, learning_rate=args.lr)
    seeds = [int(s) for s in args.seeds.split(",")]
    result = run(scale, seeds, args.algorithms.split(","), args.scarce, args.judges)
    text = table(result)
    if result["judges"]:
        text += "\n\n" + judge_table(result["judges"])
    print(text)
    if args.write:
        host = f"{platform.machine()}, {len(__import__('os').sched_getaffinity(0))} cores"
        day = datetime.now(UTC).date().isoformat()
        flags = " ".join(
            f
            for f in (
                "--quick" if args.quick else "",
                f"--seeds {args.seeds}",
                f"--algorithms {args.algorithms}",
                f"--scarce {args.scarce}" if args.scarce else "",
                "--judges" if args.judges else "",
            )
            if f
        )
        with (ROOT / "benchmarks" / "RESULTS.md").open("a") as results:
            results.write(
                f"\n## Trainers side by side ({day}, {host})\n\n"
                f"`python -m benchmarks.trainers {flags}`: {scale}; data "
                f"{json.dumps(result['data'])}. Per intent: the mean change of the held-out "
                "reward over the seeds (their range).\n\n"
                f"{text}\n"
            )


if __name__ == "__main__":
    main()
