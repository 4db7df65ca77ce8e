"""What skills add to the gateway's per-request overlays: `apply_overlays` on a four-turn
request for a version without skills (the baseline) and with 10, 100 and 1000 skills,
interleaved rounds, each skill set's index built once (as the gateway caches it).

    .venv/bin/python -m benchmarks.overlays [--calls 2000] [--rounds 5]

Prints the median microseconds a call per set and how many skills a request got. Nothing
is asserted.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from atdp import Harness, ModelRef, Skill, SkillSet, VersionSpec
from runtime.version.overlays import apply_overlays

_WORDS = (
    "account mailbox printer badge laptop invoice refund order shipment password vpn "
    "ticket welcome archive backup contract payroll holiday expense travel"
).split()


def version(skills: int, rng: random.Random) -> VersionSpec:
    items = [
        Skill(
            name=f"procedure {i}",
            description=" ".join(rng.sample(_WORDS, 4)),
            steps=[f"step {n}: {' '.join(rng.sample(_WORDS, 6))}" for n in range(5)],
            task_types=[f"task-{i % 20}"],
        )
        for i in range(skills)
    ]
    return VersionSpec(
        model=ModelRef(engine="openai", model="m"),
        harness=Harness(instructions="You are the assistant."),
        skills=SkillSet(items=items),
    )


def request(rng: random.Random) -> dict:
    turns = [" ".join(rng.sample(_WORDS, 8)), "ok, next", "go on", "and then?"]
    messages = []
    for turn in turns:
        messages += [{"role": "user", "content": turn}, {"role": "assistant", "content": "done"}]
    return {"messages": messages[:-1], "metadata": {"task_type": "task-3"}}


def measure(spec: VersionSpec, bodies: list[dict]) -> tuple[float, float]:
    """(median microseconds a call, skills injected a request on average)."""
    times, injected = [], 0
    for body in bodies:
        started = time.perf_counter()
        overlaid = apply_overlays(body, spec, tenant="acme")
        times.append((time.perf_counter() - started) * 1e6)
        injected += len(overlaid.skills)
    return statistics.median(times), injected / len(bodies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(7)
    sets = {size: version(size, rng) for size in (0, 10, 100, 1000)}
    bodies = [request(rng) for _ in range(args.calls)]
    for spec in sets.values():
        apply_overlays(bodies[0], spec, tenant="acme")  # the index, built once
    results: dict[int, list[float]] = {size: [] for size in sets}
    injected: dict[int, float] = {}
    for _ in range(args.rounds):
        for size, spec in sets.items():
            median, injected[size] = measure(spec, bodies)
            results[size].append(median)
    baseline = statistics.median(results[0])
    print("| skills in the version | median µs a call | vs no skills | skills injected a request |")
    print("|---|---|---|---|")
    for size, medians in results.items():
        value = statistics.median(medians)
        print(f"| {size} | {value:.1f} | {value - baseline:+.1f} | {injected[size]:.2f} |")


if __name__ == "__main__":
    main()
