"""The one engine pool: the engines a process's versions run on, shared by the gateway and
the replay gate, so both send a version's requests the same way."""

from __future__ import annotations

import asyncio
import os
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from proxy.config import GatewayConfig
from proxy.engines import HTTP_ENGINES
from proxy.engines.base import UpstreamEngine
from proxy.engines.local import LocalEngine
from proxy.errors import GatewayError
from registry import AgentVersion

__all__ = ["EnginePool"]


class EnginePool:
    """One engine per HTTP upstream (engine kind, base URL) and per local checkpoint and
    adapter; past `max_local` the least recently used local engine is closed.

    HTTP engines are kept for the process's life: they hold only connections, and closing
    one would break the requests it has in flight.

    Args:
        api_key: sent to every HTTP upstream.
        local: `LocalEngine` options (device, dtype, max_concurrency, max_tokens, threads).
    """

    def __init__(
        self,
        api_key: str | None = None,
        *,
        connect_timeout: float = 5.0,
        max_connections: int = 256,
        max_local: int = 4,
        local: Mapping[str, Any] | None = None,
    ) -> None:
        self.api_key, self.connect_timeout = api_key, connect_timeout
        self.max_connections, self.max_local = max_connections, max_local
        self.local_options = dict(local or {})
        self._http: dict[tuple[str, str], UpstreamEngine] = {}
        # In-process models by (checkpoint, adapter), least recently used first.
        self._local: OrderedDict[tuple[str, str | None], LocalEngine] = OrderedDict()
        self._closing: set[asyncio.Task] = set()

    @classmethod
    def of(cls, config: GatewayConfig) -> EnginePool:
        """The pool a gateway's configuration asks for."""
        local = {
            "device": config.local_device,
            "dtype": config.local_dtype,
            "max_concurrency": config.local_max_concurrency,
            "max_tokens": config.local_max_tokens,
            "threads": config.local_threads,
        }
        return cls(
            config.upstream_api_key,
            connect_timeout=config.upstream_connect_timeout,
            max_local=config.local_max_models,
            local=local,
        )

    def engine_for(self, version: AgentVersion, base_url: str | None) -> UpstreamEngine:
        """The engine `version`'s model runs on, at `base_url` (its route's replica)."""
        kind = version.spec.model.engine
        if kind == "local":
            return self.local_engine(version)
        engine = self._http.get((kind, base_url))  # type: ignore[arg-type]
        if engine is None:
            engine = self._http[(kind, base_url)] = self._http_engine(version, base_url)
        return engine

    def _http_engine(self, version: AgentVersion, base_url: str | None) -> UpstreamEngine:
        kind = version.spec.model.engine
        if kind not in HTTP_ENGINES:
            raise GatewayError(
                502,
                f"Engine '{kind}' of {version.id} is not available in this gateway.",
                code="engine_unavailable",
            )
        if not base_url:
            raise GatewayError(
                502, f"{version.id} names no upstream base_url.", code="engine_unavailable"
            )
        return HTTP_ENGINES[kind](
            base_url,
            self.api_key,
            connect_timeout=self.connect_timeout,
            max_connections=self.max_connections,
        )

    def local_engine(self, version: AgentVersion) -> LocalEngine:
        """The in-process engine of a version's checkpoint (and adapter), one per pair.

        The engine loads its weights in a thread on first use, so this never blocks. An
        evicted engine frees its weights once its requests in flight have finished.
        """
        ref = version.spec.model
        if not ref.checkpoint:
            raise GatewayError(
                502,
                f"{version.id} uses the local engine but names no checkpoint directory.",
                code="engine_unavailable",
            )
        key = (_local_path(ref.checkpoint), _local_path(ref.adapter) if ref.adapter else None)
        engine = self._local.get(key)
        if engine is not None:
            self._local.move_to_end(key)
            return engine
        engine = self._local[key] = LocalEngine(*key, version=ref.model, **self.local_options)
        while len(self._local) > self.max_local:
            _, evicted = self._local.popitem(last=False)
            self._close_later(evicted)
        return engine

    def local_engines(self) -> list[LocalEngine]:
        """The local engines kept, least recently used first."""
        return list(self._local.values())

    def _close_later(self, engine: UpstreamEngine) -> None:
        task = asyncio.get_running_loop().create_task(engine.aclose())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        """Close every engine, the evicted ones still closing included."""
        engines = [*self._http.values(), *self._local.values()]
        self._http.clear()
        self._local.clear()
        for engine in engines:
            await engine.aclose()
        await asyncio.gather(*self._closing, return_exceptions=True)


def _local_path(path: str) -> str:
    """A checkpoint or adapter directory as one key, however the version spells it.

    Symlinks are kept, not resolved: an engine keeps the weights it loaded even if a link
    like `latest` moves (a version is immutable), and a request costs no filesystem call.
    """
    return os.path.abspath(os.path.expanduser(path))
