"""What the SGLang GPU tests share: when to skip, how to serve the tiny model, a greedy call."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from proxy.engines.sglang import SGLangEngine
from tests.support.sglang_server import SGLangServer, launch_sglang

__all__ = ["LORA_ARGS", "MISSING", "TINY_ARGS", "greedy", "serve_tiny", "token_ids"]


def _missing() -> str | None:
    if importlib.util.find_spec("sglang") is None:
        return "sglang is not installed: pip install -e '.[test,train,gpu]'"
    import torch

    return None if torch.cuda.is_available() else "needs a CUDA GPU"


MISSING = _missing()  # why the GPU tests are skipped here, or None

# The tiny model has head_dim 32 and a 259-token vocabulary: the triton attention kernels and
# the torch sampler take any size. CUDA graphs would only slow the start. SGLang sizes its KV
# cache from the memory still free, so only one server runs at a time.
TINY_ARGS = (
    "--attention-backend",
    "triton",
    "--sampling-backend",
    "pytorch",
    "--disable-cuda-graph",
    "--mem-fraction-static",
    "0.1",
    "--max-running-requests",
    "8",
)
LORA_ARGS = (
    "--enable-lora",
    "--max-lora-rank",
    "8",
    "--lora-target-modules",
    "q_proj",
    "v_proj",
    "--max-loras-per-batch",
    "2",
)


@contextmanager
def serve_tiny(checkpoint: Path, log_dir: Path, args: Sequence[str] = ()) -> Iterator[SGLangServer]:
    """SGLang serving `checkpoint` as weight version "tiny-base", stopped on exit."""
    with launch_sglang(
        checkpoint,
        weight_version="tiny-base",
        args=[*TINY_ARGS, *args],
        log_path=log_dir / "server.log",
        env={"HF_HUB_OFFLINE": "1"},  # a path that is no directory must not send SGLang online
    ) as server:
        yield server


def greedy(user: str = "hello", **extra: object) -> dict:
    """A greedy chat request; SGLang's `ignore_eos` makes every answer 16 tokens long."""
    messages = [{"role": "user", "content": user}]
    body = {"model": "tiny", "messages": messages, "temperature": 0, "max_tokens": 16}
    return body | {"ignore_eos": True} | extra


async def token_ids(engine: SGLangEngine, model: str | None = None) -> list[int]:
    reply = await engine.complete(greedy(), model=model, timeout=60)
    return reply["choices"][0]["token_ids"]
