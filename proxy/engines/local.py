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
way: loading, the forward step, the draw with its logprob, the guides and each token's bytes
are the model runtime's (`runtime.model`), shared with it; this module batches, streams and
answers in OpenAI's shapes.

Generation is a plain token loop with a KV cache (not `model.generate`), so the logprobs are
exactly the model's own and each request draws from its own seeded `torch.Generator`: the
same seed gives the same answer whatever other traffic runs. The requests on one set of
weights decode together, continuously batched (`_Decoder`): one forward pass a token for the
whole batch, requests joining and leaving it between steps. One thread per device
(`_Scheduler`) steps every set of weights' batch in turn, so the event loop stays free. On a
small CPU that is what lets throughput grow with concurrency (`benchmarks/local_engine.py`):
a thread per request mostly waits for the GIL.

An engine serves one set of weights for its life: a version with other weights gets an engine
of its own from the pool (`proxy.engines.pool`), so a canary and stable decode side by side
and each response's `model` names the weights that produced it.

torch, transformers and peft are imported only when a model is loaded (the `train` extra).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
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
from runtime.model import prompt_ids as render_prompt
from runtime.model.checkpoint import eos_ids, load_checkpoint, max_positions
from runtime.model.guide import ToolCallGuides
from runtime.model.sampling import draw, logprobs_of
from runtime.model.step import ForwardStep
from runtime.model.tokens import TokenTable

__all__ = [
    "LoadedModel",
    "LocalEngine",
    "Sampling",
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
    step: ForwardStep
    tokens: TokenTable
    guides: ToolCallGuides

    @functools.cached_property
    def decoder(self) -> _Decoder:
        """The batch every request on these weights decodes in."""
        return _Decoder(self)

    def next_logits(self, input_ids: Any, cache: Any, **batch: Any) -> tuple[Any, Any]:
        """The logits for the token after `input_ids` (one row per sequence), and the cache.

        `batch`: a padded batch's `attention_mask` and `position_ids`.
        """
        return self.step.next_logits(self.model, input_ids, cache, **batch)

    def token(self, token_id: int) -> tuple[str, list[int]]:
        """A token's text and its bytes, for OpenAI's logprob entries."""
        return self.tokens.token(token_id)


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
    checkpoint_dir = Path(checkpoint_dir)
    adapter = Path(adapter_dir) if adapter_dir else None
    model, tokenizer = load_checkpoint(checkpoint_dir, adapter, device=device, dtype=dtype)
    tokens = TokenTable(tokenizer)
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        version=version or weights_label(checkpoint_dir, adapter),
        checkpoint_dir=checkpoint_dir,
        adapter_dir=adapter,
        device=device,
        eos_ids=eos_ids(model, tokenizer),
        max_positions=max_positions(model),
        step=ForwardStep.of(model),
        tokens=tokens,
        guides=ToolCallGuides(tokens),
    )


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
    """The token ids of the request's messages (and tools) in the model's chat template,
    rendered as training renders them (`runtime.model.prompt_ids`)."""
    try:
        return render_prompt(loaded.tokenizer, body.get("messages") or [], body.get("tools"))
    except Exception as error:  # noqa: BLE001 - jinja and tokenizer errors alike
        raise UpstreamError(400, f"the chat template of {loaded.version} failed: {error}") from None


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


def _room(loaded: LoadedModel, prompt: list[int], sampling: Sampling) -> int:
    """How many tokens the completion may have: `max_tokens`, within the model's context."""
    room = (loaded.max_positions or len(prompt) + sampling.max_tokens) - len(prompt)
    if room < 1:
        raise UpstreamError(
            400,
            f"the prompt has {len(prompt)} tokens, no room left in the "
            f"{loaded.max_positions}-token context of {loaded.version}",
        )
    return min(sampling.max_tokens, room)


