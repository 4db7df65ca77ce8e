"""Registry write throughput: batched, idempotent `insert_events` against one event per
transaction, on SQLite and PostgreSQL, interleaved in one run.

    .venv/bin/python -m benchmarks.registry_writes [--events 3000] [--batch 200]

Prints events/s per mode and the ratio against the per-event baseline, and appends the
table to benchmarks/RESULTS.md with --write. This is the ceiling the gateway's batched
capture writer builds on.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa

from atdp import (
    ChatMessage,
    Event,
    EventMetadata,
    MessageAction,
    ModelRef,
    Observation,
    ReplayInfo,
    Trajectory,
    VersionSpec,
    new_id,
    utcnow,
)
from benchmarks.support import POSTGRES, drop_schema, fresh_schema_url
from registry import (
    create_agent,
    create_db_engine,
    create_tenant,
    insert_events,
    record_trajectory,
    transaction,
    upgrade,
)


def make_events(trajectory: Trajectory, count: int) -> list[Event]:
    """Events shaped like real llm_call captures: a few messages, tokens and logprobs."""
    return [
        Event(
            id=new_id(),
            trajectory_id=trajectory.id,
            seq=seq,
            kind="llm_call",
            created_at=utcnow(),
            observation=Observation(
                messages=[
                    ChatMessage(role="system", content="You are a support agent for Acme. " * 4),
                    ChatMessage(
                        role="user", content=f"Where is my order {seq:06d}? It was due Monday."
                    ),
                ]
            ),
            action=MessageAction(
                content="Let me look that up for you.",
                token_ids=list(range(24)),
                logprobs=[-0.05] * 24,
            ),
            metadata=EventMetadata(tenant="acme", session=trajectory.session, latency_ms=412.0),
            replay=ReplayInfo(replay_class="deterministic"),
        )
        for seq in range(count)
    ]


def setup(url: str) -> tuple[sa.Engine, str | None]:
    schema = None
    if url.startswith("postgresql"):
        url, schema = fresh_schema_url()
    engine = create_db_engine(url)
    upgrade(engine)
    with transaction(engine) as session:
        create_tenant(session, "acme")
        create_agent(session, "bot", VersionSpec(model=ModelRef(engine="openai")), author="bench")
    return engine, schema


def fresh_trajectory(engine: sa.Engine) -> Trajectory:
    trajectory = Trajectory(
        id=new_id(), tenant="acme", agent="bot", session=uuid.uuid4().hex, started_at=utcnow()
    )
    with transaction(engine) as session:
        record_trajectory(session, trajectory)
    return trajectory


def per_event(engine: sa.Engine, events: list[Event]) -> float:
    start = time.perf_counter()
    for event in events:
        with transaction(engine) as session:
            insert_events(session, [event])
    return len(events) / (time.perf_counter() - start)


def batched(engine: sa.Engine, events: list[Event], batch: int) -> float:
    start = time.perf_counter()
    for offset in range(0, len(events), batch):
        with transaction(engine) as session:
            insert_events(session, events[offset : offset + batch])
    return len(events) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="append the results to RESULTS.md")
    args = parser.parse_args()

    import tempfile

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, url in [("sqlite", f"sqlite:///{tmp}/bench.db"), ("postgresql", POSTGRES)]:
            engine, schema = setup(url)
            baseline, batches = [], []
            for _ in range(args.rounds):  # interleaved, so drift on a shared machine hits both
                baseline.append(
                    per_event(engine, make_events(fresh_trajectory(engine), args.events // 5))
                )
                batches.append(
                    batched(engine, make_events(fresh_trajectory(engine), args.events), args.batch)
                )
            engine.dispose()
            if schema:
                drop_schema(schema)
            base, fast = statistics.median(baseline), statistics.median(batches)
            rows.append((name, base, fast, fast / base))
            print(
                f"{name:10s} per-event txn {base:8.0f} ev/s   "
                f"batch of {args.batch} {fast:8.0f} ev/s   x{fast / base:5.1f}"
            )

    if args.write:
        lines = [
            f"\n## Registry writes ({datetime.now(UTC):%Y-%m-%d}, {platform.machine()}, "
            f"{__import__('os').cpu_count()} cores)\n",
            f"`python -m benchmarks.registry_writes --events {args.events} --batch {args.batch} "
            f"--rounds {args.rounds}`: median of {args.rounds} interleaved rounds; the baseline "
            "writes one event per transaction.\n",
            "| backend | per-event transaction (ev/s) | batched insert_events (ev/s) | ratio |",
            "|---|---|---|---|",
            *[f"| {n} | {b:,.0f} | {f:,.0f} | {r:.1f}x |" for n, b, f, r in rows],
        ]
        with (Path(__file__).parent / "RESULTS.md").open("a") as results:
            results.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
