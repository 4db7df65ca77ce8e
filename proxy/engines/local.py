"""The engine for a transformers causal LM loaded in the gateway's own process (CPU or GPU).

It serves OpenAI chat completions from a local checkpoint directory, optionally with a LoRA
adapter on top, and answers with what the RL trainer needs to learn from served traffic: the
prompt and completion token ids and, for every completion token, the logprob of that token
under the distribution it was sampled from (logits / temperature; the raw logits when
greedy). top_p only narrows which tokens may be drawn; the logprobs stay those of the
temperature-scaled distribution, as the trainer recomputes them. So does the tool-call guide:
while the model writes the head of a tool call (`<tool_call>{"name": "...", "arguments": `),
only tokens that keep it on that form with one of the offered tools' names (or the one
`tool_choice` names) may be drawn, as the structural tags of vLLM and SGLang keep calls to
real tools; the arguments stay the model's own. The RL trainer samples its groups the same
way.

Generation is a plain token loop with a KV cache (not `model.generate`), so the logprobs are
exactly the model's own and each request draws from its own seeded `torch.Generator`: the
same seed gives the same answer whatever other traffic runs. Generation runs in worker
threads, at most `max_concurrency` at once, so the event loop stays free.

`swap` loads new weights in a thread and then switches atomically: a request keeps the
weights it started with, and each response's `model` names the weights that produced it.

torch, transformers and peft are imported only when a model is loaded (the `train` extra).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import secrets
import threading
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from atdp.tool_text import (
    ToolCallGuide,
    ToolCallStream,
    offered_tool_names,
    parse_tool_calls,
    partial_suffix,
)
from proxy.engines.base import UpstreamEngine, UpstreamError, UpstreamTimeout

__all__ = [
    "LoadedModel",
    "LocalEngine",
    "Sampling",
    "generate",
    "load_model",
    "prompt_ids",
    "weights_label",
]

MAX_N = 64
MAX_TOP_LOGPROBS = 20


class _Cancelled(Exception):
    """The request went away (timeout, client disconnect): generation stops early."""


# --- the weights ------------------------------------------------------------------------


def weights_label(checkpoint_dir: str | Path, adapter_dir: str | Path | None = None) -> str:
    """The default name of a set of weights: the checkpoint path, `+adapter` when one is on."""
    label = str(checkpoint_dir)
    return f"{label}+{adapter_dir}" if adapter_dir else label


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """One set of weights ready to serve: a request holds it from start to finish."""

    model: Any
    tokenizer: Any
    version: str
    checkpoint_dir: Path
    adapter_dir: Path | None
    device: str
    eos_ids: frozenset[int]
    max_positions: int | None
    cache_kwarg: str  # "cache" (transformers >= 5) or "past_key_values"
    trims_logits: bool  # forward accepts logits_to_keep
    byte_level: dict[str, int] | None  # char -> byte for byte-level BPE vocabularies
    _tokens: dict[int, tuple[str, list[int]]] = field(default_factory=dict, repr=False)
    _guides: dict[tuple[str, ...], ToolCallGuide] = field(default_factory=dict, repr=False)

    def next_logits(self, input_ids: Any, cache: Any) -> tuple[Any, Any]:
        """The logits for the token after `input_ids` (one row per sequence), and the cache."""
        kwargs: dict[str, Any] = {self.cache_kwarg: cache, "use_cache": True}
        if self.trims_logits:
            kwargs["logits_to_keep"] = 1
        out = self.model(input_ids=input_ids, **kwargs)
        cache = out.get("cache") if out.get("cache") is not None else out.get("past_key_values")
        return out.logits[:, -1, :].float(), cache

    def token(self, token_id: int) -> tuple[str, list[int]]:
        """A token's text and its bytes, for OpenAI's logprob entries."""
        known = self._tokens.get(token_id)
        if known is None:
            text = self.tokenizer.decode([token_id])
            known = self._tokens[token_id] = (text, self._bytes(token_id, text))
        return known

    def guide(self, names: tuple[str, ...]) -> ToolCallGuide | None:
        """The tool-call guide for these offered names (made once per set); None for none."""
        key = tuple(sorted(set(names)))
        if not key:
            return None
        if key not in self._guides:
            if len(self._guides) >= 64:  # agents offer few tool sets; bound it all the same
                self._guides.pop(next(iter(self._guides)))
            pieces = [self.token(i)[0] for i in range(len(self.tokenizer))]
            self._guides[key] = ToolCallGuide(key, pieces)
        return self._guides[key]

    def _bytes(self, token_id: int, text: str) -> list[int]:
        piece = self.tokenizer.convert_ids_to_tokens(token_id)
        table = self.byte_level
        if table and isinstance(piece, str) and all(char in table for char in piece):
            return [table[char] for char in piece]
        return list(text.encode())


def load_model(
    checkpoint_dir: str | Path,
    adapter_dir: str | Path | None = None,
    *,
    version: str | None = None,
    device: str = "cpu",
    dtype: str = "float32",
) -> LoadedModel:
    """Load a causal LM and its tokenizer from `checkpoint_dir`, with a LoRA adapter on top.

    Blocking (seconds for a real model): call it in a worker thread.
    """
    torch, transformers = _import_train_stack()
    checkpoint_dir = Path(checkpoint_dir)
    adapter = Path(adapter_dir) if adapter_dir else None
    for path in [checkpoint_dir, *([adapter] if adapter else [])]:
        if not path.is_dir():
            raise FileNotFoundError(f"{path} is not a directory")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device {device!r} asked for, but torch sees no CUDA device")
    tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint_dir)
    dtype_kwarg = "dtype" if _transformers_major(transformers) >= 5 else "torch_dtype"
    model = transformers.AutoModelForCausalLM.from_pretrained(
        checkpoint_dir, **{dtype_kwarg: getattr(torch, dtype)}
    )
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter)
    model.to(device).eval()
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    parameters = inspect.signature(base.forward).parameters
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        version=version or weights_label(checkpoint_dir, adapter),
        checkpoint_dir=checkpoint_dir,
        adapter_dir=adapter,
        device=device,
        eos_ids=_eos_ids(model, tokenizer),
        max_positions=getattr(base.config, "max_position_embeddings", None),
        cache_kwarg="cache" if "cache" in parameters else "past_key_values",
        trims_logits="logits_to_keep" in parameters,
        byte_level=_byte_level_table(tokenizer),
    )


def _import_train_stack() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as error:
        raise RuntimeError(
            f"the local engine needs torch and transformers ({error}); "
            "install the `train` extra: pip install 'evoplane[train]'"
        ) from error
    return torch, transformers


def _transformers_major(transformers: Any) -> int:
    return int(transformers.__version__.split(".")[0])


def _eos_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    """Every token that ends a turn: the generation config's (one or a list) and the tokenizer's."""
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = configured if isinstance(configured, list) else [configured]
    return frozenset(i for i in [*ids, tokenizer.eos_token_id] if i is not None)


def _byte_level_table(tokenizer: Any) -> dict[str, int] | None:
    """GPT-2's printable-character -> byte map, when the vocabulary is byte-level BPE."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if type(getattr(backend, "decoder", None)).__name__ != "ByteLevel":
        return None
    printable = {*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)}
    table, shifted = {}, 0
    for byte in range(256):
        if byte in printable:
            table[chr(byte)] = byte
        else:
            table[chr(256 + shifted)] = byte
            shifted += 1
    return table


