"""A checkpoint loaded for serving or training: a transformers causal LM and its tokenizer,
optionally with a LoRA adapter on top.

torch, transformers and peft are imported only here, when a model is loaded (the `train`
extra), so importing the gateway or the trainer's modules stays light.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

__all__ = ["LOADING", "eos_ids", "load_checkpoint", "max_positions"]

# transformers builds a model under a process-wide meta-device context and fills it in
# afterwards: two loads in threads at once left each other's weights on the meta device
# ("Cannot copy out of meta tensor", huggingface/transformers#41782). One at a time:
# whatever else builds a model from weights in a thread holds it too.
LOADING = threading.Lock()


def load_checkpoint(
    checkpoint_dir: str | Path,
    adapter_dir: str | Path | None = None,
    *,
    device: str = "cpu",
    dtype: str = "float32",
) -> tuple[Any, Any]:
    """The model (in eval mode, on `device`) and tokenizer in `checkpoint_dir`, with the
    LoRA adapter in `adapter_dir` on top when given.

    Blocking (seconds for a real model): call it in a worker thread where that matters.

    Args:
        dtype: a torch dtype name ("float32", "bfloat16"); the weights are cast to it.

    Raises:
        FileNotFoundError: a directory is missing.
        RuntimeError: torch or transformers is not installed, or `device` is a CUDA device
            torch does not see.
    """
    torch, transformers = _import_train_stack()
    for path in [checkpoint_dir, *([adapter_dir] if adapter_dir else [])]:
        if not Path(path).is_dir():
            raise FileNotFoundError(f"{path} is not a directory")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device {device!r} asked for, but torch sees no CUDA device")
    # transformers 5 renamed the argument (and defaults to the checkpoint's own dtype).
    dtype_kwarg = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    with LOADING:
        tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint_dir)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            checkpoint_dir, **{dtype_kwarg: getattr(torch, dtype)}
        )
        if adapter_dir:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, adapter_dir)
        return model.to(device).eval(), tokenizer


def eos_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    """Every token that ends a turn: the generation config's (one or a list) and the tokenizer's."""
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = configured if isinstance(configured, list) else [configured]
    return frozenset(i for i in [*ids, tokenizer.eos_token_id] if i is not None)


def max_positions(model: Any) -> int | None:
    """The longest sequence the model's positions reach, when its config says."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return getattr(base.config, "max_position_embeddings", None)


def _import_train_stack() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as error:
        raise RuntimeError(
            f"loading a model needs torch and transformers ({error}); "
            "install the `train` extra: pip install 'evoplane[train]'"
        ) from error
    return torch, transformers
