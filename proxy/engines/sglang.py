"""The engine for SGLang servers: chat completions with token ids, logprobs and weight labels.

SGLang serves the OpenAI chat API, so this is OpenAICompatEngine plus the request fields and
response rewrites that make every answer trainable (verified against SGLang 0.5.x sources,
python/sglang/srt/entrypoints/openai/{protocol,serving_chat}.py):

- requests ask for `logprobs`, and for the sampled token ids: `return_token_ids` on plain
  calls (0.5.17+; choices then carry `response_token_ids`, named `token_ids` in 0.5.17) and
  `return_output_ids_in_sglext` on streams (0.5.21+; SGLang refuses `return_token_ids` there
  and sends the ids in a last chunk, `sglext.output_ids`, one list per choice). Servers older
  than that ignore the fields, and capture keeps their logprobs without ids.
- answers are rewritten into what capture reads: each choice's `token_ids`, aligned with
  `logprobs.content` (both include the stop token), and `model` = the label of the weights
  that produced it: the LoRA adapter's name, else SGLang's `metadata.weight_version` (set by
  `--weight-version` or a weight sync). Streams carry no metadata; their version is read from
  /model_info while the first tokens are computed.
- LoRA: SGLang applies an adapter named in the request's `lora_path`; a plain adapter name as
  `model` would silently get the base weights. The gateway sends a version's adapter as
  `model`, so the engine learns which names are adapters from /v1/models, where SGLang lists
  each loaded adapter with a `parent`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator
from typing import Any

import aiohttp

from proxy.engines.base import UpstreamError, UpstreamTimeout
from proxy.engines.openai_compat import OpenAICompatEngine, _raise_for_status

__all__ = ["SGLangEngine", "server_url"]

# SGLang's weight version when none was set: it names no weights, so it is not a label.
UNLABELLED_VERSION = "default"


def server_url(base_url: str) -> str:
    """The root URL of an SGLang server (admin endpoints live there), given it or its /v1 URL."""
    return base_url.rstrip("/").removesuffix("/v1")


class SGLangEngine(OpenAICompatEngine):
    """OpenAICompatEngine for one SGLang server, returning token ids, logprobs and weight labels.

    Args:
        base_url: the server, "http://sglang:30000" or its API root "http://sglang:30000/v1".
        adapter_recheck_s: how long a model name found not to be a LoRA adapter is trusted
            before /v1/models is asked again; a name never seen is always looked up, so a
            newly loaded adapter is used from its first request.
        The other arguments are OpenAICompatEngine's.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        connect_timeout: float,
        max_connections: int,
        connect_retries: int = 2,
        retry_backoff: float = 0.1,
        adapter_recheck_s: float = 30.0,
    ) -> None:
        self.server_url = server_url(base_url)
        super().__init__(
            f"{self.server_url}/v1",
            api_key,
            connect_timeout=connect_timeout,
            max_connections=max_connections,
            connect_retries=connect_retries,
            retry_backoff=retry_backoff,
        )
        self.adapter_recheck_s = adapter_recheck_s
        self._adapters: set[str] = set()
        self._checked: dict[str, float] = {}  # model name -> when /v1/models last said
        self._listing: asyncio.Future[set[str]] | None = None

    async def complete(
        self, body: dict, *, model: str | None, timeout: float, sent: asyncio.Event | None = None
    ) -> dict:
        """A chat completion with token ids and logprobs; the reply's `model` names its weights."""
        started = time.monotonic()
        adapter = await self._adapter(model, timeout)
        request = _with_extensions(body, adapter, stream=False)
        left = timeout - (time.monotonic() - started)
        reply = await super().complete(request, model=model, timeout=left, sent=sent)
        return _labelled(reply, adapter)

    async def stream(
        self, body: dict, *, model: str | None, timeout: float
    ) -> AsyncGenerator[dict]:
        """A streamed chat completion; the token ids arrive in one chunk before the usage."""
        adapter = await self._adapter(model, timeout)
        request = _with_extensions(body, adapter, stream=True)
        version = None if adapter else asyncio.ensure_future(self._weight_version(timeout))
        label = adapter
        try:
            async for chunk in super().stream(request, model=model, timeout=timeout):
                if version is not None:
                    label, version = await version, None
                yield _labelled_chunk(chunk, label)
        finally:
            if version is not None:
                version.cancel()

    async def _adapter(self, model: str | None, timeout: float) -> str | None:
        """`model` when it names a LoRA adapter loaded on the server, else None.

        Only names the gateway chose (a version's model or adapter) are looked up, never an
        agent's own model name, so a client cannot make the engine list models per request.
        """
        if not model or ":" in model:  # SGLang's own "base:adapter" syntax routes itself
            return None
        checked = self._checked.get(model)
        if model not in self._adapters and (
            checked is None or time.monotonic() - checked >= self.adapter_recheck_s
        ):
            if self._listing is None or self._listing.done():
                self._listing = asyncio.ensure_future(self._list_adapters())
            try:
                async with asyncio.timeout(timeout):
                    self._adapters = await asyncio.shield(self._listing)
            except TimeoutError as error:
                raise UpstreamTimeout(f"{self.server_url}/v1/models did not answer") from error
            self._checked[model] = time.monotonic()
        return model if model in self._adapters else None

    async def _list_adapters(self) -> set[str]:
        listing = await self._get_json("/v1/models")
        cards = listing.get("data") if isinstance(listing, dict) else None
        return {card["id"] for card in cards or [] if card.get("parent")}

    async def _weight_version(self, timeout: float) -> str | None:
        """The served weight version, or None when it is unknown (a stream is not failed)."""
        try:
            async with asyncio.timeout(timeout):
                info = await self._get_json("/model_info")
        except (TimeoutError, UpstreamError):
            return None
        version = info.get("weight_version") if isinstance(info, dict) else None
        return version if version and version != UNLABELLED_VERSION else None

    async def _get_json(self, path: str) -> Any:
        url = f"{self.server_url}{path}"
        try:
            async with self._client().get(url, headers=self._headers) as response:
                await _raise_for_status(response)
                return json.loads(await response.read())
        except aiohttp.ClientError as error:
            raise UpstreamError(None, f"could not read {url}: {error!r}") from error
        except ValueError as error:
            raise UpstreamError(200, f"{url} answered with non-JSON") from error


