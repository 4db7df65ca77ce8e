"""Serving cores side by side: the same pass-through, and the gateway itself, on the HTTP
servers a Python gateway can run on, interleaved in one run (E19 deliverable 1).

    make install EXTRAS=test,dspy,train,docs,bench   # granian, measured beside uvicorn
    .venv/bin/python -m benchmarks.serving_core [--requests 100] [--clients 1,8]
        [--rounds 14] [--no-gateway] [--write]

Every target forwards the same chat-completions body to one loopback upstream (fixed 20 ms,
its own process) and returns its answer; a closed loop of clients sends each target in turn
(`benchmarks.gateway_latency`'s balanced rounds), so each meets the load of the same moments.
Printed per concurrency: the latency each adds to the direct call (p50, p99) and its CPU per
request (server process and children). The targets:

- `uvicorn`: the bare pass-through (`benchmarks.passthrough`, raw ASGI, aiohttp to the
  upstream) on the gateway's stack today: uvicorn with httptools and uvloop;
- `uvicorn-coalescing`: the same with the gateway's own HTTP protocol
  (`proxy.http_protocol`, head and first body bytes in one write);
- `granian-asgi`: the same ASGI app on granian (Rust HTTP, the app on uvloop);
- `granian-rsgi`: the same pass-through on granian's own interface (RSGI), which skips
  ASGI's message dicts;
- `gateway` and `gateway-granian`: `evoplane gateway` (uvicorn, the coalescing protocol)
  and the same gateway app on granian's ASGI (`evoplane.cli.gateway_cmd:worker_app`), each
  with capture on into a PostgreSQL schema of its own.

The bare servers say what the HTTP layer alone costs (the floor under any Python gateway);
the two gateways say what changing it saves the product.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import aiohttp

from benchmarks.gateway_latency import (
    BODY,
    Measured,
    Target,
    closed_loop,
    closed_loop_round,
    paired_difference,
    prepare_registry,
    start_gateway,
    wait_for,
)
from benchmarks.passthrough import passthrough_app, upstream_connector
from benchmarks.support import ROOT, drop_schema, start_upstream

UPSTREAM_ENV = "SERVING_CORE_UPSTREAM"


def asgi_app():
    """The bare pass-through as an ASGI app, its upstream from the environment (granian
    imports the app by name in its worker process)."""
    return passthrough_app(os.environ[UPSTREAM_ENV].rstrip("/"))


class RsgiPassthrough:
    """The bare pass-through on granian's RSGI interface: the request body read whole,
    POSTed to the upstream with a pooled aiohttp session, the answer sent back unchanged."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.session: aiohttp.ClientSession | None = None

    async def __rsgi__(self, scope, protocol) -> None:
        if self.session is None:
            self.session = aiohttp.ClientSession(connector=upstream_connector())
        body = await protocol()
        async with self.session.post(
            self.upstream + scope.path.removeprefix("/v1"),
            data=body,
            headers={"Content-Type": "application/json"},
        ) as answer:
            payload = await answer.read()
            status = answer.status
        protocol.response_bytes(status, [("content-type", "application/json")], payload)

    def __rsgi_del__(self, loop) -> None:
        if self.session is not None:
            loop.run_until_complete(self.session.close())


def rsgi_app() -> RsgiPassthrough:
    """The RSGI pass-through, its upstream from the environment."""
    return RsgiPassthrough(os.environ[UPSTREAM_ENV])


def granian_command(target: str, interface: str, port: int) -> list[str]:
    """granian serving `target` (a factory) on `port`, one worker, uvloop, no logs."""
    granian = shutil.which("granian", path=str(Path(sys.executable).parent))
    if granian is None:
        raise SystemExit("granian is not installed: make install EXTRAS=test,dspy,train,docs,bench")
    return [
        granian,
        "--interface",
        interface,
        "--factory",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
        "--loop",
        "uvloop",
        "--http",
        "1",
        "--no-ws",
        "--log-level",
        "warning",
        "--no-access-log",
        target,
    ]


def start_bare(kind: str, upstream_url: str, port: int) -> subprocess.Popen:
    """The bare pass-through on `kind`'s server, up and answering."""
    env = {**os.environ, UPSTREAM_ENV: upstream_url}
    here = "benchmarks.serving_core"
    if kind == "uvicorn":
        command = [sys.executable, "-m", "benchmarks.passthrough"]
        command += ["--upstream", upstream_url, "--port", str(port)]
    elif kind == "uvicorn-coalescing":
        command = [sys.executable, "-m", here, "--serve-coalescing", str(port)]
    elif kind == "granian-asgi":
        command = granian_command(f"{here}:asgi_app", "asgi", port)
    else:
        command = granian_command(f"{here}:rsgi_app", "rsgi", port)
    process = subprocess.Popen(command, cwd=ROOT, env=env)
    wait_for(f"http://127.0.0.1:{port}/v1/models")
    return process


def serve_coalescing(port: int) -> None:
    """The bare pass-through on uvicorn with the gateway's coalescing HTTP protocol."""
    import uvicorn

    from proxy.http_protocol import CoalescingHttpProtocol

    uvicorn.run(
        asgi_app(),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        http=CoalescingHttpProtocol,
    )


