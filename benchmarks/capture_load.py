"""Capture under sustained load: gateways writing to one PostgreSQL for minutes on end.

    python -m benchmarks.capture_load --seconds 600 --gateways 2 --clients 32 [--rate R]

Starts `--gateways` gateway processes on one port (`evoplane gateway --workers N`) over a
fresh PostgreSQL schema and a scripted upstream (no delay), and keeps `--clients` clients
sending multi-turn sessions (each turn: the agent's new message and the model's answer,
two events) as fast as the gateways answer, for `--seconds`. Every few seconds it samples
the events committed, the bytes waiting in the gateways' spools and the resident memory of
the gateway processes (their capture drains included). At the end it waits for the
spools to drain and checks every acknowledged call's llm_call event is stored, once, and
nothing else is.

Prints the sustained request and event rates, the largest spool, memory at the start and
the end, and lost or extra events. What it shows: whether capture keeps up (the spool
stays bounded: it drains faster than it fills), and that it holds no more memory after
minutes than after seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import sqlalchemy as sa

from benchmarks.gateway_latency import body_for, descendants, prepare_registry, wait_for
from benchmarks.support import drop_schema, start_upstream
from registry import create_db_engine


def start_gateways(url: str, data: Path, port: int, workers: int) -> subprocess.Popen:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("EVOPLANE_")},
        "EVOPLANE_DATABASE_URL": url,
        "EVOPLANE_DATA_DIR": str(data),
    }
    process = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "evoplane"),
            "gateway",
            "--port",
            str(port),
            "--workers",
            str(workers),
        ],
        env=env,
        start_new_session=True,
    )
    wait_for(f"http://127.0.0.1:{port}/healthz")
    return process


def rss_mib(pid: int) -> float:
    """Resident memory of a process and all it started (MiB)."""
    total = 0
    for process in [pid, *descendants(pid)]:
        try:
            for line in Path(f"/proc/{process}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def spool_bytes(data: Path) -> int:
    return sum(p.stat().st_size for p in (data / "spool").rglob("*.jsonl") if p.exists())


async def load(
    url: str, key: str, clients: int, seconds: float, turns: int, rate: float | None
) -> list[str]:
    """Sessions of `turns` turns from `clients` clients until `seconds` have passed, at
    most `rate` requests a second in all (None: as fast as they are answered); the event
    ids the gateways acknowledged."""
    acked: list[str] = []
    stop = time.monotonic() + seconds
    next_due = time.monotonic()

    async def paced() -> None:
        nonlocal next_due
        if rate:
            now = time.monotonic()
            due, next_due = max(now, next_due), max(now, next_due) + 1 / rate
            await asyncio.sleep(due - now)

    headers = {"Authorization": f"Bearer {key}"}
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def client(index: int) -> None:
            number = 0
            while time.monotonic() < stop:
                sid, messages = f"c{index}-{number}", []
                for turn in range(turns):
                    asked = body_for(index * 10_000_000 + number * turns + turn)
                    await paced()
                    if not messages:
                        messages.append(asked["messages"][0])
                    messages.append(asked["messages"][1])
                    async with session.post(
                        f"{url}/chat/completions",
                        json={**asked, "messages": messages},
                        headers={**headers, "X-Session-Id": sid},
                    ) as reply:
                        answer = await reply.json()
                        assert reply.status == 200, answer
                        acked.append(reply.headers["x-evoplane-event-id"])
                    messages.append(answer["choices"][0]["message"])
                number += 1

        await asyncio.gather(*(client(i) for i in range(clients)))
    return acked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--gateways", type=int, default=2, help="gateway processes on one port")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--turns", type=int, default=3, help="turns per session")
    parser.add_argument(
        "--rate", type=float, default=None, help="requests per second in all (default: flat out)"
    )
    parser.add_argument("--sample", type=float, default=5.0, help="seconds between samples")
    args = parser.parse_args()

    upstream, upstream_url = start_upstream(0)
    url, schema, key = prepare_registry(upstream_url)
    engine = create_db_engine(url)
    port = 8800 + os.getpid() % 500
    with tempfile.TemporaryDirectory() as data_dir:
        data = Path(data_dir)
        gateways = start_gateways(url, data, port, args.gateways)
        try:
            samples: list[tuple[float, int, int, float]] = []
            started = time.monotonic()

            async def run() -> list[str]:
                def committed() -> int:
                    with engine.connect() as connection:
                        query = sa.text("SELECT count(*) FROM event")
                        return connection.execute(query).scalar_one()

                async def sample() -> None:
                    while True:
                        count = await asyncio.to_thread(committed)
                        at = time.monotonic() - started
                        samples.append((at, count, spool_bytes(data), rss_mib(gateways.pid)))
                        await asyncio.sleep(args.sample)

                sampler = asyncio.create_task(sample())
                try:
                    return await load(
                        f"http://127.0.0.1:{port}/v1",
                        key,
                        args.clients,
                        args.seconds,
                        args.turns,
                        args.rate,
                    )
                finally:
                    sampler.cancel()

            acked = asyncio.run(run())
            elapsed = time.monotonic() - started
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:  # the drains catch up
                with engine.connect() as connection:
                    query = sa.text("SELECT count(*) FROM event WHERE kind = 'llm_call'")
                    if connection.execute(query).scalar_one() >= len(acked):
                        break
                time.sleep(0.5)
            drained_after = time.monotonic() - started - elapsed
        finally:
            gateways.send_signal(signal.SIGTERM)
            gateways.wait(120)
        with engine.connect() as connection:
            stored = set(
                str(i)
                for i in connection.execute(
                    sa.text("SELECT id FROM event WHERE kind = 'llm_call'")
                ).scalars()
            )
            events = connection.execute(sa.text("SELECT count(*) FROM event")).scalar_one()
    engine.dispose()
    drop_schema(schema)
    upstream.stdin.close()
    upstream.wait()

    acked_set = set(acked)
    steady = [s for s in samples if s[0] >= min(10.0, args.seconds / 3)]
    rate = (
        (steady[-1][1] - steady[0][1]) / (steady[-1][0] - steady[0][0])
        if len(steady) > 1
        else float("nan")
    )
    print(f"{args.gateways} gateway processes, {args.clients} clients, {elapsed:.0f} s")
    print(f"  requests: {len(acked) / elapsed:,.0f}/s acknowledged ({len(acked):,} in all)")
    print(f"  events committed while loaded: {rate:,.0f}/s ({events:,} in all)")
    print(
        f"  spool: largest {max(s[2] for s in samples) / 2**20:.1f} MiB; every acknowledged "
        f"call committed {drained_after:.1f} s after the load stopped"
    )
    print(
        f"  gateway memory (with drains): {samples[0][3]:.0f} MiB at start, "
        f"{samples[len(samples) // 2][3]:.0f} mid-run, {samples[-1][3]:.0f} at the end"
    )
    print(
        f"  lost (acknowledged, not stored): {len(acked_set - stored)}; "
        f"duplicated acknowledgements: {len(acked) - len(acked_set)}; "
        f"llm_calls stored but never acknowledged: {len(stored - acked_set)}"
    )
    for at, count, spooled, memory in samples:
        print(
            f"    {at:6.1f} s  {count:>10,} events  spool {spooled / 2**20:6.2f} MiB  "
            f"rss {memory:6.0f} MiB"
        )


if __name__ == "__main__":
    main()