def _with_extensions(body: dict, adapter: str | None, *, stream: bool) -> dict:
    request = {**body, "logprobs": True}
    request["return_output_ids_in_sglext" if stream else "return_token_ids"] = True
    if adapter is not None:
        request["lora_path"] = adapter
    return request


def _labelled(reply: dict, adapter: str | None) -> dict:
    """`reply` with each choice's `token_ids` and `model` naming the weights that answered."""
    metadata = reply.get("metadata") or {}
    version = metadata.get("weight_version") if isinstance(metadata, dict) else None
    label = adapter or (version if version != UNLABELLED_VERSION else None)
    if label:
        reply["model"] = label
    for choice in reply.get("choices") or []:
        token_ids = choice.get("token_ids") or choice.get("response_token_ids")
        if token_ids is not None:
            choice["token_ids"] = token_ids
    return reply


def _labelled_chunk(chunk: dict, label: str | None) -> dict:
    """`chunk` labelled; SGLang's `sglext.output_ids` chunk becomes one with per-choice ids."""
    if label:
        chunk["model"] = label
    output_ids = (chunk.get("sglext") or {}).get("output_ids")
    if output_ids and not chunk.get("choices"):
        chunk["choices"] = [
            {"index": index, "delta": {}, "logprobs": None, "finish_reason": None, "token_ids": ids}
            for index, ids in enumerate(output_ids)
        ]
    return chunk
