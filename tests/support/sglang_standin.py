"""A stand-in for an SGLang 0.5 server on loopback: the parts of its API Evoplane uses.

SGLang needs a GPU, so CPU tests of SGLangEngine and SGLangAdmin run against this. It is NOT
SGLang. It answers only the endpoints and payload shapes read from SGLang 0.5.x's sources
(python/sglang/srt/entrypoints/http_server.py, openai/protocol.py, openai/serving_chat.py,
managers/io_struct.py). Texts are ScriptedUpstream's echoes, tokenised one byte per token like
evoplane/demo/tiny.py's tokenizer, then the stop token. The GPU tests in tests/gpu/ check the
same client code against real SGLang.

    with SGLangStandIn(weight_version="base") as sglang:
        engine = SGLangEngine(sglang.url, connect_timeout=1, max_connections=4)
        sglang.checkpoints.add("/ckpt/step-300")   # paths an update may load
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

from tests.support.upstream import (
    ScriptedUpstream,
    _read_body,
    _send_json,
    _send_sse,
    completion,
)

__all__ = ["STOP_TOKEN", "SGLangStandIn"]

STOP_TOKEN = 256  # <|im_end|> in the tiny model's byte tokenizer
PAUSE_MODES = ("abort", "retract", "in_place")  # PauseGenerationReqInput.mode


class SGLangStandIn(ScriptedUpstream):
    """ScriptedUpstream's loopback server answering like SGLang (0.5.21 and later).

    Args:
        model_path: the checkpoint "loaded" at launch (`--model-path`).
        weight_version: `--weight-version`; SGLang's default is "default".
        enable_lora: `--enable-lora`; without it adapter loads are refused.
    """

    def __init__(
        self,
        model_path: str = "/models/tiny",
        *,
        weight_version: str = "default",
        enable_lora: bool = True,
    ) -> None:
        super().__init__(models=(model_path,))
        self.model_path = model_path
        self.weight_version = weight_version
        self.enable_lora = enable_lora
        self.checkpoints: set[str] = {model_path}  # paths "on the server's disk"
        self.adapters: dict[str, str] = {}  # loaded LoRA adapters: name -> path
        self.admin_calls: list[tuple[str, dict]] = []  # (path, body) of each admin POST
        self.reads: list[str] = []  # the path of each GET
        self.healthy = True
        self.update_delay_s = 0.0
        self._refusals: dict[str, tuple[int, str]] = {}
        self._generating: asyncio.Event | None = None  # cleared while paused

    @property
    def url(self) -> str:
        """The server root, where SGLang's admin endpoints are."""
        return self.base_url.removesuffix("/v1")

    @property
    def paused(self) -> bool:
        return self._generating is not None and not self._generating.is_set()

    def refuse_next(self, path: str, status: int = 500, message: str = "scripted failure") -> None:
        """Answer the next POST to `path` (e.g. "/continue_generation") with an error."""
        self._refusals[path] = (status, message)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        method, path = scope["method"], scope["path"]
        if method == "POST" and path == "/v1/chat/completions":
            return await self._sglang_chat(scope, receive, send)
        if method == "GET":
            self.reads.append(path)
            answer = self._read_route(path)
            if answer is not None:
                return await _send_json(send, *answer)
        if method == "POST" and path in ADMIN_ROUTES:
            body = _json(await _read_body(receive))
            self.admin_calls.append((path, body))
            if path in self._refusals:
                status, message = self._refusals.pop(path)
                return await _send_json(send, status, {"detail": message})
            return await _send_json(send, *await ADMIN_ROUTES[path](self, body))
        await _send_json(send, 404, {"detail": "Not Found"})

    def _read_route(self, path: str) -> tuple[int, dict] | None:
        if path in {"/health", "/health_generate"}:
            return (200, {}) if self.healthy else (503, {})
        if path in {"/model_info", "/get_model_info"}:
            return 200, self._model_info()
        if path == "/v1/models":
            return 200, self._model_list()
        return None

    def _model_info(self) -> dict:
        return {
            "model_path": self.model_path,
            "served_model_name": self.model_path,  # 0.5.23 moves it with weight updates
            "tokenizer_path": self.models[0],
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": self.weight_version,
            "model_type": "qwen2",
            "architectures": ["Qwen2ForCausalLM"],
        }

    def _model_list(self) -> dict:
        base = {"id": self.model_path, "object": "model", "owned_by": "sglang"}
        cards = [{**base, "root": self.model_path, "parent": None, "max_model_len": 2048}]
        for name, path in self.adapters.items():
            cards.append({**base, "id": name, "root": path, "parent": self.model_path})
        return {"object": "list", "data": cards}

    # --- admin endpoints (http_server.py) -------------------------------------------------

    async def _pause(self, body: dict) -> tuple[int, dict]:
        mode = body.get("mode", "abort")
        if mode not in PAUSE_MODES:
            return 422, {"detail": f"Invalid mode: {mode!r}. Expected one of {list(PAUSE_MODES)}."}
        self._gate().clear()
        return 200, {"message": "Generation paused successfully.", "status": "ok"}

    async def _continue(self, body: dict) -> tuple[int, dict]:
        self._gate().set()
        return 200, {"message": "Generation continued successfully.", "status": "ok"}

    async def _update_weights(self, body: dict) -> tuple[int, dict]:
        await asyncio.sleep(self.update_delay_s)
        path = body["model_path"]
        if path not in self.checkpoints:
            message = f"Failed to get weights iterator: no safetensors or bin files in {path}."
            return 400, {"success": False, "message": message, "num_paused_requests": 0}
        self.model_path = path
        message = "Succeeded to update model weights."
        if body.get("weight_version") is not None:
            self.weight_version = body["weight_version"]
            message += f" Weight version updated to {self.weight_version}."
        return 200, {"success": True, "message": message, "num_paused_requests": 0}

    async def _load_lora(self, body: dict) -> tuple[int, dict]:
        name, path = body["lora_name"], body["lora_path"]
        if not self.enable_lora:
            error = "LoRA is not enabled. Please set `--enable-lora` to enable LoRA."
        elif name in self.adapters:
            error = f"Failed to load LoRA adapter {name} because it is already loaded"
        elif path not in self.checkpoints:
            error = f"Failed to load LoRA adapter {name}: no adapter_config.json in {path}"
        else:
            self.adapters[name] = path
            return 200, {"success": True, "error_message": "", "loaded_adapters": self.adapters}
        return 400, {"success": False, "error_message": error, "loaded_adapters": self.adapters}

    async def _unload_lora(self, body: dict) -> tuple[int, dict]:
        if self.adapters.pop(body["lora_name"], None) is None:
            error = f"LoRA adapter {body['lora_name']} is not loaded"
            return 400, {"success": False, "error_message": error, "loaded_adapters": self.adapters}
        return 200, {"success": True, "error_message": "", "loaded_adapters": self.adapters}

    def _gate(self) -> asyncio.Event:
        if self._generating is None:  # made in the server's event loop, on first use
            self._generating = asyncio.Event()
            self._generating.set()
        return self._generating

    # --- /v1/chat/completions (serving_chat.py) -------------------------------------------

    async def _sglang_chat(self, scope: dict, receive: Any, send: Any) -> None:
        body = _json(await _read_body(receive))
        self.requests.append(body)
        await self._gate().wait()  # TokenizerManager holds new requests while paused
        error = self._invalid(body)
        if error is not None:
            return await _send_json(send, 400, _error(error))
        self._issued += 1
        reply = self._completion(body, f"standin-{self._issued}")
        if body.get("stream"):
            await _send_sse(send, _chunks(body, reply))
        else:
            await _send_json(send, 200, reply)

    def _invalid(self, body: dict) -> str | None:
        if body.get("stream") and body.get("return_token_ids"):
            return (
                "return_token_ids is not supported with streaming on /v1/chat/completions. "
                "Please set stream=false when using return_token_ids=true."
            )
        if not isinstance(body.get("messages"), list):
            return "1 validation error:\n  {'type': 'missing', 'loc': ('body', 'messages')}"
        lora = body.get("lora_path")
        if lora is not None and lora not in self.adapters:
            return (
                f"Got LoRA adapter that has never been loaded: {lora}\n"
                f"All loaded adapters: {list(self.adapters)}."
            )
        return None

    def _completion(self, body: dict, request_id: str) -> dict:
        plain = {k: v for k, v in body.items() if k not in {"logprobs", "top_logprobs"}}
        reply = completion(plain, request_id, self.model_path)
        reply["model"] = body.get("model") or self.model_path  # SGLang echoes request.model
        reply["metadata"] = {"weight_version": self.weight_version}
        prompt = list(json.dumps(body["messages"]).encode())
        generated = 0
        for choice in reply["choices"]:
            output_ids = _generate(body, choice)
            generated += len(output_ids)
            choice["matched_stop"] = STOP_TOKEN if output_ids[-1:] == [STOP_TOKEN] else None
            if body.get("logprobs"):
                content = [_logprob(i, int(body.get("top_logprobs") or 0)) for i in output_ids]
                choice["logprobs"] = {"content": content}
            if body.get("return_token_ids"):
                choice["prompt_token_ids"] = prompt
                choice["response_token_ids"] = output_ids
            choice["_output_ids"] = output_ids  # for the stream; removed before sending
        usage = {"prompt_tokens": len(prompt), "completion_tokens": generated}
        reply["usage"] = {**usage, "total_tokens": len(prompt) + generated}
        if not body.get("stream"):
            for choice in reply["choices"]:
                del choice["_output_ids"]
        return reply


