"""Gateway overhead: the same loopback upstream (fixed 20 ms) called directly, through a
bare pass-through proxy and through the gateway (capture on, PostgreSQL registry),
interleaved in one run.

    .venv/bin/python -m benchmarks.gateway_latency [--requests 200] [--clients 1,8,32]
        [--compare CHECKOUT] [--write]

Prints, per concurrency: p50/p99 of direct calls and the latency the bare proxy and the
gateway add to them (the bare proxy is the floor any Python hop on this machine pays), and
the CPU per request of each server (the gateway's with its capture drain, a child process);
then the open-loop request rate at which the gateway's added p50 passes 10 ms; then the
capture rate the gateway sustains into PostgreSQL under a burst, and whether every
submitted record was committed. Upstream, bare proxy, gateway and this load generator each
run in their own process. Each client's requests carry a user message of their own and a
new session (one no server has seen) every ten requests, or --session-length. --compare
runs the gateway of another checkout beside this one, for a before/after in one run.
--protocols responses,messages also sends the same requests to the gateway's Responses and
Messages APIs (translated to chat completions inside it), interleaved with the rest. --otel
runs a second gateway of this checkout with OpenTelemetry spans on, exported to an OTLP
collector in its own process (tests/support/otlp_collector.py), interleaved with the first.
--mixed sends chat completions, the --protocols and the --compare and --otel gateways
together, request by request (each client takes the targets in turn), so that each meets
the same load: sent apart, one after another, each meets the load of its own moment, and
on a small shared host their differences then swing between runs by more than they are.
--write appends the results to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import httpx

from atdp import Harness, ModelRef, VersionSpec
from benchmarks.support import (
    ROOT,
    drop_schema,
    fresh_schema_url,
    start_collector,
    start_upstream,
    stop_collector,
)
from registry import (
    create_agent,
    create_api_key,
    create_db_engine,
    create_tenant,
    grant_agent,
    transaction,
    upgrade,
)

BODY = {
    "model": "support-bot",
    "messages": [
        {"role": "system", "content": "You are a support agent for Acme. " * 8},
        {"role": "user", "content": "Where is my order 000042? It was due Monday, please check."},
    ],
    "max_tokens": 64,
}


def with_tools(count: int) -> dict:
    """BODY offering `count` tools, as an agent's request does (the same ones every time)."""
    if not count:
        return BODY
    tools = [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "description": f"Look up record kind {i} of an order.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "order_id": {"type": "string", "description": "The order number."},
                        "detail": {"type": "string", "enum": ["short", "full"]},
                    },
                    "required": ["order_id"],
                },
            },
        }
        for i in range(count)
    ]
    return {**BODY, "tools": tools}


def body_for(number: int, body: dict = BODY) -> dict:
    """`body` with a user message of its own, so no request repeats another's text (and the
    answer, which echoes it, differs too): only the system prompt recurs, as in real traffic."""
    question = f"Where is my order {number:06d}? It was due Monday, please check."
    return {**body, "messages": [body["messages"][0], {"role": "user", "content": question}]}


def as_responses(body: dict) -> dict:
    """A chat-completions benchmark body as the same request to the Responses API."""
    system, user = body["messages"]
    shaped = {
        "model": body["model"],
        "instructions": system["content"],
        "input": user["content"],
        "max_output_tokens": body["max_tokens"],
    }
    if body.get("tools"):
        shaped["tools"] = [{"type": "function", **t["function"]} for t in body["tools"]]
    return shaped


def as_messages(body: dict) -> dict:
    """A chat-completions benchmark body as the same request to Anthropic's Messages API."""
    system, user = body["messages"]
    shaped = {
        "model": body["model"],
        "system": system["content"],
        "messages": [{"role": "user", "content": user["content"]}],
        "max_tokens": body["max_tokens"],
    }
    if body.get("tools"):
        shaped["tools"] = [
            {
                "name": t["function"]["name"],
                "description": t["function"]["description"],
                "input_schema": t["function"]["parameters"],
            }
            for t in body["tools"]
        ]
    return shaped