# --- the request ------------------------------------------------------------------------


@dataclass(frozen=True)
class Sampling:
    """The decoding parameters of one request, checked."""

    temperature: float = 1.0  # 0: greedy
    top_p: float = 1.0
    max_tokens: int = 512
    stop: tuple[str, ...] = ()
    n: int = 1
    seed: int = 0
    top_logprobs: int = 0
    tool_names: tuple[str, ...] = ()  # the names a tool call may use; () leaves them free

    @classmethod
    def of(cls, body: dict, *, default_max_tokens: int, guide_tools: bool = True) -> Sampling:
        """The sampling an OpenAI request body asks for; UpstreamError(400) when invalid.

        With `guide_tools`, a request that offers tools gets their names as `tool_names`.
        """
        stop, seed = body.get("stop") or (), body.get("seed")
        try:
            sampling = cls(
                temperature=_number(body, "temperature", 1.0),
                top_p=_number(body, "top_p", 1.0),
                max_tokens=int(
                    _first(body, "max_completion_tokens", "max_tokens", default=default_max_tokens)
                ),
                stop=(stop,) if isinstance(stop, str) else tuple(s for s in stop if s),
                n=int(_first(body, "n", default=1)),
                seed=secrets.randbits(63) if seed is None else int(seed) % 2**63,
                top_logprobs=int(body.get("top_logprobs") or 0) if body.get("logprobs") else 0,
                tool_names=tuple(offered_tool_names(body.get("tools"), body.get("tool_choice")))
                if guide_tools and _parses_tools(body)
                else (),
            )
        except (TypeError, ValueError) as error:
            raise UpstreamError(400, f"invalid sampling parameters: {error}") from None
        sampling._check()
        return sampling

    def _check(self) -> None:
        problems = [
            (self.temperature < 0, "temperature must be >= 0"),
            (not 0 < self.top_p <= 1, "top_p must be in (0, 1]"),
            (self.max_tokens < 1, "max_tokens must be >= 1"),
            (not 1 <= self.n <= MAX_N, f"n must be between 1 and {MAX_N}"),
            (
                not 0 <= self.top_logprobs <= MAX_TOP_LOGPROBS,
                f"top_logprobs must be between 0 and {MAX_TOP_LOGPROBS}",
            ),
        ]
        for failed, message in problems:
            if failed:
                raise UpstreamError(400, message)