@dataclass(eq=False)
class _Job:
    """One request in the decoder: `sampling.n` rows of the batch, sampled with the request's
    own generator; `done` gets its choices (or the error that ended it)."""

    prompt: list[int]
    sampling: Sampling
    left: int  # tokens each choice may still make
    cancelled: threading.Event
    on_step: Callable[[list[Step]], None] | None
    done: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)
    choices: list[Choice] = field(default_factory=list)
    generator: Any = None
    guide: ToolCallGuide | None = None

    def take(self, loaded: LoadedModel, logits: Any) -> Any:
        """Sample this job's next tokens from its rows' logits; returns them."""
        texts = [c.written for c in self.choices]
        drawn = self.guide.restrict(logits, texts) if self.guide else logits
        tokens, logprobs = draw(
            logits,
            drawn,
            temperature=self.sampling.temperature,
            top_p=self.sampling.top_p,
            generator=self.generator,
        )
        streaming = self.on_step is not None
        steps = _advance(loaded, self.choices, tokens, logprobs, self.sampling, streaming=streaming)
        if self.on_step is not None:
            self.on_step(steps)
        self.left -= 1
        return tokens

    @property
    def over(self) -> bool:
        return self.left <= 0 or all(choice.finish_reason for choice in self.choices)

    def finish(self, loaded: LoadedModel) -> None:
        for choice in self.choices:
            choice.finish_reason = choice.finish_reason or "length"
            choice.decode(loaded, self.sampling.stop)
        self.settle(self.choices)

    def settle(self, result: list[Choice] | BaseException) -> None:
        """End the job with its choices or an error (once; a future cancelled meanwhile
        by the event loop's side has nobody left to tell)."""
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            if isinstance(result, BaseException):
                self.done.set_exception(result)
            else:
                self.done.set_result(result)