def start_gateway_on_granian(url: str, data_dir: Path, port: int) -> subprocess.Popen:
    """The gateway's app (`worker_app`, built from the EVOPLANE_* settings) on granian."""
    env = {
        **os.environ,
        "EVOPLANE_DATABASE_URL": url,
        "EVOPLANE_DATA_DIR": str(data_dir),
        "EVOPLANE_GATEWAY_PORT": str(port),
    }
    command = granian_command("evoplane.cli.gateway_cmd:worker_app", "asgi", port)
    process = subprocess.Popen(command, cwd=ROOT, env=env)
    wait_for(f"http://127.0.0.1:{port}/healthz")
    return process


BARE = ("uvicorn", "uvicorn-coalescing", "granian-asgi", "granian-rsgi")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100, help="per client, target, round")
    # Seven targets (direct, four bare servers, two gateways): balanced orders need a multiple of
    # twice that (benchmarks.gateway_latency.balanced_orders); five with --no-gateway: ten.
    parser.add_argument("--rounds", type=int, default=14)
    parser.add_argument("--clients", default="1,8", help="comma-separated concurrency levels")
    parser.add_argument("--no-gateway", action="store_true", help="the bare servers only")
    parser.add_argument("--write", action="store_true", help="append to benchmarks/RESULTS.md")
    parser.add_argument("--serve-coalescing", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_coalescing:
        serve_coalescing(args.serve_coalescing)
        return

    upstream, upstream_url = start_upstream(20)
    port = 19400 + os.getpid() % 400
    processes: list[subprocess.Popen] = []
    schemas: list[str] = []
    targets = {"direct": Target(f"{upstream_url}/chat/completions", {})}
    data = tempfile.TemporaryDirectory(prefix="serving-core-")  # the gateways' spools
    try:
        for offset, kind in enumerate(BARE, start=1):
            process = start_bare(kind, upstream_url, port + offset)
            processes.append(process)
            targets[kind] = Target(
                f"http://127.0.0.1:{port + offset}/v1/chat/completions", {}, process
            )
        if not args.no_gateway:
            for offset, (name, start) in enumerate(
                [("gateway", start_gateway), ("gateway-granian", start_gateway_on_granian)],
                start=len(BARE) + 1,
            ):
                url, schema, key = prepare_registry(upstream_url)
                schemas.append(schema)
                process = start(url, Path(data.name) / name, port + offset)
                processes.append(process)
                targets[name] = Target(
                    f"http://127.0.0.1:{port + offset}/v1/chat/completions",
                    {"Authorization": f"Bearer {key}"},
                    process,
                )
        for name, target in targets.items():  # warm caches and connection pools
            if name != "direct":
                asyncio.run(closed_loop(target.url, target.headers, 4, 20))
        rows = []
        for clients in [int(c) for c in args.clients.split(",") if c]:
            per_client = max(10, args.requests // clients)
            row = closed_loop_round(targets, clients, per_client, args.rounds, 10, BODY)
            rows.append((clients, row))
            print(f"{clients} clients:")
            for line in _rows(row):
                print("  " + line)
    finally:
        for process in processes:
            process.terminate()
            process.wait(30)
        upstream.stdin.close()
        upstream.wait(10)
        for schema in schemas:
            drop_schema(schema)
        data.cleanup()
    if args.write:
        with (ROOT / "benchmarks" / "RESULTS.md").open("a") as results:
            results.write("\n".join(_report(args, rows)) + "\n")


def _added(row: dict[str, Measured]):
    """Each target's figures against the direct call: (name, added p50, the paired
    difference of round p50s with its 90% interval, added p99, CPU ms a request)."""
    direct = row["direct"]
    for name, measured in row.items():
        if name != "direct":
            yield (
                name,
                measured.p50 - direct.p50,
                paired_difference(measured.round_p50s, direct.round_p50s),
                measured.p99 - direct.p99,
                measured.cpu + measured.drain_cpu,
            )


def _rows(row: dict[str, Measured]) -> list[str]:
    """One line per target, as `_added` gives its figures."""
    direct = row["direct"]
    lines = [f"{'direct':20s} p50 {direct.p50:6.2f} ms  p99 {direct.p99:6.2f} ms"]
    for name, p50, (added, low, high), p99, cpu in _added(row):
        lines.append(
            f"{name:20s} adds p50 {p50:5.2f} ms "
            f"(paired {added:5.2f}, 90% {low:5.2f}..{high:5.2f})  "
            f"p99 {p99:6.2f} ms  CPU {cpu:5.2f} ms/request"
        )
    return lines


def _report(args, rows) -> list[str]:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    lines = [
        f"\n### Serving cores side by side ({now}, {commit}, {platform.machine()}, "
        f"{os.cpu_count()} cores)\n",
        f"`python -m benchmarks.serving_core --requests {args.requests} --rounds "
        f"{args.rounds} --clients {args.clients}`: added latency against the direct call "
        "(pooled p50; paired: median of the rounds' differences, 90% bootstrap interval), "
        "CPU per request of the server and its children.\n",
        "| clients | target | added p50 ms | paired (90%) | added p99 ms | CPU ms/req |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for clients, row in rows:
        for name, p50, (added, low, high), p99, cpu in _added(row):
            lines.append(
                f"| {clients} | {name} | {p50:.2f} | {added:.2f} ({low:.2f}..{high:.2f}) | "
                f"{p99:.2f} | {cpu:.2f} |"
            )
    return lines


if __name__ == "__main__":
    main()
