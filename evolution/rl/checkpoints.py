"""A training job's checkpoints: `step-<N>/` every `checkpoint_every` steps, `final/` at the end.

A step checkpoint holds the weights (or, with LoRA, the adapter alone: the base never changes),
the tokenizer and the trainer state (optimiser, RNG, step). Each is written to a temporary
directory and renamed into place, so a job killed at any moment resumes from its last complete
checkpoint, not from zero.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evolution.rl.config import TrainConfig
from evolution.rl.policy import Policy

__all__ = [
    "STATE_FILE",
    "latest_checkpoint",
    "restore_checkpoint",
    "save_checkpoint",
    "save_final",
]

STATE_FILE = "trainer_state.pt"


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    """The newest complete `step-<N>` checkpoint in `out_dir`, None when there is none."""
    complete = [
        path
        for path in Path(out_dir).glob("step-*")
        if path.is_dir() and (path / STATE_FILE).exists() and path.name[5:].isdigit()
    ]
    return max(complete, key=lambda p: int(p.name[5:]), default=None)


def save_checkpoint(
    policy: Policy,
    out_dir: Path,
    step: int,
    optimiser: Any,
    rng: random.Random,
    generator: Any,
    config: TrainConfig,
) -> Path:
    """Write `out_dir/step-<step>`: the weights and everything a resume needs."""
    import torch

    state = {
        "step": step,
        "optimiser": optimiser.state_dict(),
        "rng": rng.getstate(),
        "generator": generator.get_state(),
        "config": config.to_dict(),
    }

    def write(staging: Path) -> None:
        _write_weights(policy, staging, config, merged=False)
        torch.save(state, staging / STATE_FILE)

    return _write_atomically(out_dir, f"step-{step}", write)


def restore_checkpoint(path: Path, optimiser: Any, rng: random.Random, generator: Any) -> int:
    """Load a checkpoint's trainer state into `optimiser`, `rng` and `generator`; its step."""
    import torch

    state = torch.load(path / STATE_FILE, weights_only=False)
    optimiser.load_state_dict(state["optimiser"])
    rng.setstate(state["rng"])
    generator.set_state(state["generator"])
    return int(state["step"])


def save_final(policy: Policy, out_dir: Path, config: TrainConfig) -> Path:
    """Write `out_dir/final`: a full HF checkpoint, a LoRA adapter merged into its base."""
    return _write_atomically(
        out_dir, "final", lambda staging: _write_weights(policy, staging, config, merged=True)
    )


def _write_atomically(out_dir: Path, name: str, write: Callable[[Path], None]) -> Path:
    """`out_dir/name`, written by `write` into a staging directory and renamed into place."""
    target = out_dir / name
    staging = out_dir / f".{name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    write(staging)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


def _write_weights(policy: Policy, directory: Path, config: TrainConfig, *, merged: bool) -> None:
    """Full weights, or (LoRA, not merged) the adapter alone: the base never changes."""
    directory.mkdir(parents=True, exist_ok=True)
    policy.tokenizer.save_pretrained(directory)
    if config.lora is None:
        policy.model.save_pretrained(directory)
    elif merged:
        import copy

        copy.deepcopy(policy.model).merge_and_unload().save_pretrained(directory)
    else:
        policy.model.save_pretrained(directory / "adapter")