class _Decoder:
    """Continuous batching on one set of weights: all the requests decoding on them advance
    one token per forward pass of the whole batch.

    A request joins between two steps: its prompt runs alone (the prefill, its n choices as
    n rows), then its KV cache is left-padded to the batch's length and stacked under it.
    It leaves when its choices end, its room runs out or it is cancelled. Padding is masked
    out and each row has its own positions, so a row's logits are those it would have alone
    (up to float rounding), and each request draws with its own generator: a seed gives the
    same answer whatever runs beside it. Its steps run in the device's `_Scheduler` thread.
    """

    def __init__(self, loaded: LoadedModel) -> None:
        self.loaded = loaded
        self._lock = threading.Lock()
        self._waiting: list[_Job] = []
        # The batch, owned by the scheduler's thread: its jobs, row by row in that order,
        # and per row the attention mask over the cache, the next position and the last token.
        self._jobs: list[_Job] = []
        self._cache: Any = None
        self._mask: Any = None
        self._positions: Any = None
        self._last: Any = None
        self._padded = False  # some row has padding: the mask and positions must be passed

    def submit(self, job: _Job) -> None:
        with self._lock:
            self._waiting.append(job)
        _scheduler(self.loaded.device).wake(self)

    @property
    def idle(self) -> bool:
        with self._lock:
            return not self._waiting and not self._jobs

    def turn(self) -> bool:
        """Admit the requests waiting, drop the cancelled ones, then one step of the batch.

        False when there was nothing to do.
        """
        with self._lock:
            joining, self._waiting = self._waiting, []
        if not joining and not self._jobs:
            return False
        for job in joining:
            self._guarded([job], self._admit, job)
        self._leave([job for job in self._jobs if job.cancelled.is_set()], _Cancelled())
        if self._jobs:
            self._guarded(list(self._jobs), self._step)
        return True

    def _guarded(self, jobs: list[_Job], work: Callable[..., None], *args: Any) -> None:
        """Run `work`; a failure ends `jobs` with it (a torch error as the upstream's)."""
        try:
            work(*args)
        except Exception as error:  # noqa: BLE001 - torch errors of any kind (out of memory...)
            self._leave([job for job in jobs if job in self._jobs])
            for job in jobs:
                job.settle(_upstream_error(error, self.loaded))

    def _admit(self, job: _Job) -> None:
        """Prefill `job` alone, draw its first tokens and stack it under the batch."""
        import torch

        if job.cancelled.is_set():
            raise _Cancelled
        loaded, n = self.loaded, job.sampling.n
        job.choices = [Choice(index=i) for i in range(n)]
        job.generator = torch.Generator(device=loaded.device).manual_seed(job.sampling.seed)
        job.guide = loaded.guides.get(job.sampling.tool_names)
        inputs = torch.tensor([job.prompt] * n, device=loaded.device)
        logits, cache = loaded.next_logits(inputs, None)
        tokens = job.take(loaded, logits)
        if job.over:
            job.finish(loaded)
            return
        length = len(job.prompt)
        mask = torch.ones(n, length, dtype=torch.long, device=loaded.device)
        positions = torch.full((n,), length, dtype=torch.long, device=loaded.device)
        if not self._jobs:
            self._cache, self._mask, self._positions, self._last = cache, mask, positions, tokens
        else:
            width = max(self._mask.shape[1], length)
            _stack_cache(self._cache, cache, width)
            self._mask = torch.cat([_pad_left(self._mask, width), _pad_left(mask, width)])
            self._positions = torch.cat([self._positions, positions])
            self._last = torch.cat([self._last, tokens])
        self._padded = not bool(self._mask.all())
        self._jobs.append(job)

    def _step(self) -> None:
        """One forward pass of the batch; every job draws its next tokens from its rows."""
        import torch

        loaded = self.loaded
        self._mask = torch.cat([self._mask, self._mask.new_ones(len(self._mask), 1)], 1)
        padding = (
            {"attention_mask": self._mask, "position_ids": self._positions[:, None]}
            if self._padded
            else {}  # rows of one length: the model's own mask and positions are theirs
        )
        logits, self._cache = loaded.next_logits(self._last[:, None], self._cache, **padding)
        self._positions = self._positions + 1
        drawn, row, ended, failed = [], 0, [], []
        for job in self._jobs:
            rows = logits[row : row + job.sampling.n]
            row += job.sampling.n
            try:
                drawn.append(job.take(loaded, rows))
            except Exception as error:  # noqa: BLE001 - this request's own (its sampling, its stream)
                drawn.append(rows.argmax(-1))  # a stand-in: its rows leave below
                failed.append((job, _upstream_error(error, loaded)))
                continue
            if job.over:
                ended.append(job)
        self._last = torch.cat(drawn)
        self._leave(ended + [job for job, _ in failed])
        for job, error in failed:
            job.settle(error)
        for job in ended:
            job.finish(loaded)

    def _leave(self, jobs: list[_Job], error: BaseException | None = None) -> None:
        """Take `jobs` out of the batch (ending them with `error` when given)."""
        if not jobs:
            return
        import torch

        keep, row = [], 0
        for job in self._jobs:
            if job not in jobs:
                keep.extend(range(row, row + job.sampling.n))
            row += job.sampling.n
        self._jobs = [job for job in self._jobs if job not in jobs]
        if error is not None:
            for job in jobs:
                job.settle(error)
        if not self._jobs:
            self._cache = self._mask = self._positions = self._last = None
            return
        rows = torch.tensor(keep, device=self._mask.device)
        self._mask, self._positions, self._last = (
            self._mask[rows],
            self._positions[rows],
            self._last[rows],
        )
        # Columns that are padding in every row left are dropped with the rows.
        start = int(self._mask.any(0).long().argmax())
        self._mask = self._mask[:, start:]
        self._padded = not bool(self._mask.all())
        _select_cache(self._cache, rows, start)


class _Scheduler:
    """The one thread that runs the decoders of a device, one step of each in turn.

    Two sets of weights served at once (a stable and its canary) are two batches; in two
    threads they would take turns at the GIL between small tensor operations, which on a
    small CPU costs more than it overlaps (`benchmarks/local_engine.py --models 2`). The
    thread runs while a decoder has work and ends when none has.
    """

    def __init__(self, device: str) -> None:
        self.device = device
        self._lock = threading.Lock()
        self._busy: list[_Decoder] = []
        self._running = False

    def wake(self, decoder: _Decoder) -> None:
        """`decoder` has work: give it turns (starting the thread if it is not running)."""
        with self._lock:
            if decoder not in self._busy:
                self._busy.append(decoder)
            if self._running:
                return
            self._running = True
        threading.Thread(target=self._loop, name=f"decode on {self.device}", daemon=True).start()

    def _loop(self) -> None:
        import torch

        with torch.inference_mode():
            while True:
                with self._lock:
                    if not self._busy:
                        self._running = False
                        return
                    turns = list(self._busy)
                for decoder in turns:
                    if not decoder.turn():
                        with self._lock:
                            if decoder.idle:  # not if a request came since its turn
                                self._busy.remove(decoder)