def _first(body: dict, *keys: str, default: Any) -> Any:
    return next((body[k] for k in keys if body.get(k) is not None), default)


def _number(body: dict, key: str, default: float) -> float:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UpstreamError(400, f"{key} must be a number")
    return float(value)


def prompt_ids(loaded: LoadedModel, body: dict) -> list[int]:
    """The token ids of the request's messages (and tools) in the model's chat template."""
    messages = [_template_message(m) for m in body.get("messages") or []]
    try:
        text = loaded.tokenizer.apply_chat_template(
            messages, tools=body.get("tools") or None, add_generation_prompt=True, tokenize=False
        )
    except Exception as error:  # noqa: BLE001 - jinja and tokenizer errors alike
        raise UpstreamError(400, f"the chat template of {loaded.version} failed: {error}") from None
    return list(loaded.tokenizer(text, add_special_tokens=False)["input_ids"])


def _template_message(message: dict) -> dict:
    """OpenAI message shapes the templates do not know: content parts, the developer role."""
    message = dict(message)
    if message.get("role") == "developer":
        message["role"] = "system"
    content = message.get("content")
    if isinstance(content, list):
        message["content"] = "".join(
            part.get("text", "") for part in content if isinstance(part, dict)
        )
    return message


# --- generation -------------------------------------------------------------------------


@dataclass
class Choice:
    """One generated sequence: its tokens with logprobs, then its text once finished."""

    index: int
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[dict] = field(default_factory=list)
    finish_reason: str | None = None
    text: str = ""
    _text_ids: list[int] = field(default_factory=list)
    _released: int = 0
    written: str = ""  # the tokens' texts joined, for the tool-call guide

    def push(self, loaded: LoadedModel, token_id: int, logprob: float, top: list) -> dict:
        """Add a sampled token; returns its OpenAI logprob entry."""
        text, raw = loaded.token(token_id)
        entry = {
            "token": text,
            "logprob": logprob,
            "bytes": raw,
            "top_logprobs": [
                dict(zip(("token", "bytes"), loaded.token(i), strict=True), logprob=lp)
                for i, lp in top
            ],
        }
        self.token_ids.append(token_id)
        self.logprobs.append(entry)
        if token_id in loaded.eos_ids:
            self.finish_reason = "stop"
        else:
            self._text_ids.append(token_id)
            self.written += text
        return entry

    def decode(self, loaded: LoadedModel, stop: tuple[str, ...]) -> None:
        """Bring `text` up to date; a stop string ends the choice, and is cut off."""
        self.text = loaded.tokenizer.decode(self._text_ids, skip_special_tokens=True)
        cut = min((i for i in (self.text.find(s) for s in stop) if i >= 0), default=-1)
        if cut >= 0:
            self.text = self.text[:cut]
            self.finish_reason = "stop"

    def release(self, stop: tuple[str, ...]) -> str:
        """Text not streamed yet that can no longer change: a trailing partial character or
        the start of a stop string is held back until the next tokens decide it."""
        visible = self.text
        if self.finish_reason is None:
            visible = visible.rstrip("\ufffd")
            held = max((partial_suffix(visible, s) for s in stop), default=0)
            visible = visible[: len(visible) - held]
        delta = visible[self._released :]
        self._released = max(self._released, len(visible))
        return delta


