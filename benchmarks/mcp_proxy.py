"""What the gateway's MCP proxy adds to a tool call, side by side with a direct call.

    python -m benchmarks.mcp_proxy [--calls 300] [--rounds 5] [--write]

A real MCP server (tests/support/mcp_upstream.py) in its own process, the gateway (`evoplane
gateway`, registry on PostgreSQL) with it registered as an agent's MCP server, and the bare
SDK proxy (benchmarks/mcp_passthrough.py, the floor for a proxy whose calls go through the
SDK's server and client; the gateway's 2026-07-28 calls go through neither). One SDK
client per side calls the same read-only tool, one call at a time, the sides interleaved
round by round so a noisy machine affects all three alike. Each gateway call is captured
(a governed tool_call event, written by the capture drain).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from benchmarks.gateway_latency import pct, prepare_registry, start_gateway, wait_for
from benchmarks.support import ROOT, drop_schema, start_announcing
from registry import add_mcp_server, create_db_engine, transaction
from tests.conftest import free_port

SIDES = ("direct", "sdk floor", "gateway")


def start_mcp_upstream() -> tuple[subprocess.Popen, str]:
    return start_announcing("tests.support.mcp_upstream", "--http")


def start_floor(upstream: str, port: int) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.mcp_passthrough", "--upstream", upstream]
        + ["--port", str(port)],
        cwd=ROOT,
    )
    wait_for(f"http://127.0.0.1:{port}/mcp")
    return process


def client(url: str, headers: dict[str, str] | None = None) -> Client:
    http = httpx2.AsyncClient(headers=headers or {}, timeout=30)
    return Client(streamable_http_client(url, http_client=http), cache=None)


async def measure(urls: dict[str, tuple[str, dict]], calls: int, rounds: int) -> dict:
    """Per side, every call's latency (ms). The sides take turns call by call (in a rotating
    order), so a load that comes and goes on a shared host weighs on all three alike; call
    `i` of each side forms a triple, compared pairwise."""
    latencies: dict[str, list[float]] = {side: [] for side in urls}
    async with AsyncExitStack() as stack:
        clients = {
            side: await stack.enter_async_context(client(url, headers))
            for side, (url, headers) in urls.items()
        }
        for opened in clients.values():  # warm up: connections, the gateway's caches
            for i in range(20):
                await opened.call_tool("lookup_order", {"order_id": f"W-{i}"})
        sides = list(clients)
        for i in range(calls * rounds):
            shift = i % len(sides)
            for side in sides[shift:] + sides[:shift]:
                started = time.perf_counter()
                await clients[side].call_tool("lookup_order", {"order_id": f"A-{i}"})
                latencies[side].append((time.perf_counter() - started) * 1000)
    return latencies


def added(latencies: dict[str, list[float]], side: str) -> tuple[float, float, float]:
    """The median of `side`'s call-by-call excess over the direct call, with a 90% bootstrap
    interval."""
    deltas = [s - d for s, d in zip(latencies[side], latencies["direct"], strict=True)]
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(deltas, k=len(deltas))) for _ in range(400))
    return statistics.median(deltas), medians[20], medians[379]


def report(args, latencies: dict[str, list[float]]) -> list[str]:
    load = os.getloadavg()[0]
    lines = [
        f"## MCP proxy, added latency a tool call ({datetime.now(UTC):%Y-%m-%d}, "
        f"{platform.machine()}, {os.cpu_count()} cores, load {load:.1f})",
        "",
        f"`python -m benchmarks.mcp_proxy --calls {args.calls} --rounds {args.rounds}`: one SDK "
        "client per side calling a read-only tool of a real MCP server, one call at a time, the "
        "sides taking turns call by call; the gateway's registry on PostgreSQL, each call "
        "captured.",
        "",
        "| side | p50 (ms) | p90 (ms) | p99 (ms) | added to the direct call, median of the "
        "paired differences (90% interval), ms |",
        "|---|---|---|---|---|",
    ]
    for side in SIDES:
        cells = " | ".join(f"{pct(latencies[side], q):.2f}" for q in (0.5, 0.9, 0.99))
        extra = "-"
        if side != "direct":
            median, low, high = added(latencies, side)
            extra = f"{median:+.2f} ({low:+.2f} to {high:+.2f})"
        lines.append(f"| {side} | {cells} | {extra} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per side and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="append to benchmarks/RESULTS.md")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    processes: list[subprocess.Popen] = []
    upstream_process, upstream = start_mcp_upstream()
    url, schema, key = prepare_registry("http://127.0.0.1:9/v1")
    try:
        engine = create_db_engine(url)
        with transaction(engine) as session:
            add_mcp_server(session, "support-bot", "orders", url=upstream, tenants=["acme"])
        engine.dispose()
        gateway_port, floor_port = free_port(), free_port()
        with tempfile.TemporaryDirectory() as data:
            processes.append(start_gateway(url, Path(data), gateway_port))
            processes.append(start_floor(upstream, floor_port))
            urls = {
                "direct": (upstream, {}),
                "sdk floor": (f"http://127.0.0.1:{floor_port}/mcp", {}),
                "gateway": (
                    f"http://127.0.0.1:{gateway_port}/mcp/orders",
                    {"Authorization": f"Bearer {key}", "X-Session-Id": "bench"},
                ),
            }
            latencies = asyncio.run(measure(urls, args.calls, args.rounds))
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)
        upstream_process.stdin.close()
        upstream_process.wait(timeout=30)
        drop_schema(schema)
    lines = report(args, latencies)
    print("\n".join(lines))
    if args.write:
        with (ROOT / "benchmarks" / "RESULTS.md").open("a") as results:
            results.write("\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