_schedulers: dict[str, _Scheduler] = {}
_schedulers_lock = threading.Lock()


def _scheduler(device: str) -> _Scheduler:
    with _schedulers_lock:
        if device not in _schedulers:
            _schedulers[device] = _Scheduler(device)
        return _schedulers[device]


def _upstream_error(error: Exception, loaded: LoadedModel) -> Exception:
    """A failure of generation as the request's error: torch's as the upstream's (500)."""
    if isinstance(error, UpstreamError | _Cancelled):
        return error
    return UpstreamError(500, f"{loaded.version} failed to generate: {error!r}")


def _pad_left(tensor: Any, width: int) -> Any:
    """`tensor` ([rows, length] or a cache's [rows, heads, length, dim]) padded with zeros
    on the left of its length axis up to `width`."""
    import torch.nn.functional as F

    axis = 1 if tensor.dim() == 2 else 2
    missing = width - tensor.shape[axis]
    if not missing:
        return tensor
    padding = (missing, 0) if axis == 1 else (0, 0, missing, 0)
    return F.pad(tensor, padding)


def _stack_cache(cache: Any, joining: Any, width: int) -> None:
    """Stack `joining`'s rows under `cache`'s, both left-padded to `width` (in place)."""
    import torch

    for layer, new in zip(cache.layers, joining.layers, strict=True):
        layer.keys = torch.cat([_pad_left(layer.keys, width), _pad_left(new.keys, width)])
        layer.values = torch.cat([_pad_left(layer.values, width), _pad_left(new.values, width)])


def _select_cache(cache: Any, rows: Any, start: int) -> None:
    """Keep `rows` of `cache`, from position `start` on (in place)."""
    for layer in cache.layers:
        layer.keys = layer.keys[rows, :, start:]
        layer.values = layer.values[rows, :, start:]


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
    chosen = logprobs_of(logprobs, tokens).tolist()
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
        max_concurrency: requests decoding at once (in one batch); more wait their turn.
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
        max_concurrency: int = 8,
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
        self._loaded = loaded
        return loaded

    def _load(self, checkpoint: Path, adapter: Path | None, version: str | None) -> LoadedModel:
        if self.threads:
            import torch

            torch.set_num_threads(self.threads)
        return load_model(
            checkpoint, adapter, version=version, device=self.device, dtype=self.dtype
        )

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

        work = _decode(loaded, prompt, sampling, cancelled, on_step)
        work.add_done_callback(lambda _: steps.put_nowait(None))  # after every step queued
        try:
            while (batch := await asyncio.wait_for(steps.get(), timeout)) is not None:
                for step in batch:
                    yield writer.step(step)
            choices = await asyncio.shield(work)
            for choice in choices:
                if not writer.finished[choice.index]:
                    yield writer.ending(choice, choice.release(sampling.stop))
            writer.choices = choices
        finally:
            await _stop(work, cancelled)

    async def _run(self, loaded: LoadedModel, prompt: list[int], sampling: Sampling) -> list:
        cancelled = threading.Event()
        work = _decode(loaded, prompt, sampling, cancelled)
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


def _decode(
    loaded: LoadedModel,
    prompt: list[int],
    sampling: Sampling,
    cancelled: threading.Event,
    on_step: Callable[[list[Step]], None] | None = None,
) -> asyncio.Future[list[Choice]]:
    """Send a request to its weights' batch; the future gets its choices.

    `on_step`, when given, gets each token as it is made, with the text it releases.
    """
    job = _Job(prompt, sampling, _room(loaded, prompt, sampling), cancelled, on_step)
    loaded.decoder.submit(job)
    return asyncio.wrap_future(job.done)


async def _stop(work: asyncio.Future, cancelled: threading.Event) -> None:
    """Let a generation end before its slot is given back: tell it to stop, wait for it."""
    if not work.done():
        cancelled.set()
        await asyncio.wait([work])
    if not work.cancelled():
        work.exception()  # retrieved, so a failure already raised is not logged again