@dataclass(frozen=True)
class Step:
    """One token of one choice, as the stream sends it."""

    index: int
    token_id: int
    logprob: dict
    text: str
    finish_reason: str | None


def generate(
    loaded: LoadedModel,
    prompt: list[int],
    sampling: Sampling,
    *,
    cancelled: threading.Event,
    on_step: Callable[[list[Step]], None] | None = None,
) -> list[Choice]:
    """Sample `sampling.n` completions of `prompt` (blocking: run it in a worker thread).

    `on_step`, when given, gets each token as it is made, with the text it releases.
    With `sampling.tool_names`, a tool call may be written with those names only.
    """
    import torch

    room = (loaded.max_positions or len(prompt) + sampling.max_tokens) - len(prompt)
    if room < 1:
        raise UpstreamError(
            400,
            f"the prompt has {len(prompt)} tokens, no room left in the "
            f"{loaded.max_positions}-token context of {loaded.version}",
        )
    choices = [Choice(index=i) for i in range(sampling.n)]
    generator = torch.Generator(device=loaded.device).manual_seed(sampling.seed)
    inputs = torch.tensor([prompt] * sampling.n, device=loaded.device)
    guide = loaded.guide(sampling.tool_names)
    cache = None
    with torch.inference_mode():
        for _ in range(min(sampling.max_tokens, room)):
            if cancelled.is_set():
                raise _Cancelled
            logits, cache = loaded.next_logits(inputs, cache)
            drawn = guide.restrict(logits, [c.written for c in choices]) if guide else logits
            tokens, logprobs = _pick(logits, drawn, sampling, generator)
            steps = _advance(loaded, choices, tokens, logprobs, sampling, streaming=bool(on_step))
            if on_step is not None:
                on_step(steps)
            if all(choice.finish_reason for choice in choices):
                break
            inputs = tokens[:, None]
    for choice in choices:
        choice.finish_reason = choice.finish_reason or "length"
        choice.decode(loaded, sampling.stop)
    return choices


def _pick(logits: Any, drawn: Any, sampling: Sampling, generator: Any) -> tuple[Any, Any]:
    """The next token of each row, drawn from `drawn` (the logits, or the guide's restriction
    of them), and the log-distribution of the model's own logits it is reported under."""
    import torch

    if sampling.temperature == 0:
        return drawn.argmax(-1), torch.log_softmax(logits, -1)
    logprobs = torch.log_softmax(logits / sampling.temperature, -1)
    probs = logprobs.exp() if drawn is logits else torch.softmax(drawn / sampling.temperature, -1)
    if sampling.top_p < 1:
        ranked, order = probs.sort(-1, descending=True)
        # Keep the smallest head whose mass reaches top_p (the first token always).
        ranked[ranked.cumsum(-1) - ranked > sampling.top_p] = 0
        probs = torch.zeros_like(probs).scatter(-1, order, ranked)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1), logprobs


def _advance(
    loaded: LoadedModel,
    choices: list[Choice],
    tokens: Any,
    logprobs: Any,
    sampling: Sampling,
    *,
    streaming: bool,
) -> list[Step]:
    """Record the sampled tokens of the choices still running."""
    ids = tokens.tolist()
    chosen = logprobs.gather(-1, tokens[:, None]).squeeze(-1).tolist()
    top: list[list] = [[] for _ in choices]
    if sampling.top_logprobs:
        values, indices = logprobs.topk(sampling.top_logprobs, dim=-1)
        pairs = zip(indices.tolist(), values.tolist(), strict=True)
        top = [list(zip(i, v, strict=True)) for i, v in pairs]
    steps = []
    for choice in choices:
        if choice.finish_reason:
            continue
        i = choice.index
        entry = choice.push(loaded, ids[i], chosen[i], top[i])
        if streaming or sampling.stop:
            choice.decode(loaded, sampling.stop)
        text = choice.release(sampling.stop) if streaming else ""
        steps.append(Step(i, ids[i], entry, text, choice.finish_reason))
    return steps


