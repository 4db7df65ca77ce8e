"""Weight sync of SGLang servers: health, model info, weight updates, LoRA.

A weight update follows SGLang's protocol for RL rollouts (verified against SGLang 0.5.x:
python/sglang/srt/entrypoints/http_server.py, managers/io_struct.py, tokenizer_manager.py):

    POST /pause_generation {"mode": "retract"}
    POST /update_weights_from_disk {"model_path": ..., "weight_version": ...}
        -> 200 {"success": true, "message", "num_paused_requests"} or 400 {"success": false, ...}
    POST /continue_generation {}        (always, after a failed update too)

While generation is paused, new requests wait rather than fail. "retract" puts running
requests back in the queue; they are recomputed and finish after the update. SGLang's default,
"abort" (its only behaviour before 0.5.9), would end them early; "in_place" keeps KV cache
from the old weights and makes the cache flush after the update fail.

SGLang moves its weight version only when an update succeeds. The client reads the version
again after every attempt, so what it reports is what the server says it serves.

LoRA adapters are loaded under versioned names (`support-bot@v7`): POST /load_lora_adapter
{"lora_name", "lora_path", "pinned"} and POST /unload_lora_adapter {"lora_name"}. Both answer
{"success", "error_message", "loaded_adapters"}, with 400 on failure. SGLang needs
`--enable-lora` with `--max-lora-rank` and `--lora-target-modules` to load adapters later.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from proxy.engines.base import UpstreamError, UpstreamTimeout
from proxy.engines.sglang import UNLABELLED_VERSION, server_url

__all__ = [
    "PAUSE_MODES",
    "ModelInfo",
    "SGLangAdmin",
    "WeightSync",
    "WeightSyncError",
    "versioned_adapter_name",
]

PAUSE_MODES = ("retract", "abort", "in_place")


@dataclass(frozen=True)
class ModelInfo:
    """What SGLang's /model_info reports: the checkpoint it loaded and its weight version."""

    model_path: str
    weight_version: str
    raw: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class WeightSync:
    """A weight update SGLang confirmed."""

    model_path: str
    previous_version: str
    weight_version: str
    paused_requests: int  # requests that waited (or were retracted) during the update


class WeightSyncError(UpstreamError):
    """SGLang refused a weight or adapter change.

    `served_version` is the weight version the server reported after the attempt, when known.
    """

    def __init__(
        self, status: int | None, message: str, body: Any = None, *, served_version: str | None
    ) -> None:
        super().__init__(status, message, body)
        self.served_version = served_version


def versioned_adapter_name(name: str, version: str) -> str:
    """The name a LoRA adapter is served under: `name@version`, e.g. `support-bot@v7`."""
    if not name or not version or ":" in name + version:
        # SGLang reads a model "base:adapter" as an adapter request, so ':' cannot appear.
        raise ValueError(
            f"adapter name and version must be non-empty, without ':' ({name!r}, {version!r})"
        )
    return f"{name}@{version}"


