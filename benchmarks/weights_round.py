"""The demo's weights round retrained offline: each training plan on the round's own window,
measured on the prompts its canary served.

    nice -n 10 .venv/bin/python -m benchmarks.weights_round --registry DATA/registry.db
        [--algorithms sft,dpo,mix,grpo] [--seeds 0,1,2] [--samples 4]

DATA is a finished demo's data directory (`evoplane bench demo --keep-data` keeps one per
run; `evoplane demo` leaves `.evoplane/`). The window is what the weights evolution read
(its `window_since` up to when it began), read through the training export as the job reads
it, split as the job splits it; each algorithm trains from the demo model with the demo's
training settings (`evoplane/demo/scale.py`). The measurement is what a canary would see:
the first prompt of every session served during the round's canary (either version), as
the gateway recorded it (overlays applied), sampled as the bot samples (temperature 1),
scored by the strict tool reward against the tool its ticket needs, weighted by how often
the canary saw it; per intent, for the new wave's terse requests and the usual ones apart.

Algorithms: `dpo` runs the product's DPO plan (`evolution.rl.plan`: corrections' pairs
beside the rewarded calls, or SFT where every pair is a retry), `rpo` the plan before it
(RPO on every pair alone), `sft` SFT on the rewarded calls, `grpo` GRPO on the prompts.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import sqlite3
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

AGENT = "support-bot"


@dataclasses.dataclass(frozen=True)
class Round:
    """The weights evolution of one demo run: its window and its canary's period."""

    since: datetime
    began: datetime
    canary_from: datetime
    canary_to: datetime
    algorithm: str | None


def weights_round(registry: Path) -> Round:
    """The first weights evolution the registry holds, read off its rows."""
    db = sqlite3.connect(registry)
    found = [
        row
        for row in db.execute(
            "select options, created_at, candidate_version_id, decision from evolution "
            "where action = 'weights' order by created_at"
        )
    ]
    if not found:
        raise SystemExit(f"{registry} holds no weights evolution")
    options, created, candidate, decision = found[0]
    moves = [
        (alias, version, _time(at))
        for alias, version, at in db.execute(
            "select alias, version_id, at from alias_event where alias = 'canary' order by id"
        )
    ]
    start = next(at for alias, version, at in moves if version == candidate)
    end = next((at for _, version, at in moves if version is None and at > start), None)
    return Round(
        since=_time(json.loads(options)["window_since"]),
        began=_time(created),
        canary_from=start,
        canary_to=end or datetime.max.replace(tzinfo=UTC),
        algorithm=(json.loads(decision) or {}).get("algorithm"),
    )


def _time(text: str) -> datetime:
    found = datetime.fromisoformat(text)
    return found if found.tzinfo else found.replace(tzinfo=UTC)


def _started(record: dict[str, Any]) -> datetime:
    return _time(min(event["created_at"] for event in record["events"]))


def read_records(registry: Path, round_: Round) -> tuple[list[dict], list[dict]]:
    """(the window's training records, the canary period's records)."""
    from evoplane.demo import world
    from registry import create_db_engine, training_records, transaction

    engine = create_db_engine(f"sqlite:///{registry}")
    with transaction(engine) as session:
        records = list(training_records(session, AGENT, list(world.COMPANIES), since=round_.since))
    engine.dispose()
    window = [r for r in records if _started(r) < round_.began]
    canary = [r for r in records if round_.canary_from <= _started(r) <= round_.canary_to]
    return window, canary


def canary_prompts(records: list[dict]) -> dict[tuple, tuple[Any, int]]:
    """Each distinct first prompt of the canary's sessions, keyed by (intent, "new" or
    "usual" phrasing, messages, tenant), with the tool its ticket needs as its reference,
    and how many sessions the canary saw open with it."""
    from evolution.rl.samples import record_prompts
    from evoplane.demo import world

    tools = {intent.value: tool for intent, tool in world.TOOL_OF.items()}
    hard = {text for phrasings in world.HARD.values() for text in phrasings}
    seen: dict[tuple, tuple[Any, int]] = {}
    for record in records:
        prompts = record_prompts(record)
        if not prompts or record["task_type"] not in tools:
            continue
        first = prompts[0]
        words = "new" if first.messages[-1].get("content") in hard else "usual"
        key = (record["task_type"], words, json.dumps(first.messages), first.tenant)
        prompt, count = seen.get(key, (None, 0))
        if prompt is None:
            reference = {"name": tools[record["task_type"]], "arguments": {}}
            prompt = dataclasses.replace(first, reference=reference)
        seen[key] = (prompt, count + 1)
    return seen