PROTOCOLS = {
    # chat completions again, as its own target: the noise floor of a comparison (A/A)
    "chat": ("/v1/chat/completions", None),
    "responses": ("/v1/responses", as_responses),
    # the same, asking the gateway not to store the response (`store: false`)
    "responses-unstored": ("/v1/responses", lambda body: {**as_responses(body), "store": False}),
    "messages": ("/v1/messages", as_messages),
}


def prepare_registry(upstream_url: str) -> tuple[str, str, str]:
    """A fresh PostgreSQL schema with one tenant, one agent and a key."""
    url, schema = fresh_schema_url()
    engine = create_db_engine(url)
    upgrade(engine)
    spec = VersionSpec(
        model=ModelRef(engine="openai", base_url=upstream_url, model="scripted-model"),
        harness=Harness(instructions="Be brief."),
    )
    with transaction(engine) as session:
        create_tenant(session, "acme")
        create_agent(session, "support-bot", spec, author="bench")
        grant_agent(session, "acme", "support-bot")
        key = create_api_key(session, "acme").key
    engine.dispose()
    return url, schema, key


def start_gateway(
    url: str,
    data_dir: Path,
    port: int,
    source: Path | None = None,
    settings: dict[str, str] | None = None,
    workers: int = 1,
) -> subprocess.Popen:
    """`evoplane gateway` on `port`; with `source`, the code of that checkout instead;
    `settings`: more EVOPLANE_* variables; `workers`: its `--workers`."""
    env = {
        **os.environ,
        "EVOPLANE_DATABASE_URL": url,
        "EVOPLANE_DATA_DIR": str(data_dir),
        "EVOPLANE_GATEWAY_PORT": str(port),
        **(settings or {}),
    }
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(source), env.get("PYTHONPATH")]))
    command = [str(Path(sys.executable).parent / "evoplane"), "gateway"]
    process = subprocess.Popen(
        command + (["--workers", str(workers)] if workers > 1 else []), env=env, cwd=source
    )
    wait_for(f"http://127.0.0.1:{port}/healthz")
    return process


def start_passthrough(upstream_url: str, port: int) -> subprocess.Popen:
    """The bare pass-through proxy (benchmarks/passthrough.py): the floor for a Python hop."""
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.passthrough", "--upstream", upstream_url]
        + ["--port", str(port)],
        cwd=ROOT,
    )
    wait_for(f"http://127.0.0.1:{port}/v1/models")
    return process


def wait_for(url: str, seconds: float = 60) -> None:
    """Until `url` answers at all (any status)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


async def closed_loop(
    url: str,
    headers: dict,
    clients: int,
    per_client: int,
    session_length: int = 10,
    body: dict = BODY,
    shape: Callable[[dict], dict] | None = None,
    own: list[float] | None = None,
) -> list[float]:
    """`clients` concurrent clients, each sending `per_client` requests back to back (ms):
    `mixed_loop` with one target. `own`, when given, gets the gateway's own time of each
    answer that reports one (`Server-Timing`)."""
    target = Target(url, headers, shape=shape)
    sampled = await mixed_loop({"": target}, clients, per_client, session_length, body)
    if own is not None:
        own += sampled[""].own
    return sampled[""].latencies


@dataclass
class Sampled:
    """One target's latencies (ms) in a closed loop, and the gateway's own time of those
    answers that report one (`Server-Timing: gateway`)."""

    latencies: list[float] = field(default_factory=list)
    own: list[float] = field(default_factory=list)


async def mixed_loop(
    targets: dict[str, Target],
    clients: int,
    per_client: int,
    session_length: int = 10,
    body: dict = BODY,
) -> dict[str, Sampled]:
    """`clients` concurrent clients, each sending every target `per_client` requests, the
    targets taken in turn (client i starts at the i-th), so that at any moment the clients
    are sending different targets and every target meets the same load: a comparison of
    targets measured this way is not moved by what changes between one run and the next.

    Each client first opens its connection with one untimed request, as a pooled SDK
    client has, and starts a session no server has seen every `session_length` requests
    it sends a target. A target's `shape` turns each chat-completions body into its
    protocol's request, outside the timed part."""
    sampled = {name: Sampled() for name in targets}
    names = list(targets)
    run = uuid.uuid4().hex[:8]
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def send(target: Target, number: int, sid: str) -> tuple[float, str]:
            request = body_for(number, body)
            payload = target.shape(request) if target.shape else request  # untimed
            started = time.perf_counter()
            async with session.post(
                target.url, json=payload, headers={**target.headers, "X-Session-Id": sid}
            ) as r:
                await r.read()
                assert r.status == 200, f"{target.url}: {r.status} {await r.text()}"
            return (time.perf_counter() - started) * 1000, r.headers.get("Server-Timing", "")

        async def one_client(index: int) -> None:
            await send(targets[names[0]], index * 100_000, f"{run}-{index}-w")  # warm-up
            for step in range(per_client * len(names)):
                name = names[(index + step) % len(names)]
                i = step // len(names)
                latency, timing = await send(
                    targets[name],
                    index * 100_000 + i + 1,
                    f"{run}-{name}-{index}-{i // session_length}",
                )
                sampled[name].latencies.append(latency)
                reported = server_timing(timing).get("gateway")
                if reported is not None:
                    sampled[name].own.append(reported)

        await asyncio.gather(*(one_client(i) for i in range(clients)))
    return sampled