class SGLangAdmin:
    """Admin client of one SGLang server: health, model info, weight sync, LoRA adapters.

    Args:
        base_url: the server, "http://sglang:30000" or its API root ".../v1".
        api_key: sent as Bearer (SGLang checks its admin key, else its API key, if it has one).
        timeout: seconds for reads (health, model info, adapter list).
        update_timeout: seconds for each step of a weight or adapter change.
        pause_mode: how /pause_generation treats running requests; see the module docstring.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        update_timeout: float = 600.0,
        pause_mode: str = "retract",
    ) -> None:
        if pause_mode not in PAUSE_MODES:
            raise ValueError(f"pause_mode must be one of {PAUSE_MODES}, not {pause_mode!r}")
        self.server_url = server_url(base_url)
        self.timeout = timeout
        self.update_timeout = update_timeout
        self.pause_mode = pause_mode
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._session: aiohttp.ClientSession | None = None
        self._changing = asyncio.Lock()  # one weight or adapter change at a time

    async def health(self) -> bool:
        """Whether GET /health answers 200 (SGLang answers 503 while starting or stuck)."""
        try:
            status, _ = await self._call("GET", "/health", timeout=self.timeout)
        except (UpstreamError, UpstreamTimeout):
            return False
        return status == 200

    async def model_info(self) -> ModelInfo:
        """The loaded checkpoint and weight version (/model_info; /get_model_info before it)."""
        status, body = await self._call("GET", "/model_info", timeout=self.timeout)
        if status == 404:
            status, body = await self._call("GET", "/get_model_info", timeout=self.timeout)
        self._check(status, body, "did not report its model info")
        return ModelInfo(
            model_path=str(body.get("model_path")),
            weight_version=str(body.get("weight_version") or UNLABELLED_VERSION),
            raw=body,
        )

    async def weight_version(self) -> str:
        """The weight version the server reports serving now."""
        return (await self.model_info()).weight_version

    async def update_weights(self, model_path: str | Path, *, weight_version: str) -> WeightSync:
        """Load a checkpoint into the running server: pause, update from disk, continue.

        Raises:
            WeightSyncError: SGLang refused; `served_version` says what it serves now.
        """
        path = str(model_path)
        async with self._changing:
            previous = await self.weight_version()
            await self._step("/pause_generation", {"mode": self.pause_mode}, "pause generation")
            try:
                payload = {"model_path": path, "weight_version": weight_version}
                status, body = await self._call(
                    "POST", "/update_weights_from_disk", payload, timeout=self.update_timeout
                )
            finally:
                await self._step(
                    "/continue_generation",
                    {},
                    "continue generation (it stays paused until POST /continue_generation works)",
                )
            served = await self.weight_version()
        if status >= 400 or not _succeeded(body):
            raise WeightSyncError(
                status,
                f"SGLang at {self.server_url} did not load weights from {path}: "
                f"{_message(body)}; it reports weight version '{served}'",
                body,
                served_version=served,
            )
        if served != weight_version:
            raise WeightSyncError(
                status,
                f"SGLang at {self.server_url} loaded {path} but reports weight version "
                f"'{served}', not '{weight_version}'",
                body,
                served_version=served,
            )
        return WeightSync(path, previous, served, _paused(body))

    async def load_lora_adapter(
        self, name: str, version: str, path: str | Path, *, pinned: bool = False
    ) -> str:
        """Load the adapter at `path` as `name@version`; returns that name, for `model`."""
        adapter = versioned_adapter_name(name, version)
        payload = {"lora_name": adapter, "lora_path": str(path), "pinned": pinned}
        async with self._changing:
            await self._step("/load_lora_adapter", payload, f"load LoRA adapter {adapter}")
        return adapter

    async def unload_lora_adapter(self, adapter: str) -> None:
        """Unload an adapter loaded by `load_lora_adapter` (by its versioned name)."""
        async with self._changing:
            payload = {"lora_name": adapter}
            await self._step("/unload_lora_adapter", payload, f"unload LoRA adapter {adapter}")

    async def adapters(self) -> dict[str, str]:
        """The loaded LoRA adapters, name -> path, as /v1/models lists them."""
        status, body = await self._call("GET", "/v1/models", timeout=self.timeout)
        self._check(status, body, "did not list its models")
        cards = body.get("data") or []
        return {card["id"]: card.get("root") or "" for card in cards if card.get("parent")}

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _step(self, path: str, payload: dict, action: str) -> dict:
        status, body = await self._call("POST", path, payload, timeout=self.update_timeout)
        self._check(status, body, f"could not {action}")
        return body

    def _check(self, status: int, body: Any, failure: str) -> None:
        if status >= 400 or not _succeeded(body) or not isinstance(body, dict):
            message = f"SGLang at {self.server_url} {failure}: {_message(body)}"
            raise WeightSyncError(status, message, body, served_version=None)

    async def _call(
        self, method: str, path: str, payload: dict | None = None, *, timeout: float
    ) -> tuple[int, Any]:
        """(status, parsed body); only a lost connection or a timeout raises."""
        url = f"{self.server_url}{path}"
        try:
            async with asyncio.timeout(timeout):
                async with self._client().request(
                    method, url, json=payload, headers=self._headers
                ) as response:
                    return response.status, _parsed(await response.read())
        except TimeoutError as error:
            raise UpstreamTimeout(f"{url} did not answer within {timeout} s") from error
        except aiohttp.ClientError as error:
            message = f"could not reach {url} ({error!r}); check that SGLang is running there"
            raise UpstreamError(None, message) from error

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:  # created on first use, in the running event loop
            self._session = aiohttp.ClientSession()
        return self._session


def _parsed(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def _succeeded(body: Any) -> bool:
    return not (isinstance(body, dict) and body.get("success") is False)


def _message(body: Any) -> str:
    """SGLang's own words: `message` (weights), `error_message` (LoRA), or FastAPI's `detail`."""
    if isinstance(body, dict):
        for key in ("message", "error_message", "detail", "error"):
            value = body.get(key)
            if isinstance(value, dict):
                value = value.get("message")
            if value:
                return str(value)
        return json.dumps(body)[:500]
    return str(body)[:500] or "no details"


def _paused(body: Any) -> int:
    count = body.get("num_paused_requests", 0) if isinstance(body, dict) else 0
    return sum(count) if isinstance(count, list) else int(count or 0)  # a list per worker
