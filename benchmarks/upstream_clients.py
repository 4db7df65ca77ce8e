"""Upstream HTTP clients: per-request latency and client CPU of a pooled, keep-alive httpx
AsyncClient against an aiohttp ClientSession (and the OpenAICompatEngine built on the winner),
interleaved in one run against the scripted loopback upstream in its own process.

    .venv/bin/python -m benchmarks.upstream_clients [--rounds 5] [--write]

Prints p50/p99 latency and client CPU per request for each client, upstream delay (0 and
20 ms) and concurrency (1 and 8), with ratios against httpx, the baseline; --write appends
the table to benchmarks/RESULTS.md. This decides the client of proxy/engines/openai_compat.py.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import httpx

from benchmarks.support import start_upstream
from proxy.engines import OpenAICompatEngine

BODY = {
    "model": "scripted-model",
    "messages": [
        {"role": "system", "content": "You are a support agent for Acme. " * 8},
        {"role": "user", "content": "Where is my order 000042? It was due Monday, please check."},
    ],
    "max_tokens": 64,
}
Post = Callable[[], Awaitable[dict]]


async def clients(base_url: str, connections: int) -> dict[str, tuple[Post, Callable]]:
    """Each contender as a `post()` returning parsed JSON, and its close function."""
    url = f"{base_url}/chat/completions"
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    via_httpx = httpx.AsyncClient(limits=limits, timeout=30)
    via_aiohttp = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=connections))
    engine = OpenAICompatEngine(base_url, connect_timeout=5, max_connections=connections)

    async def post_httpx() -> dict:
        response = await via_httpx.post(url, json=BODY)
        response.raise_for_status()
        return response.json()

    async def post_aiohttp() -> dict:
        async with via_aiohttp.post(url, json=BODY) as response:
            response.raise_for_status()
            return await response.json()

    async def post_engine() -> dict:
        return await engine.complete(BODY, model=None, timeout=30)

    return {
        "httpx": (post_httpx, via_httpx.aclose),
        "aiohttp": (post_aiohttp, via_aiohttp.close),
        "engine": (post_engine, engine.aclose),
    }


async def measure(post: Post, requests: int, concurrency: int) -> tuple[list[float], float]:
    """Latencies (ms) of `requests` posts from `concurrency` workers, and client CPU µs each."""
    latencies: list[float] = []

    async def worker(count: int) -> None:
        for _ in range(count):
            start = time.perf_counter()
            await post()
            latencies.append((time.perf_counter() - start) * 1000)

    cpu = time.process_time()
    await asyncio.gather(*(worker(requests // concurrency) for _ in range(concurrency)))
    return latencies, (time.process_time() - cpu) * 1e6 / len(latencies)


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


async def run(rounds: int, scale: float) -> list[dict]:
    settings = [(0, 1, 400), (0, 8, 1600), (20, 1, 100), (20, 8, 400)]  # delay, workers, requests
    upstreams = {delay: start_upstream(delay) for delay in {0, 20}}
    rows = []
    try:
        for delay, concurrency, requests in settings:
            contenders = await clients(upstreams[delay][1], connections=concurrency)
            for post, _ in contenders.values():  # open the pools before timing
                await asyncio.gather(*(post() for _ in range(concurrency)))
            samples = {name: ([], []) for name in contenders}
            for round_ in range(rounds):  # interleaved and alternating, so drift hits all
                names = list(contenders) if round_ % 2 == 0 else list(contenders)[::-1]
                for name in names:
                    latencies, cpu = await measure(
                        contenders[name][0], int(requests * scale), concurrency
                    )
                    samples[name][0].extend(latencies)
                    samples[name][1].append(cpu)
            for _, close in contenders.values():
                await close()
            row = {"delay": delay, "concurrency": concurrency}
            for name, (latencies, cpus) in samples.items():
                row[name] = (
                    percentile(latencies, 50),
                    percentile(latencies, 99),
                    statistics.median(cpus),
                )
            rows.append(row)
            print_row(row)
    finally:
        for process, _ in upstreams.values():
            process.communicate("")
    return rows


def print_row(row: dict) -> None:
    parts = [f"delay {row['delay']:2d} ms  x{row['concurrency']}"]
    for name in ("httpx", "aiohttp", "engine"):
        p50, p99, cpu = row[name]
        parts.append(f"{name} p50 {p50:6.2f} p99 {p99:6.2f} ms cpu {cpu:5.0f} µs")
    base, fast = row["httpx"], row["aiohttp"]
    parts.append(f"aiohttp/httpx cpu {fast[2] / base[2]:.2f}")
    print("   ".join(parts))


def write(rows: list[dict], rounds: int, scale: float) -> None:
    lines = [
        f"\n## Upstream HTTP clients ({datetime.now(UTC):%Y-%m-%d}, {platform.machine()}, "
        f"{os.cpu_count()} cores)\n",
        f"`python -m benchmarks.upstream_clients --rounds {rounds} --scale {scale}`: "
        f"{rounds} interleaved rounds (order alternating) against the scripted loopback "
        "upstream in its own process; pooled keep-alive clients, one non-streaming chat "
        "completion per request. Latency is per request (p50 / p99 over all rounds); CPU is "
        "the client process's CPU time per request (median of rounds). Baseline: httpx "
        "AsyncClient; `engine` is OpenAICompatEngine.complete on the chosen client.\n",
        "| upstream delay | concurrency | httpx p50 / p99 (ms) | aiohttp p50 / p99 (ms) "
        "| engine p50 / p99 (ms) | client CPU µs/request httpx / aiohttp / engine "
        "| aiohttp/httpx p50 | aiohttp/httpx CPU |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        base, fast, engine = row["httpx"], row["aiohttp"], row["engine"]
        lines.append(
            f"| {row['delay']} ms | {row['concurrency']} "
            f"| {base[0]:.2f} / {base[1]:.2f} | {fast[0]:.2f} / {fast[1]:.2f} "
            f"| {engine[0]:.2f} / {engine[1]:.2f} "
            f"| {base[2]:.0f} / {fast[2]:.0f} / {engine[2]:.0f} "
            f"| {fast[0] / base[0]:.2f}x | {fast[2] / base[2]:.2f}x |"
        )
    with (Path(__file__).parent / "RESULTS.md").open("a") as results:
        results.write("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply request counts")
    parser.add_argument("--write", action="store_true", help="append the results to RESULTS.md")
    args = parser.parse_args()
    import uvloop  # the gateway runs under uvicorn[standard], hence on uvloop

    rows = uvloop.run(run(args.rounds, args.scale))
    if args.write:
        write(rows, args.rounds, args.scale)


if __name__ == "__main__":
    main()