def server_timing(header: str) -> dict[str, float]:
    """{metric: duration in ms} of a `Server-Timing` header (metrics without one left out)."""
    found = {}
    for metric in header.split(","):
        name, *params = (part.strip() for part in metric.split(";"))
        for param in params:
            key, _, value = param.partition("=")
            if key == "dur" and name:
                found[name] = float(value)
    return found


async def open_loop(
    url: str, headers: dict, rate: float, seconds: float, body: dict = BODY
) -> list[float]:
    """Requests due at a fixed rate regardless of completions (ms latencies).

    Each latency runs from when its request was due, not from when this process got round
    to sending it: past the rate the machine sustains, the load generator itself falls
    behind, and timing from the send would hide exactly the queueing being measured
    (coordinated omission).
    """
    latencies: list[float] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one(i: int, due: float) -> None:
            async with session.post(
                url, json=body_for(i, body), headers={**headers, "X-Session-Id": f"o{i // 10}"}
            ) as r:
                await r.read()
            latencies.append((time.perf_counter() - due) * 1000)

        tasks, start = [], time.perf_counter()
        for i in range(int(rate * seconds)):
            due = start + i / rate
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            tasks.append(asyncio.create_task(one(i, due)))
        await asyncio.gather(*tasks)
    return latencies


def writer_throughput(url: str, events: int) -> tuple[float, int]:
    """Events per second the capture writer commits, fed as fast as it accepts them."""
    import tempfile

    from atdp import (
        ChatMessage,
        Event,
        EventMetadata,
        MessageAction,
        Observation,
        ReplayInfo,
        Trajectory,
        new_id,
        utcnow,
    )
    from proxy.capture import CaptureRecord, CaptureWriter, Spool

    engine = create_db_engine(url)
    with tempfile.TemporaryDirectory() as spool_dir:
        writer = CaptureWriter(engine, Spool(Path(spool_dir)))
        writer.start()
        batches = []
        for start in range(0, events, 50):  # a session of 50 llm calls per trajectory
            trajectory = Trajectory(
                id=new_id(),
                tenant="acme",
                agent="support-bot",
                session=uuid.uuid4().hex,
                started_at=utcnow(),
            )
            batch = [CaptureRecord("trajectory", trajectory)]
            for seq in range(min(50, events - start)):
                batch.append(
                    CaptureRecord(
                        "event",
                        Event(
                            id=new_id(),
                            trajectory_id=trajectory.id,
                            seq=seq,
                            kind="llm_call",
                            created_at=utcnow(),
                            observation=Observation(
                                messages=[
                                    ChatMessage(
                                        role="system", content=BODY["messages"][0]["content"]
                                    ),
                                    ChatMessage(
                                        role="user", content=f"Where is my order {seq:06d}?"
                                    ),
                                ]
                            ),
                            action=MessageAction(
                                content="Let me check.",
                                token_ids=list(range(16)),
                                logprobs=[-0.1] * 16,
                            ),
                            metadata=EventMetadata(
                                tenant="acme", session=trajectory.session, latency_ms=20.0
                            ),
                            replay=ReplayInfo(replay_class="deterministic"),
                        ),
                    )
                )
            batches.append(batch)
        for batch in batches:
            _ = [
                record.document for record in batch
            ]  # serialised before timing, as the gateway does
        started = time.perf_counter()
        for batch in batches:
            writer.submit(batch)
        writer.flush(300)
        elapsed = time.perf_counter() - started
        lost = writer.pending + writer.stats.rejected
        writer.stop()
    engine.dispose()
    return events / elapsed, lost


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """The processes `pid` started, and theirs (the gateway's capture drain and its zygote)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            child = int(stat.parent.name)
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents.setdefault(parent, []).append(child)
    found, frontier = [], [pid]
    while frontier:
        children = parents.get(frontier.pop(), [])
        found += children
        frontier += children
    return found


def tree_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds of a server process and of all its descendants, so far."""
    helpers = 0.0
    for child in descendants(pid):
        try:
            helpers += cpu_seconds(child)
        except OSError:
            continue
    return cpu_seconds(pid), helpers


