"""The engine pool: one engine per upstream or local weights, the least recently used local
engine closed past the limit, every engine closed with the pool."""

from __future__ import annotations

import asyncio

import pytest

from atdp import ModelRef, VersionSpec, utcnow
from proxy.engines import HTTP_ENGINES
from proxy.engines import pool as pool_module
from proxy.engines.pool import EnginePool
from proxy.errors import GatewayError
from registry import AgentVersion


class FakeEngine:
    """Records how it was made and whether it was closed."""

    def __init__(self, *args, **options) -> None:
        self.args, self.options, self.closed = args, options, False

    async def aclose(self) -> None:
        self.closed = True


@pytest.fixture(autouse=True)
def fake_engines(monkeypatch) -> None:
    monkeypatch.setattr(pool_module, "LocalEngine", FakeEngine)
    monkeypatch.setitem(HTTP_ENGINES, "fake", FakeEngine)


def version(number: int, **model) -> AgentVersion:
    return AgentVersion(
        id=f"bot@v{number}",
        agent="bot",
        number=number,
        content_hash=str(number),
        parent_id=None,
        spec=VersionSpec(model=ModelRef(**model)),
        author="test",
        reason="test",
        created_at=utcnow(),
    )


async def test_the_same_upstream_gets_the_same_engine() -> None:
    pool = EnginePool("key", connect_timeout=1.0, max_connections=3)
    first = pool.engine_for(version(1, engine="fake"), "http://a")
    assert pool.engine_for(version(2, engine="fake"), "http://a") is first
    other = pool.engine_for(version(1, engine="fake"), "http://b")
    assert other is not first
    assert first.args == ("http://a", "key")
    assert first.options == {"connect_timeout": 1.0, "max_connections": 3}
    await pool.aclose()
    assert first.closed and other.closed


async def test_the_least_recently_used_local_engine_is_closed_past_the_limit() -> None:
    pool = EnginePool(max_local=2, local={"threads": 1})
    one, two, three = (version(n, engine="local", checkpoint=f"/w/{n}") for n in (1, 2, 3))
    first = pool.engine_for(one, None)
    second = pool.engine_for(two, None)
    assert pool.engine_for(one, None) is first  # now the more recently used
    third = pool.engine_for(three, None)
    await asyncio.sleep(0)
    assert second.closed and not first.closed and not third.closed
    assert pool.local_engines() == [first, third]
    assert first.options == {"version": None, "threads": 1}
    await pool.aclose()
    assert first.closed and third.closed


def test_the_same_weights_however_spelled_share_an_engine(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    pool = EnginePool()
    absolute = pool.engine_for(version(1, engine="local", checkpoint=str(tmp_path / "w")), None)
    assert pool.engine_for(version(2, engine="local", checkpoint="w"), None) is absolute


@pytest.mark.parametrize(
    ("model", "base_url", "message"),
    [
        ({"engine": "vllm-grpc"}, "http://a", "Engine 'vllm-grpc' of bot@v1 is not available"),
        ({"engine": "fake"}, None, "bot@v1 names no upstream base_url"),
        ({"engine": "local"}, None, "bot@v1 uses the local engine but names no checkpoint"),
    ],
)
def test_an_engine_that_cannot_be_made_is_a_502(model, base_url, message) -> None:
    with pytest.raises(GatewayError) as caught:
        EnginePool().engine_for(version(1, **model), base_url)
    assert caught.value.status == 502 and caught.value.code == "engine_unavailable"
    assert message in caught.value.message