def _generate(body: dict, choice: dict) -> list[int]:
    """The byte tokens of the choice, cut at the token limit or ended by the stop token."""
    message = choice["message"]
    text = message.get("content") or "".join(
        f'<tool_call>{{"name": "{c["function"]["name"]}", "arguments": '
        f"{c['function']['arguments']}}}</tool_call>"
        for c in message.get("tool_calls") or []
    )
    output_ids = list(text.encode())
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if limit and len(output_ids) >= limit:
        choice["finish_reason"] = "length"
        if message.get("content") is not None:
            message["content"] = bytes(output_ids[:limit]).decode(errors="ignore")
        return output_ids[:limit]
    return [*output_ids, STOP_TOKEN]


def _token(token_id: int) -> str:
    return "<|im_end|>" if token_id == STOP_TOKEN else bytes([token_id]).decode(errors="replace")


def _logprob(token_id: int, top: int) -> dict:
    logprob = -0.01 - (token_id % 7) / 10
    entry = {"token": _token(token_id), "bytes": list(_token(token_id).encode())}
    alternatives = [{**entry, "logprob": logprob - rank} for rank in range(top)]
    return {**entry, "logprob": logprob, "top_logprobs": alternatives}


def _chunks(body: dict, reply: dict) -> Iterator[dict]:
    """SGLang's stream: one chunk per token, then `sglext.output_ids` when asked, then usage."""
    head = {"id": reply["id"], "object": "chat.completion.chunk", "created": reply["created"]}
    head["model"] = reply["model"]
    for choice in reply["choices"]:
        index, message = choice["index"], choice["message"]
        yield {**head, "choices": [_delta(index, {"role": "assistant", "content": ""})]}
        if message.get("tool_calls"):
            calls = [{**call, "index": n} for n, call in enumerate(message["tool_calls"])]
            yield {**head, "choices": [_delta(index, {"tool_calls": calls})]}
        for token_id in choice["_output_ids"]:
            text = "" if token_id == STOP_TOKEN or message.get("tool_calls") else _token(token_id)
            part = _delta(index, {"content": text} if text else {})
            if body.get("logprobs"):
                part["logprobs"] = {"content": [_logprob(token_id, 0)]}
            yield {**head, "choices": [part]}
        finish = _delta(index, {})
        finish["finish_reason"] = choice["finish_reason"]
        yield {**head, "choices": [finish]}
    if body.get("return_output_ids_in_sglext"):
        output_ids = [choice.pop("_output_ids") for choice in reply["choices"]]
        yield {**head, "choices": [], "sglext": {"output_ids": output_ids}}
    if (body.get("stream_options") or {}).get("include_usage"):
        yield {**head, "choices": [], "usage": reply["usage"]}


def _delta(index: int, delta: dict) -> dict:
    return {"index": index, "delta": delta, "logprobs": None, "finish_reason": None}


def _error(message: str) -> dict:
    """SGLang's ErrorResponse (openai/protocol.py), not OpenAI's {"error": {...}}."""
    return {
        "object": "error",
        "message": message,
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }


def _json(raw: bytes) -> dict:
    try:
        body = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


ADMIN_ROUTES = {
    "/pause_generation": SGLangStandIn._pause,
    "/continue_generation": SGLangStandIn._continue,
    "/update_weights_from_disk": SGLangStandIn._update_weights,
    "/load_lora_adapter": SGLangStandIn._load_lora,
    "/unload_lora_adapter": SGLangStandIn._unload_lora,
}