def _parses_tools(body: dict) -> bool:
    return bool(body.get("tools")) and body.get("tool_choice") != "none"


# --- responses --------------------------------------------------------------------------


def _completion(
    loaded: LoadedModel, body: dict, prompt: list[int], choices: list[Choice]
) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": loaded.version,
        "choices": [_choice(choice, tools=_parses_tools(body)) for choice in choices],
        "usage": _usage(prompt, choices),
        "prompt_token_ids": prompt,
    }


def _choice(choice: Choice, *, tools: bool) -> dict[str, Any]:
    content, calls = parse_tool_calls(choice.text) if tools else (choice.text, [])
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {
        "index": choice.index,
        "message": message,
        "logprobs": {"content": choice.logprobs},
        "finish_reason": _finish_reason(choice.finish_reason, bool(calls)),
        "token_ids": choice.token_ids,
    }


def _finish_reason(reason: str | None, called: bool) -> str | None:
    return "tool_calls" if called and reason == "stop" else reason


def _usage(prompt: list[int], choices: list[Choice]) -> dict[str, int]:
    completion = sum(len(choice.token_ids) for choice in choices)
    return {
        "prompt_tokens": len(prompt),
        "completion_tokens": completion,
        "total_tokens": len(prompt) + completion,
    }


class _ChunkWriter:
    """Builds the `chat.completion.chunk`s of one streamed completion."""

    def __init__(self, loaded: LoadedModel, body: dict, n: int) -> None:
        self.head = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": loaded.version,
        }
        self.tools = _parses_tools(body)
        self.splitters = [ToolCallStream() for _ in range(n)]
        self.calls = [0] * n
        self.finished = [False] * n
        self.choices: list[Choice] = []  # all of them, once generation has ended

    def chunk(self, choices: list[dict], **extra: Any) -> dict[str, Any]:
        return {**self.head, "choices": choices, **extra}

    def opening(self, prompt: list[int]) -> dict[str, Any]:
        parts = [
            {"index": i, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
            for i in range(len(self.splitters))
        ]
        return self.chunk(parts, prompt_token_ids=prompt)

    def step(self, step: Step) -> dict[str, Any]:
        delta = self._delta(step.index, step.text, final=step.finish_reason is not None)
        return self.chunk(
            [
                {
                    "index": step.index,
                    "delta": delta,
                    "logprobs": {"content": [step.logprob]},
                    "finish_reason": self._finish(step.index, step.finish_reason),
                    "token_ids": [step.token_id],
                }
            ]
        )

    def ending(self, choice: Choice, text: str) -> dict[str, Any]:
        """The last chunk of a choice that ran out of tokens (no token left to carry it)."""
        delta = self._delta(choice.index, text, final=True)
        reason = self._finish(choice.index, choice.finish_reason)
        return self.chunk([{"index": choice.index, "delta": delta, "finish_reason": reason}])

    def _delta(self, index: int, text: str, *, final: bool) -> dict[str, Any]:
        if not self.tools:
            return {"content": text} if text else {}
        splitter = self.splitters[index]
        content, calls = splitter.feed(text)
        if final:
            rest, more = splitter.close()
            content, calls = content + rest, calls + more
        delta: dict[str, Any] = {"content": content} if content else {}
        if calls:
            first = self.calls[index]
            delta["tool_calls"] = [{"index": first + k, **c} for k, c in enumerate(calls)]
            self.calls[index] += len(calls)
        return delta

    def _finish(self, index: int, reason: str | None) -> str | None:
        if reason is None:
            return None
        self.finished[index] = True
        return _finish_reason(reason, self.calls[index] > 0)


# --- the engine -------------------------------------------------------------------------


class LocalEngine(UpstreamEngine):
    """A causal LM served in-process from `checkpoint_dir` (plus an optional LoRA adapter).

    The weights load in a worker thread on first use (concurrent first requests wait for the
    same load). The `model` a request names is ignored: an engine serves one set of weights.

    Args:
        checkpoint_dir: a `from_pretrained` directory with model and tokenizer.
        adapter_dir: a peft LoRA adapter directory to apply on top, if any.
        version: the weights' name, returned as each response's `model`; defaults to the path.
        device: "cpu", "cuda" or "cuda:N".
        dtype: a torch dtype name ("float32", "bfloat16").
        max_concurrency: generations running at once; more requests wait their turn.
        max_tokens: the completion length when a request sets none.
        threads: torch intra-op threads, set process-wide at load; None keeps torch's.
        guide_tools: keep the heads of tool calls to the request's tools while they are
            written (see the module's docstring); False lets the model write anything.
    """

    def __init__(
        self,
        checkpoint_dir: str | Path,
        adapter_dir: str | Path | None = None,
        *,
        version: str | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        max_concurrency: int = 4,
        max_tokens: int = 512,
        threads: int | None = None,
        guide_tools: bool = True,
    ) -> None:
        self.device, self.dtype, self.max_tokens, self.threads = device, dtype, max_tokens, threads
        self.guide_tools = guide_tools
        self._weights = (Path(checkpoint_dir), Path(adapter_dir) if adapter_dir else None, version)
        self._loaded: LoadedModel | None = None
        self._loading: asyncio.Future[LoadedModel] | None = None
        self._slots = asyncio.Semaphore(max_concurrency)
        self._swap_lock = asyncio.Lock()
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._retired = False

    @property
    def version(self) -> str:
        """The name of the weights new requests are served with."""
        if self._loaded is not None:
            return self._loaded.version
        checkpoint, adapter, version = self._weights
        return version or weights_label(checkpoint, adapter)

    @property
    def loaded(self) -> LoadedModel | None:
        """The weights new requests start on; None until the first request loads them."""
        return self._loaded

    @property
    def in_flight(self) -> int:
        """Requests accepted and not yet finished (waiting for a slot or generating)."""
        return self._in_flight

    async def load(self) -> LoadedModel:
        """The current weights, loading them (once, in a thread) if they are not yet."""
        if self._loaded is not None:
            return self._loaded
        if self._loading is None:
            self._loading = asyncio.ensure_future(self._load_current())
        try:
            return await asyncio.shield(self._loading)
        except Exception as error:
            raise UpstreamError(503, f"could not load {self.version}: {error}") from error

    async def _load_current(self) -> LoadedModel:
        try:
            loaded = await asyncio.to_thread(self._load, *self._weights)
        finally:
            self._loading = None  # a failed load is tried again by the next request
        if self._loaded is None:  # a swap that finished meanwhile wins
            self._loaded = loaded
        return loaded

    def _load(self, checkpoint: Path, adapter: Path | None, version: str | None) -> LoadedModel:
        if self.threads:
            import torch

            torch.set_num_threads(self.threads)
        return load_model(
            checkpoint, adapter, version=version, device=self.device, dtype=self.dtype
        )

    async def swap(
        self,
        *,
        checkpoint_dir: str | Path | None = None,
        adapter_dir: str | Path | None = None,
        version: str | None = None,
    ) -> str:
        """Serve new weights: `checkpoint_dir` (default: the current one) with `adapter_dir`
        (default: none). They load in a thread; then new requests start on them while
        requests in flight finish on the old ones. Returns the new weights' name.

        Raises:
            UpstreamError: the new weights could not be loaded; the old ones keep serving.
        """
        async with self._swap_lock:
            if self._loading is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._loading)
            weights = (
                Path(checkpoint_dir) if checkpoint_dir else self._weights[0],
                Path(adapter_dir) if adapter_dir else None,
                version,
            )
            try:
                loaded = await asyncio.to_thread(self._load, *weights)
            except Exception as error:
                name = version or weights_label(*weights[:2])
                raise UpstreamError(503, f"could not load {name}: {error}") from error
            self._weights, self._loaded = weights, loaded
            return loaded.version

    async def complete(
        self, body: dict, *, model: str | None, timeout: float, sent: asyncio.Event | None = None
    ) -> dict:
        """One chat completion; `timeout` bounds the wait for a slot and the generation."""
        sampling = Sampling.of(
            body, default_max_tokens=self.max_tokens, guide_tools=self.guide_tools
        )
        if sent is not None:
            sent.set()  # nothing leaves the process: the request is "sent" at once
        try:
            async with asyncio.timeout(timeout), self._serving() as loaded:
                prompt = prompt_ids(loaded, body)
                choices = await self._run(loaded, prompt, sampling)
        except TimeoutError as error:
            raise UpstreamTimeout(f"{self.version} did not answer within {timeout} s") from error
        return _completion(loaded, body, prompt, choices)

    async def stream(
        self, body: dict, *, model: str | None, timeout: float
    ) -> AsyncGenerator[dict]:
        """Chunks of a streamed completion, one per token; `timeout` bounds each wait."""
        sampling = Sampling.of(
            body, default_max_tokens=self.max_tokens, guide_tools=self.guide_tools
        )
        try:
            async with contextlib.AsyncExitStack() as stack:
                async with asyncio.timeout(timeout):
                    loaded = await stack.enter_async_context(self._serving())
                prompt = prompt_ids(loaded, body)
                writer = _ChunkWriter(loaded, body, sampling.n)
                yield writer.opening(prompt)
                # Closed with the stream, so a client that leaves stops its generation before
                # the slot is given back.
                chunks = self._stream_chunks(loaded, prompt, sampling, writer, timeout)
                async with contextlib.aclosing(chunks):
                    async for chunk in chunks:
                        yield chunk
                if (body.get("stream_options") or {}).get("include_usage"):
                    yield writer.chunk([], usage=_usage(prompt, writer.choices))
        except TimeoutError as error:
            raise UpstreamTimeout(f"{self.version} stalled for {timeout} s") from error

    async def _stream_chunks(
        self,
        loaded: LoadedModel,
        prompt: list[int],
        sampling: Sampling,
        writer: _ChunkWriter,
        timeout: float,
    ) -> AsyncIterator[dict]:
        loop = asyncio.get_running_loop()
        steps: asyncio.Queue[list[Step] | None] = asyncio.Queue()
        cancelled = threading.Event()

        def on_step(batch: list[Step]) -> None:
            loop.call_soon_threadsafe(steps.put_nowait, batch)

        work = asyncio.ensure_future(
            asyncio.to_thread(
                _generation, loaded, prompt, sampling, cancelled=cancelled, on_step=on_step
            )
        )
        work.add_done_callback(lambda _: steps.put_nowait(None))  # after every step queued
        try:
            while (batch := await asyncio.wait_for(steps.get(), timeout)) is not None:
                for step in batch:
                    yield writer.step(step)
            choices = await work
            for choice in choices:
                if not writer.finished[choice.index]:
                    yield writer.ending(choice, choice.release(sampling.stop))
            writer.choices = choices
        finally:
            await _stop(work, cancelled)

    async def _run(self, loaded: LoadedModel, prompt: list[int], sampling: Sampling) -> list:
        cancelled = threading.Event()
        work = asyncio.ensure_future(
            asyncio.to_thread(_generation, loaded, prompt, sampling, cancelled=cancelled)
        )
        try:
            return await asyncio.shield(work)
        finally:
            await _stop(work, cancelled)

    @contextlib.asynccontextmanager
    async def _serving(self) -> AsyncIterator[LoadedModel]:
        """A generation slot and the weights the request keeps until it ends."""
        self._in_flight += 1
        self._idle.clear()
        try:
            async with self._slots:
                yield await self.load()
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._idle.set()
                if self._retired:
                    self._loaded = None

    async def aclose(self) -> None:
        """Wait for the requests in flight, then free the weights.

        A request that still reaches the engine afterwards loads them again (and frees them
        when it ends): an engine the gateway evicted may still be in a request's hands.
        """
        self._retired = True
        await self._idle.wait()
        self._loaded = None


def _generation(
    loaded: LoadedModel,
    prompt: list[int],
    sampling: Sampling,
    *,
    cancelled: threading.Event,
    on_step: Callable[[list[Step]], None] | None = None,
) -> list[Choice]:
    """`generate` in a worker thread: a failure of the model is the upstream's error."""
    try:
        return generate(loaded, prompt, sampling, cancelled=cancelled, on_step=on_step)
    except (UpstreamError, _Cancelled):
        raise
    except Exception as error:  # noqa: BLE001 - torch errors of any kind (out of memory...)
        raise UpstreamError(500, f"{loaded.version} failed to generate: {error!r}") from error


async def _stop(work: asyncio.Future, cancelled: threading.Event) -> None:
    """Let a generation end before its slot is given back: tell it to stop, wait for it."""
    if not work.done():
        cancelled.set()
        await asyncio.wait([work])
    if not work.cancelled():
        work.exception()  # retrieved, so a failure already raised is not logged again