def measure(checkpoint: Path, seen: dict[tuple, tuple[Any, int]], samples: int) -> dict:
    """The canary-weighted right-tool rate: overall, new wave, usual, and per intent."""
    from evolution.rl.evaluation import prompt_rewards
    from evolution.rl.policy import Policy
    from evolution.rl.rewards import ToolCallReward

    keys = list(seen)
    prompts = [seen[key][0] for key in keys]
    scores = prompt_rewards(
        Policy.load(checkpoint), prompts, ToolCallReward(), samples=samples, seed=123
    )
    sums: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    for key, rewards in zip(keys, scores, strict=True):
        intent, words = key[0], key[1]
        mean, count = statistics.mean(rewards), seen[key][1]
        for name in ("all", words, f"{intent} ({words})"):
            sums[name][0] += mean * count
            sums[name][1] += count
    return {name: round(total / count, 3) for name, (total, count) in sorted(sums.items())}


def plan_for(algorithm: str, window: list[dict], settings: Any):
    """(the plan, the settings' train config for it) of `algorithm` on the window."""
    from evolution.rl.plan import TrainingPlan, training_plan
    from evolution.rl.samples import record_prompts, split_holdout

    prompts = [p for record in window for p in record_prompts(record)]
    usable = [p for p in prompts if p.reference is not None]
    train, held = split_holdout(usable, settings.holdout, seed=settings.seed)
    unreferenced = [p for p in prompts if p.reference is None]
    if algorithm == "rpo":  # before the plan weighed its pairs: RPO on every pair alone
        from evolution.rl.data import correction_pairs

        hidden = {p.event_id for p in held}
        pairs = [p for p in correction_pairs(window) if p.prompt.event_id not in hidden]
        plan = TrainingPlan("rpo", "", {"pairs": len(pairs)}, train, pairs, "dpo")
    else:
        chosen = None if algorithm == "grpo" else algorithm
        plan = training_plan(chosen, "", window, train, held, unreferenced=unreferenced)
    return plan, settings.train_config(algorithm=plan.trains_as)


def run(
    registry: Path,
    algorithms: list[str],
    seeds: list[int],
    samples: int,
    training: dict[str, Any] | None = None,
) -> dict:
    from evolution.rl.backends.torch import use_threads
    from evolution.rl.rewards import ToolCallReward
    from evolution.rl.settings import TrainingSettings
    from evoplane.demo.runner import MODEL_DIR
    from evoplane.demo.scale import FULL

    round_ = weights_round(registry)
    window, canary = read_records(registry, round_)
    seen = canary_prompts(canary)
    print(
        f"window: {len(window)} trajectories; canary: {len(canary)} sessions, "
        f"{len(seen)} distinct first prompts; "
        f"the decision chose {round_.algorithm}",
        flush=True,
    )
    use_threads(None)
    before = measure(MODEL_DIR, seen, samples)
    print("before:", json.dumps(before), flush=True)
    rows = []
    out = Path(registry).parent / "weights-round"
    for algorithm in algorithms:
        for seed in seeds:
            settings = TrainingSettings(**{**FULL.training, **(training or {}), "seed": seed})
            plan, config = plan_for(algorithm, window, settings)
            began = time.perf_counter()
            result = plan.run(
                MODEL_DIR,
                out / f"{algorithm}-{seed}-{time.time_ns()}",
                ToolCallReward(format_credit=settings.format_credit),
                config,
            )
            row = {
                "algorithm": algorithm,
                "trained": plan.algorithm,
                "data": plan.counts,
                "seed": seed,
                "seconds": round(time.perf_counter() - began, 1),
                "after": measure(result.checkpoint, seen, samples),
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
    return {"before": before, "rows": rows}


def table(result: dict) -> str:
    """One row per algorithm: the mean over the seeds (and their range)."""
    columns = ["all", "new", "usual"]
    lines = [
        "| algorithm (trained as, data) | canary prompts right (seeds) | new wave | usual | "
        "train s |",
        "|---|---|---|---|---|",
        "| before | " + " | ".join(f"{result['before'][c]:.3f}" for c in columns) + " | |",
    ]
    for algorithm in dict.fromkeys(r["algorithm"] for r in result["rows"]):
        mine = [r for r in result["rows"] if r["algorithm"] == algorithm]
        first = mine[0]
        data = ", ".join(f"{n} {kind}" for kind, n in first["data"].items())
        cells = [
            f"{algorithm} ({first['trained']}, {data})",
            *(_spread([r["after"][c] for r in mine]) for c in columns),
            f"{statistics.mean(r['seconds'] for r in mine):.0f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _spread(values: list[float]) -> str:
    mean = f"{statistics.mean(values):.3f}"
    return mean if len(values) < 2 else f"{mean} ({min(values):.2f}..{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--registry", type=Path, required=True)
    parser.add_argument("--algorithms", default="dpo,rpo,sft,grpo")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--samples", type=int, default=4, help="samples of each prompt")
    parser.add_argument(
        "--training",
        type=json.loads,
        default={},
        help="training settings over the demo's, as JSON (e.g. '{\"steps\": 60}')",
    )
    args = parser.parse_args()
    result = run(
        args.registry,
        args.algorithms.split(","),
        [int(s) for s in args.seeds.split(",")],
        args.samples,
        args.training,
    )
    print(table(result))


if __name__ == "__main__":
    main()