def servers_cpu(pids: Collection[int]) -> tuple[float, float]:
    """`tree_cpu` summed over server processes: theirs, and their descendants'."""
    trees = [tree_cpu(pid) for pid in pids]
    return sum(own for own, _ in trees), sum(helpers for _, helpers in trees)


def balanced_orders(count: int) -> list[list[int]]:
    """Orders of `count` targets, one per round, in which every target runs first equally
    often and follows every other target equally often (a Williams design): a target's
    capture still being committed, or a cache it warmed, then weighs on no one target more
    than another. (Rotating one order does not do this: each target keeps its neighbour.)"""
    first = [0]
    for step in range(1, count):
        first.append((step + 1) // 2 if step % 2 else count - step // 2)
    orders = [[(index + shift) % count for index in first] for shift in range(count)]
    if count % 2:  # an odd count needs each order reversed too
        orders += [order[::-1] for order in orders]
    return orders


def settle(pid: int, quiet_s: float = 0.1, limit_s: float = 5.0) -> None:
    """Wait until a server and its children (the capture drain) use no CPU for `quiet_s`,
    or `limit_s` has passed: what one target submitted is committed before the next runs."""
    deadline = time.monotonic() + limit_s
    last = sum(tree_cpu(pid))
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = sum(tree_cpu(pid))
        if now == last:
            return
        last = now


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Target:
    """Where one side of the comparison is served, and the process serving it (if any)."""

    url: str
    headers: dict[str, str]
    process: subprocess.Popen | None = None
    shape: Callable[[dict], dict] | None = None  # chat-completions body -> this protocol's


@dataclass
class Measured:
    """One target's figures at one concurrency: latency (ms), CPU per request (ms) of its
    server, of the server's children (a gateway's capture drain) and of PostgreSQL's
    processes while it ran, and each round's own p50; for a gateway, the p50 of the time it
    reports as its own (`Server-Timing: gateway`), in all and in each round."""

    p50: float
    p99: float
    cpu: float
    drain_cpu: float
    database_cpu: float
    round_p50s: list[float]
    own_p50: float | None = None
    round_own_p50s: list[float] | None = None
    in_mix: bool = False  # sent mixed with other targets: the CPU figures are the mix's


def database_cpu() -> float:
    """CPU seconds PostgreSQL's processes (server and backends) have used so far."""
    total = 0.0
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == "postgres":
                total += cpu_seconds(int(comm.parent.name))
        except (OSError, ValueError):
            continue
    return total


def closed_loop_round(
    targets: dict[str, Target],
    clients: int,
    per_client: int,
    rounds: int,
    session_length: int,
    body: dict,
    mixed: Collection[str] = (),
) -> dict[str, Measured]:
    """Each target's figures, the targets interleaved in balanced orders
    (`balanced_orders`), each after the servers have settled; the targets named in `mixed`
    sent together, request by request (`mixed_loop`), as one of the interleaved parts,
    their CPU per request then the mix's."""
    runs: dict[str, list[float]] = {name: [] for name in targets}
    round_p50s: dict[str, list[float]] = {name: [] for name in targets}
    owns: dict[str, list[float]] = {name: [] for name in targets}
    round_owns: dict[str, list[float]] = {name: [] for name in targets}
    cpu = {name: [0.0, 0.0, 0.0] for name in targets}
    parts = interleaved_parts(list(targets), mixed)
    orders = balanced_orders(len(parts))
    for round_ in range(rounds):
        for index in orders[round_ % len(orders)]:
            part = {name: targets[name] for name in parts[index]}
            pids = {t.process.pid for t in part.values() if t.process}
            for other in {t.process.pid for t in targets.values() if t.process}:
                settle(other)  # the last part's capture is committed before this one runs
            before = (*servers_cpu(pids), database_cpu())
            sampled = asyncio.run(mixed_loop(part, clients, per_client, session_length, body))
            after = (*servers_cpu(pids), database_cpu())
            for name, got in sampled.items():
                runs[name] += got.latencies
                round_p50s[name].append(pct(got.latencies, 0.5))
                if got.own:
                    owns[name] += got.own
                    round_owns[name].append(pct(got.own, 0.5))
                for kind in range(3):
                    cpu[name][kind] += (after[kind] - before[kind]) / len(part)
    per_request = 1000 / (rounds * clients * per_client)
    return {
        name: Measured(
            pct(runs[name], 0.5),
            pct(runs[name], 0.99),
            *(seconds * per_request for seconds in cpu[name]),
            round_p50s[name],
            pct(owns[name], 0.5) if owns[name] else None,
            round_owns[name] if len(round_owns[name]) == rounds else None,
            name in mixed,
        )
        for name in targets
    }


def interleaved_parts(names: list[str], mixed: Collection[str]) -> list[list[str]]:
    """The parts a round sends one after another: each name alone, except those in
    `mixed`, sent together as one part where the first of them stands."""
    parts: list[list[str]] = []
    together: list[str] = []
    for name in names:
        if name not in mixed:
            parts.append([name])
        elif not together:
            parts.append(together)
            together.append(name)
        else:
            together.append(name)
    return parts


def paired_difference(
    target: list[float], baseline: list[float], resamples: int = 2000
) -> tuple[float, float, float]:
    """The median over rounds of (target's p50 - baseline's p50) in the same round, with a
    90% bootstrap interval: how far apart two targets are, and how sure one run is of it.
    Rounds pair the two under the same conditions, which the pooled p50s do not."""
    differences = [a - b for a, b in zip(target, baseline, strict=True)]
    draw = random.Random(0)
    medians = sorted(
        statistics.median(draw.choices(differences, k=len(differences))) for _ in range(resamples)
    )
    return statistics.median(differences), pct(medians, 0.05), pct(medians, 0.95)


def open_loop_sweep(
    gateways: dict[int, Target], direct: Target, rates: str, body: dict
) -> dict[int, list[tuple[int, float]]]:
    """Each gateway's added p50 at rising open-loop rates (the direct call measured beside
    each), up to the rate where it passes 10 ms (the knee), by worker count."""
    sweeps: dict[int, list[tuple[int, float]]] = {count: [] for count in gateways}
    for rate in [int(r) for r in rates.split(",") if r]:
        going = [c for c in gateways if not sweeps[c] or sweeps[c][-1][1] <= KNEE_MS]
        if not going:
            break
        for count in going:
            d = asyncio.run(open_loop(direct.url, {}, rate, 3, body))
            gateway = gateways[count]
            g = asyncio.run(open_loop(gateway.url, gateway.headers, rate, 3, body))
            added = statistics.median(g) - statistics.median(d)
            sweeps[count].append((rate, added))
            print(f"open loop {rate:4d} req/s, {count} worker(s): added p50 {added:6.2f} ms")
    return sweeps


KNEE_MS = 10.0  # added p50 past which a rate is past the gateway's knee


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--requests", type=int, default=200, help="requests per client and side, per round"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--session-length",
        type=int,
        default=10,
        help="requests per session; a session's first request is routed from the registry",
    )
    parser.add_argument("--capture-events", type=int, default=20_000)
    parser.add_argument(
        "--clients", default="1,8,32", help="comma-separated concurrency levels (closed loop)"
    )
    parser.add_argument("--rates", default="25,50,100,150,200,300,400", help="open-loop req/s")
    parser.add_argument(
        "--compare",
        type=Path,
        metavar="CHECKOUT",
        help="also run the gateway of another checkout (e.g. `git worktree add /tmp/before "
        "HEAD`), interleaved, on its own registry schema: before and after in one run",
    )
    parser.add_argument(
        "--tools",
        type=int,
        default=0,
        help="tools each request offers (an agent's requests carry its tool schemas)",
    )
    parser.add_argument(
        "--protocols",
        default="",
        help="also measure the gateway's other APIs: comma-separated from responses, "
        "responses-unstored, messages; and chat, chat completions again (the noise floor)",
    )
    parser.add_argument(
        "--otel",
        action="store_true",
        help="also run a gateway exporting a span per call to an OTLP collector, interleaved",
    )
    parser.add_argument(
        "--workers",
        default="1",
        help="gateway process counts (`evoplane gateway --workers N`) whose open-loop knee to "
        "find, comma-separated; each count above 1 is its own gateway, swept beside the first",
    )
    parser.add_argument(
        "--mixed",
        action="store_true",
        help="send chat completions, the --protocols and the --compare and --otel gateways "
        "together, request by request, so each meets the same load (their CPU per request "
        "is then the mix's)",
    )
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()

    import tempfile

    body = with_tools(args.tools)
    upstream, upstream_url = start_upstream(20)
    url, schema, key = prepare_registry(upstream_url)
    schemas = [schema]
    port = 18400 + os.getpid() % 500
    lines: list[str] = []
    processes: list[subprocess.Popen] = []
    collector, spans = None, None
    with tempfile.TemporaryDirectory() as data:
        try:
            gateway = start_gateway(url, Path(data) / "gateway", port)
            bare = start_passthrough(upstream_url, port + 1)
            processes += [gateway, bare]
            targets = {
                "direct": Target(f"{upstream_url}/chat/completions", {}),
                "bare": Target(f"http://127.0.0.1:{port + 1}/v1/chat/completions", {}, bare),
                "gateway": Target(
                    f"http://127.0.0.1:{port}/v1/chat/completions",
                    {"Authorization": f"Bearer {key}"},
                    gateway,
                ),
            }
            gateway_url = f"http://127.0.0.1:{port}"
            for protocol in [p for p in args.protocols.split(",") if p]:
                path, shape = PROTOCOLS[protocol]
                headers = {"Authorization": f"Bearer {key}", "anthropic-version": "2023-06-01"}
                targets[protocol] = Target(gateway_url + path, headers, gateway, shape)
            if args.compare:
                other_url, other_schema, other_key = prepare_registry(upstream_url)
                schemas.append(other_schema)
                other = start_gateway(other_url, Path(data) / "other", port + 2, args.compare)
                processes.append(other)
                targets["compared"] = Target(
                    f"http://127.0.0.1:{port + 2}/v1/chat/completions",
                    {"Authorization": f"Bearer {other_key}"},
                    other,
                )
            if args.otel:
                collector, endpoint = start_collector()
                traced_url, traced_schema, traced_key = prepare_registry(upstream_url)
                schemas.append(traced_schema)
                traced = start_gateway(
                    traced_url,
                    Path(data) / "otel",
                    port + 3,
                    settings={"EVOPLANE_OTEL_ENDPOINT": endpoint},
                )
                processes.append(traced)
                targets["otel"] = Target(
                    f"http://127.0.0.1:{port + 3}/v1/chat/completions",
                    {"Authorization": f"Bearer {traced_key}"},
                    traced,
                )
            swept = {1: targets["gateway"]}  # worker count -> its gateway
            for count in sorted({int(w) for w in args.workers.split(",") if w} - {1}):
                many = start_gateway(
                    url, Path(data) / f"workers-{count}", port + 10 + count, workers=count
                )
                processes.append(many)
                swept[count] = Target(
                    f"http://127.0.0.1:{port + 10 + count}/v1/chat/completions",
                    {"Authorization": f"Bearer {key}"},
                    many,
                )
            for name, target in [*targets.items(), *swept.items()]:  # warm caches and pools
                if name != "direct":
                    asyncio.run(
                        closed_loop(
                            target.url, target.headers, 4, 20, body=body, shape=target.shape
                        )
                    )
            mixed = (
                {"gateway", *(PROTOCOLS.keys() | _OTHER_GATEWAYS) & targets.keys()}
                if args.mixed
                else set()
            )
            rows = []
            for clients in [int(c) for c in args.clients.split(",") if c]:
                per_client = max(10, args.requests // clients)
                row = closed_loop_round(
                    targets,
                    clients,
                    per_client,
                    args.rounds,
                    args.session_length,
                    body,
                    mixed,
                )
                rows.append((clients, row))
                print(f"{clients:3d} clients  " + _summary(row))
            sweeps = open_loop_sweep(swept, targets["direct"], args.rates, body)
            capture_rate, capture_lost = writer_throughput(url, events=args.capture_events)
            print(
                f"capture writer: {capture_rate:,.0f} events/s into PostgreSQL, {capture_lost} lost"
            )
            lines = _report(args, rows, sweeps, capture_rate, capture_lost)
        finally:
            for process in processes:
                process.terminate()
                process.wait(30)
            if collector is not None:  # after the gateway, which sends what it has on exit
                spans = stop_collector(collector)
                print(f"OTLP collector: {spans} spans received")
            upstream.stdin.close()
            upstream.wait(10)
            for name in schemas:
                drop_schema(name)
    if spans is not None:
        lines.append(f"\nThe OTLP collector received {spans:,} spans from the OTel gateway.")
    if args.write:
        with (ROOT / "benchmarks" / "RESULTS.md").open("a") as results:
            results.write("\n".join(lines) + "\n")


_LABELS = {
    "bare": "bare proxy",
    "gateway": "gateway",
    "chat": "gateway chat completions again",
    "responses": "gateway /v1/responses",
    "responses-unstored": "gateway /v1/responses, store: false",
    "messages": "gateway /v1/messages",
    "otel": "gateway, OTel spans on",
    "compared": "compared",
}


def _cpu(name: str, measured: Measured) -> str:
    """A target's CPU per request (ms): its server's, and a gateway's drain and PostgreSQL's."""
    if name == "bare":
        return f"{measured.cpu:.2f}"
    mix = "the mix's " if measured.in_mix else ""
    return (
        f"{mix}{measured.cpu:.2f} + drain {measured.drain_cpu:.2f} + db {measured.database_cpu:.2f}"
    )


def _summary(row: dict[str, Measured]) -> str:
    d50, d99 = row["direct"].p50, row["direct"].p99
    parts = [f"direct {d50:6.2f} / {d99:6.2f}"]
    for name, label in _LABELS.items():
        if name in row:
            m = row[name]
            cpu = _cpu(name, m)
            parts.append(f"{label} adds {m.p50 - d50:5.2f} / {m.p99 - d99:5.2f} (CPU {cpu} ms)")
    lines = ["  ".join(parts) + "  [ms, p50 / p99; CPU per request]"]
    owns = [f"{_LABELS[n]} {row[n].own_p50:.3f}" for n in _LABELS if n in row and row[n].own_p50]
    if owns:
        lines.append("    the gateway's own time (Server-Timing), p50 ms: " + ", ".join(owns))
    for name in _against_chat(row):
        median, low, high = paired_difference(row[name].round_p50s, row["gateway"].round_p50s)
        line = (
            f"    {_LABELS[name]} minus chat completions, p50 per round: "
            f"{median:+.2f} ms (90% interval {low:+.2f} to {high:+.2f})"
        )
        ours, theirs = row[name].round_own_p50s, row["gateway"].round_own_p50s
        if ours and theirs:
            median, low, high = paired_difference(ours, theirs)
            line += f"; own time {median:+.3f} ms ({low:+.3f} to {high:+.3f})"
        lines.append(line)
    return "\n".join(lines)


def _against_chat(row: dict) -> list[str]:
    """The targets compared in pairs with this gateway's chat completions: its other APIs,
    another checkout's gateway (`--compare`) and the gateway with OTel spans (`--otel`)."""
    return [
        name for name in _LABELS if name in row and (name in PROTOCOLS or name in _OTHER_GATEWAYS)
    ]


_OTHER_GATEWAYS = ("compared", "otel")


def _report(args, rows, sweeps, capture_rate: float, capture_lost: int) -> list[str]:
    """The results as a RESULTS.md section."""
    today = f"{datetime.now(UTC):%Y-%m-%d}, {platform.machine()}, {os.cpu_count()} cores"
    command = (
        f"python -m benchmarks.gateway_latency --requests {args.requests} "
        f"--rounds {args.rounds} --capture-events {args.capture_events} "
        f"--clients {args.clients} --rates {args.rates} --session-length {args.session_length}"
        + (f" --tools {args.tools}" if args.tools else "")
        + (f" --protocols {args.protocols}" if args.protocols else "")
        + (" --otel" if args.otel else "")
        + (f" --compare {args.compare}" if args.compare else "")
        + (f" --workers {args.workers}" if args.workers != "1" else "")
        + (" --mixed" if args.mixed else "")
    )
    names = [n for n in _LABELS if n in rows[0][1]] if rows else ["bare", "gateway"]
    header = (
        "| clients | direct p50 / p99 ms "
        + "".join(f"| {_LABELS[n]} adds p50 / p99 ms " for n in names)
        + "| CPU per request ms: "
        + " / ".join(_LABELS[n] + ("" if n == "bare" else " (+ drain + db)") for n in names)
        + " |"
    )
    table = [header, "|---|---|" + "---|" * len(names) + "---|"]
    for clients, row in rows:
        d50, d99 = row["direct"].p50, row["direct"].p99
        cells = [f"{clients}", f"{d50:.2f} / {d99:.2f}"]
        cells += [f"{row[n].p50 - d50:.2f} / {row[n].p99 - d99:.2f}" for n in names]
        cells.append(" / ".join(_cpu(n, row[n]) for n in names))
        table.append("| " + " | ".join(cells) + " |")
    paired = _paired_table(rows)
    return [
        f"\n## Gateway overhead ({today})\n",
        f"`{command}`: an upstream with a fixed 20 ms delay, called directly and through "
        "a bare pass-through proxy (benchmarks/passthrough.py: same server stack, no "
        "auth, no capture) and the gateway (capture on, PostgreSQL registry), "
        "interleaved; each server and the load generator in its own process"
        + (
            "; the gateway's targets sent together, request by request (`--mixed`)"
            if args.mixed
            else ""
        )
        + ".\n",
        *table,
        *paired,
        "",
        *[
            f"Open loop, {count} gateway worker(s), added p50 by request rate: "
            + ", ".join(f"{r}/s: {a:.2f} ms" for r, a in sweep)
            + (
                f"; it passes {KNEE_MS:.0f} ms at about {sweep[-1][0]} req/s."
                if sweep and sweep[-1][1] > KNEE_MS
                else f"; it stayed under {KNEE_MS:.0f} ms."
            )
            for count, sweep in sweeps.items()
        ],
        "",
        "Capture writer (spool, fsync per batch, COPY into PostgreSQL), fed "
        f"{args.capture_events:,} llm_call-sized events as fast as it takes them: "
        f"{capture_rate:,.0f} events/s sustained, {capture_lost} lost.",
    ]


def _paired_table(rows) -> list[str]:
    """Each other API's p50 minus chat completions', round by round (see
    `paired_difference`), as a table; none if only chat completions ran."""
    names = _against_chat(rows[0][1]) if rows else []
    if not names:
        return []
    table = [
        "",
        "Minus chat completions, p50 ms, the median of the rounds' differences (90% interval):",
        "",
        "| clients | " + " | ".join(_LABELS[n] for n in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for clients, row in rows:
        cells = []
        for name in names:
            median, low, high = paired_difference(row[name].round_p50s, row["gateway"].round_p50s)
            cells.append(f"{median:+.2f} ({low:+.2f} to {high:+.2f})")
        table.append(f"| {clients} | " + " | ".join(cells) + " |")
    return table


if __name__ == "__main__":
    main()
