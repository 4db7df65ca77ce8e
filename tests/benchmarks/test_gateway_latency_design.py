"""The gateway benchmark's interleaving (every target as often first, and after every other),
its mix of targets request by request (`--mixed`), and its reading of the gateway's
`Server-Timing`."""

import asyncio
from collections import Counter

import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.gateway_latency import (
    Target,
    balanced_orders,
    interleaved_parts,
    mixed_loop,
    server_timing,
)


@given(st.integers(min_value=1, max_value=12))
def test_balanced_orders_are_a_williams_design(count: int) -> None:
    orders = balanced_orders(count)
    assert len(orders) == (count if count % 2 == 0 else 2 * count)
    assert all(sorted(order) == list(range(count)) for order in orders)
    firsts = Counter(order[0] for order in orders)
    assert set(firsts) == set(range(count)) and len(set(firsts.values())) == 1
    follows = Counter((a, b) for order in orders for a, b in zip(order, order[1:], strict=False))
    if count > 1:
        assert len(follows) == count * (count - 1)  # every ordered pair of neighbours
        assert len(set(follows.values())) == 1  # each as often


@given(
    st.dictionaries(
        st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True),
        st.floats(0, 1e6, allow_nan=False).map(lambda x: round(x, 3)),
        max_size=5,
    ),
    st.sampled_from(["", " "]),
)
def test_server_timing_reads_back_every_duration(durations: dict, pad: str) -> None:
    """What the gateway writes (`name;dur=ms` joined by commas) reads back, and a metric
    without a duration (`cache;desc="hit"`) is left out."""
    header = f",{pad}".join(f"{name};dur={ms:.3f}" for name, ms in durations.items())
    header += f",{pad}cache;desc=hit" if header else "cache;desc=hit"
    assert server_timing(header) == pytest.approx(durations)


@given(st.lists(st.sampled_from("abcdefgh"), unique=True), st.sets(st.sampled_from("abcdefgh")))
def test_mixed_targets_are_one_part_where_the_first_of_them_stands(names, mixed) -> None:
    parts = interleaved_parts(names, mixed)
    assert sorted(name for part in parts for name in part) == sorted(names)
    assert [part for part in parts if len(part) > 1 or set(part) & mixed] == (
        [[n for n in names if n in mixed]] if set(names) & mixed else []
    )
    starts = [min(names.index(name) for name in part) for part in parts]
    assert starts == sorted(starts)  # each part where its first name stands


def test_a_mixed_loop_sends_every_target_in_turn_under_its_own_sessions() -> None:
    """Each client sends each target its share, the targets in turn from a different one
    per client (so the clients are on different targets at once), each target's body in its
    own shape and its own sessions; the latencies and `Server-Timing` come back per target."""
    seen: list[tuple[str, dict, str]] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append((request.path, await request.json(), request.headers["X-Session-Id"]))
        return web.json_response({}, headers={"Server-Timing": "gateway;dur=0.250"})

    async def run():
        app = web.Application()
        app.router.add_post("/{target}", answer)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        base = f"http://127.0.0.1:{port}"
        targets = {
            "a": Target(f"{base}/a", {}),
            "b": Target(f"{base}/b", {}, shape=lambda body: {"shaped": body["messages"]}),
            "c": Target(f"{base}/c", {}),
        }
        try:
            return await mixed_loop(targets, clients=3, per_client=4, session_length=2)
        finally:
            await runner.cleanup()

    sampled = asyncio.run(run())
    assert {name: len(got.latencies) for name, got in sampled.items()} == {
        "a": 12,
        "b": 12,
        "c": 12,
    }
    assert all(got.own == [0.25] * 12 for got in sampled.values())
    timed = [entry for entry in seen if not entry[2].endswith("-w")]  # past the warm-ups
    assert len(seen) - len(timed) == 3
    firsts = {sid.split("-")[2]: path for path, _, sid in timed[::-1]}  # client -> first path
    assert sorted(firsts.values()) == ["/a", "/b", "/c"]  # each client starts elsewhere
    assert all(("shaped" in body) == (path == "/b") for path, body, _ in timed)
    sessions = Counter((path, sid) for path, _, sid in timed)
    assert all(count == 2 for count in sessions.values())  # session_length requests each
    assert all(sid.split("-")[1] == path.strip("/") for path, sid in sessions)
