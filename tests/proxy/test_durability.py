"""Capture durability on the real PostgreSQL: an outage loses nothing, a kill -9 loses nothing."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import openai
import pytest
import sqlalchemy as sa

from atdp import ModelRef, VersionSpec
from proxy.config import GatewayConfig
from registry import Alias, create_db_engine, register_version, set_alias, transaction, upgrade
from tests.conftest import free_port, postgres_schema_url
from tests.support.gateway import GatewayServer, seed_gateway_world
from tests.support.tcp_proxy import TcpProxy
from tests.support.upstream import ScriptedUpstream

pytestmark = pytest.mark.slow


def via_proxy(url: str, port: int) -> str:
    return sa.make_url(url).set(host="127.0.0.1", port=port).render_as_string(hide_password=False)


def event_ids(engine, ids: list[str]) -> list[str]:
    with engine.connect() as connection:
        rows = connection.execute(sa.text("SELECT id FROM event WHERE kind = 'llm_call'")).scalars()
        stored = [str(row) for row in rows]
    return [i for i in stored if i in set(ids)]


def ask(base_url: str, key: str, text: str, session: str) -> str:
    sdk = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=20)
    raw = sdk.chat.completions.with_raw_response.create(
        model="support-bot",
        messages=[{"role": "user", "content": text}],
        extra_headers={"X-Session-Id": session},
    )
    return raw.headers["x-evoplane-event-id"]


def test_gateway_serves_through_a_postgres_outage_and_catches_up_exactly_once(
    postgres_schema, upstream, tmp_path
) -> None:
    url = postgres_schema_url(postgres_schema)
    engine = create_db_engine(url)
    upgrade(engine)
    keys = seed_gateway_world(engine, upstream.base_url)
    proxy = TcpProxy(("127.0.0.1", 5432))
    config = GatewayConfig(
        database_url=via_proxy(url, proxy.port), spool_dir=tmp_path / "spool", catalog_ttl=0.2
    )
    try:
        with GatewayServer(config) as server:
            acked = [
                ask(server.base_url, keys["acme"], f"before {i}", f"s-{i % 3}") for i in range(6)
            ]
            server.flush()
            proxy.cut()
            time.sleep(0.5)  # let cached aliases and keys go stale: they are served anyway
            acked += [
                ask(server.base_url, keys["acme"], f"during {i}", f"s-{i % 4}") for i in range(12)
            ]
            health = httpx.get(server.base_url.removesuffix("/v1") + "/healthz").json()
            assert health["capture"]["pending"] > 0 and health["capture"]["last_error"]
            assert len(event_ids(engine, acked)) == 6
            proxy.restore()
            server.flush()
            stored = event_ids(engine, acked)
            assert sorted(stored) == sorted(acked)  # every one, and each once
    finally:
        proxy.close()
        engine.dispose()


@pytest.mark.parametrize("outage", ["cut", "stall"])
def test_new_sessions_are_placed_and_served_through_a_postgres_outage_without_waiting(
    postgres_schema, tmp_path, outage
) -> None:
    """Clients naming their own sessions, a new one every few requests, with PostgreSQL cut
    (refused: "cut") or unanswering (a partition: "stall") for seconds mid-load: no request
    fails or waits on the registry, every answer is stored once when it returns, and each
    session keeps the version it was first served by, as its stored placement says.

    Each conversation sends its history, and one client opens each with a few-shot example
    (an answer no gateway recorded, which the gateway looks for in the registry)."""
    url = postgres_schema_url(postgres_schema)
    engine = create_db_engine(url)
    upgrade(engine)
    proxy = TcpProxy(("127.0.0.1", 5432))
    config = GatewayConfig(
        database_url=via_proxy(url, proxy.port),
        spool_dir=tmp_path / "spool",
        catalog_ttl=0.2,
        resume_wait=0.5,  # what a few-shot example may wait for, the registry up or not
    )
    upstream_s, allowance_s = 0.1, 2.0  # far below the registry's 5 s connect timeout
    shots = [
        {"role": "user", "content": "Example: where is A-1?"},
        {"role": "assistant", "content": "A-1 shipped."},
    ]
    served: list[tuple[str, str, str, float]] = []  # session, event id, version, seconds
    failures: list[BaseException] = []
    stop = threading.Event()

    def client_loop(worker: int) -> None:
        sdk = openai.OpenAI(base_url=server.base_url, api_key=keys["acme"], max_retries=0)
        for i in range(100_000):
            if stop.is_set():
                return
            session = f"{outage}-c{worker}-{i // 3}"
            if i % 3 == 0:
                history = list(shots) if worker == 0 else []
            history.append({"role": "user", "content": f"hello {i}"})
            started = time.monotonic()
            try:
                raw = sdk.chat.completions.with_raw_response.create(
                    model="support-bot",
                    messages=history,
                    extra_headers={"X-Session-Id": session},
                    timeout=30,
                )
            except Exception as error:  # noqa: BLE001 - counted, and the test fails on it
                failures.append(error)
                history.pop()
                continue
            event, version = raw.headers["x-evoplane-event-id"], raw.headers["x-evoplane-version"]
            served.append((session, event, version, time.monotonic() - started))
            history.append({"role": "assistant", "content": raw.parse().choices[0].message.content})

    with ScriptedUpstream(delay_ms=upstream_s * 1000) as upstream:
        keys = seed_gateway_world(engine, upstream.base_url)
        spec = VersionSpec(model=ModelRef(engine="openai", base_url=upstream.base_url, model="c"))
        with transaction(engine) as session:
            canary = register_version(
                session, "support-bot", spec, parent_id="support-bot@v1", author="t", reason="t"
            ).id
            set_alias(session, "support-bot", Alias.CANARY, canary, weight=0.5, actor="test")
        try:
            with (
                GatewayServer(config) as server,
                concurrent.futures.ThreadPoolExecutor(4) as pool,
            ):
                clients = [pool.submit(client_loop, w) for w in range(4)]
                # What was never read cannot be served stale: both versions are served (the
                # key, policy and aliases cached) before the outage, however slow the start.
                warm = time.monotonic() + 60
                while len({version for _, _, version, _ in served}) < 2 and not failures:
                    if time.monotonic() > warm:
                        break  # the assertions below say what went wrong
                    time.sleep(0.1)
                time.sleep(1.5)
                before = len(served)
                getattr(proxy, outage)()
                time.sleep(6)
                during = len(served) - before
                proxy.restore()
                time.sleep(1.5)
                stop.set()
                for future in clients:
                    future.result()
                server.flush()
                health = httpx.get(server.base_url.removesuffix("/v1") + "/healthz").json()
        finally:
            proxy.close()
    try:
        assert not failures, f"{len(failures)} failed, the first: {failures[0]!r}"
        slowest = max(seconds for *_, seconds in served)
        assert slowest < upstream_s + allowance_s, f"a request took {slowest:.1f} s"
        assert during > 20, "too little load during the outage to prove anything"
        acked = [event for _, event, _, _ in served]
        assert sorted(event_ids(engine, acked)) == sorted(acked)  # every one, and each once
        assert health["capture"]["pending"] == 0
        versions: dict[str, set[str]] = {}
        for session, _, version, _ in served:
            versions.setdefault(session, set()).add(version)
        assert all(len(kept) == 1 for kept in versions.values())  # no session moved
        with engine.connect() as connection:
            placed = dict(
                connection.execute(
                    sa.text("SELECT session, version_id FROM session_route WHERE tenant = 'acme'")
                ).all()
            )
        assert placed == {session: kept.pop() for session, kept in versions.items()}
        assert len(set(placed.values())) == 2  # both versions served new sessions
    finally:
        engine.dispose()


def test_kill_9_under_load_then_restart_loses_and_duplicates_nothing(
    postgres_schema, upstream, tmp_path
) -> None:
    url = postgres_schema_url(postgres_schema)
    engine = create_db_engine(url)
    upgrade(engine)
    keys = seed_gateway_world(engine, upstream.base_url)
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("EVOPLANE_")},
        "EVOPLANE_DATABASE_URL": url,
        "EVOPLANE_DATA_DIR": str(tmp_path / "data"),
        "EVOPLANE_GATEWAY_PORT": str(port),
    }
    evoplane = str(Path(sys.executable).parent / "evoplane")
    base_url = f"http://127.0.0.1:{port}/v1"

    def start() -> subprocess.Popen:
        process = subprocess.Popen(
            [evoplane, "gateway"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    return process
            except httpx.HTTPError:
                time.sleep(0.2)
        process.kill()
        raise AssertionError(process.stderr.read().decode())

    gateway = start()
    acked: list[str] = []
    so_far = [0]  # answers received by all clients (a loaded machine serves fewer a second)
    killed = threading.Event()

    def client_loop(worker: int) -> list[str]:
        mine = []
        for i in range(10_000):
            if killed.is_set():
                break
            try:
                mine.append(
                    ask(base_url, keys["acme"], f"load {worker}-{i}", f"w{worker}-{i // 5}")
                )
                so_far[0] += 1
            except (openai.APIConnectionError, openai.APIStatusError):
                break  # the gateway is gone
        return mine

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(client_loop, w) for w in range(8)]
        # Kill it mid-load: after some answers, with every client still sending.
        deadline = time.monotonic() + 60
        while so_far[0] < 40 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(gateway.pid, signal.SIGKILL)
        killed.set()
        gateway.wait()
        for future in futures:
            acked += future.result()
    assert len(acked) > 20, "too little load before the kill to prove anything"

    gateway = start()  # replays the spool left behind
    try:
        deadline = time.monotonic() + 60
        while len(event_ids(engine, acked)) < len(acked) and time.monotonic() < deadline:
            time.sleep(0.3)
        stored = event_ids(engine, acked)
        assert sorted(stored) == sorted(acked)
        with engine.connect() as connection:
            total = connection.execute(
                sa.text("SELECT count(*), count(DISTINCT id) FROM event")
            ).one()
            assert total[0] == total[1]
            same_place = "SELECT trajectory_id, seq FROM event GROUP BY 1, 2 HAVING count(*) > 1"
            dupes = connection.execute(sa.text(f"SELECT count(*) FROM ({same_place}) d")).scalar()
            assert dupes == 0
    finally:
        gateway.send_signal(signal.SIGTERM)
        try:
            gateway.wait(timeout=30)
        except subprocess.TimeoutExpired:
            gateway.kill()
            raise AssertionError(
                f"gateway ignored SIGTERM: {gateway.stderr.read().decode()[-3000:]}"
            ) from None
        engine.dispose()
    assert uuid.UUID(acked[0])
