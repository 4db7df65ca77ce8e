"""Local engine throughput: the demo model answering the demo's own requests, one client at
a time (the baseline) and several at once, interleaved in one run.

    .venv/bin/python -m benchmarks.local_engine [--clients 1,2,4,8] [--requests 48]
        [--rounds 3] [--threads 1] [--models 1] [--compare CHECKOUT] [--write]

Each load runs in a fresh process that loads `evoplane/demo/model` into a `LocalEngine`
(torch threads as the demo's gateway sets them) and sends it the same list of requests from
closed-loop clients: a shop's system message, a customer's ticket, the shop's tools, the
bot's temperature and token limit, a seed per request; with --models 2, clients alternate
between two checkpoints served at once (a stable and its canary). It prints, per client
count, the tokens per second, the requests per second and the p50 latency of a request, with
the ratio of tokens per second to the first client count's. --compare runs the same loads on
another checkout's engine (a `git worktree` of an older commit, say) in the same rounds, for
a before/after on one machine. --write appends the results to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

# Not benchmarks.support's: a load runs this file as a script beside another checkout.
ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "evoplane" / "demo" / "model"


def requests(count: int, seed: int = 0) -> list[dict]:
    """`count` chat requests as the demo's bot sends them, for random shops and tickets."""
    from evoplane.demo import world
    from evoplane.demo.agent import MAX_TOKENS
    from evoplane.demo.tools import Platform
    from evoplane.demo.world import HARD, NORMAL

    rng = random.Random(seed)
    bodies = []
    for index in range(count):
        tenant = rng.choice(sorted(world.COMPANIES))
        intent = rng.choice(world.intents_of(tenant))
        if intent is world.Intent.QUESTION:
            text, tools = rng.choice(list(world.FACTS.values())).questions[0], None
        else:
            text = rng.choice((HARD if rng.random() < 0.3 else NORMAL)[intent])
            tools = Platform().specs(world.tools_of(tenant))
        messages = [
            {"role": "system", "content": world.agent_system(tenant)},
            {"role": "user", "content": text},
        ]
        bodies.append(
            {
                "model": "support-bot",
                "messages": messages,
                **({"tools": tools} if tools else {}),
                "temperature": 1.0,
                "seed": index,
                "max_tokens": MAX_TOKENS,
            }
        )
    return bodies


# --- one load, in its own process -------------------------------------------------------


async def _serve(bodies: list[dict], clients: int, threads: int, models: int) -> dict:
    import shutil

    import torch

    from proxy.engines.local import LocalEngine

    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as scratch:
        # Copies of the model as other checkpoints, as a stable and its canary are: each
        # gets an engine (and a batch) of its own; the clients take turns among them.
        paths = [MODEL] + [
            shutil.copytree(MODEL, Path(scratch) / f"model-{i}") for i in range(1, models)
        ]
        engines = [LocalEngine(path, max_concurrency=max(clients, 4)) for path in paths]
        for engine in engines:  # loaded before the clock starts
            await engine.complete({**bodies[0], "max_tokens": 2}, model=None, timeout=120)
        queue = list(reversed(bodies))
        latencies: list[float] = []
        tokens = 0

        async def client(engine: LocalEngine) -> None:
            nonlocal tokens
            while queue:
                body = queue.pop()
                started = time.perf_counter()
                answer = await engine.complete(body, model=None, timeout=300)
                latencies.append(time.perf_counter() - started)
                tokens += answer["usage"]["completion_tokens"]

        started = time.perf_counter()
        await asyncio.gather(*(client(engines[i % models]) for i in range(clients)))
        wall = time.perf_counter() - started
    return {
        "tokens_per_s": tokens / wall,
        "requests_per_s": len(bodies) / wall,
        "p50_ms": statistics.median(latencies) * 1000,
    }


def _one_load(checkout: Path, bodies_file: Path, clients: int, threads: int, models: int) -> dict:
    """Run one load on `checkout`'s engine in a fresh process (this file as a script, with
    only that checkout on the path); its figures."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(
        [
            sys.executable,
            __file__,
            "--load",
            str(bodies_file),
            *map(str, (clients, threads, models)),
        ],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"the load on {checkout} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- the run ----------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default="1,2,4,8")
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--models",
        type=int,
        default=1,
        help="checkpoints served at once (2: a stable and its canary)",
    )
    parser.add_argument("--compare", type=Path, help="another checkout whose engine to run too")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    clients = [int(c) for c in args.clients.split(",")]
    checkouts = {"this": ROOT}
    if args.compare:
        if not (args.compare / "proxy" / "engines" / "local.py").is_file():
            raise SystemExit(f"{args.compare} is not an Evoplane checkout (no proxy/engines)")
        checkouts["compare"] = args.compare.resolve()
    figures: dict[tuple[str, int], list[dict]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        bodies_file = Path(scratch) / "bodies.json"
        bodies_file.write_text(json.dumps(requests(args.requests)))
        for round_ in range(args.rounds):
            for name, checkout in checkouts.items():
                for count in clients:
                    figure = _one_load(checkout, bodies_file, count, args.threads, args.models)
                    figures.setdefault((name, count), []).append(figure)
                    print(
                        f"round {round_ + 1} {name} {count} clients: "
                        f"{figure['tokens_per_s']:.0f} tokens/s, p50 {figure['p50_ms']:.0f} ms",
                        file=sys.stderr,
                    )
    lines = _section(args, checkouts, clients, figures)
    print("\n".join(lines))
    if args.write:
        with (ROOT / "benchmarks" / "RESULTS.md").open("a") as results:
            results.write("\n" + "\n".join(lines) + "\n")


def _section(args, checkouts, clients, figures) -> list[str]:
    def median(name: str, count: int, key: str) -> float:
        return statistics.median(f[key] for f in figures[(name, count)])

    day = datetime.now(UTC).date().isoformat()
    command = " ".join(["python -m benchmarks.local_engine", *sys.argv[1:]]).replace(" --write", "")
    lines = [
        f"## Local engine throughput ({day}, {platform.machine()}, {os.cpu_count()} cores)",
        "",
        f"`{command}`: the demo model (`LocalEngine`, {args.threads} torch thread(s); "
        f"{args.models} checkpoint(s) served at once, the clients taking turns among them) "
        f"answering {args.requests} of the demo bot's requests from closed-loop clients, "
        f"each load in a fresh process; medians of {args.rounds} interleaved rounds.",
        "",
        "| engine | clients | tokens/s | requests/s | p50 ms "
        f"| tokens/s vs {clients[0]} client(s) |",
        "|---|---|---|---|---|---|",
    ]
    for name in checkouts:
        base = median(name, clients[0], "tokens_per_s")
        for count in clients:
            rate = median(name, count, "tokens_per_s")
            lines.append(
                f"| {name} | {count} | {rate:.0f} | {median(name, count, 'requests_per_s'):.2f} "
                f"| {median(name, count, 'p50_ms'):.0f} | {rate / base:.2f}x |"
            )
    if "compare" in checkouts:
        speed = "tokens_per_s"
        ratios = [
            f"{count} clients {median('this', count, speed) / median('compare', count, speed):.2f}x"
            for count in clients
        ]
        lines += ["", "this / compare, tokens/s: " + ", ".join(ratios)]
    return lines


if __name__ == "__main__":
    if sys.argv[1:2] == ["--load"]:
        bodies_path, *numbers = sys.argv[2:6]
        loaded_bodies = json.loads(Path(bodies_path).read_text())
        figures_of_load = asyncio.run(_serve(loaded_bodies, *map(int, numbers)))
        print(json.dumps(figures_of_load))
    else:
        main()
