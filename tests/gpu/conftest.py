"""Fixtures for the GPU tests: the tiny model and a perturbed copy, made locally."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory) -> tuple[Path, Path]:
    """The tiny Qwen2 and a copy with noise on every matrix but the embeddings.

    Measured on CPU: the untrained model repeats the last prompt token (its tied embeddings
    dominate the residual stream), and so does a model of another seed, so a second seed
    would not change greedy outputs; noise of 0.1 on the layers' matrices does.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evoplane.demo.tiny import init_tiny

    root = tmp_path_factory.mktemp("tiny")
    base = init_tiny(root / "base")
    model = AutoModelForCausalLM.from_pretrained(base)
    noise = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.ndim == 2 and "embed" not in name:
                parameter.add_(torch.randn(parameter.shape, generator=noise) * 0.1)
    model.save_pretrained(root / "perturbed")
    AutoTokenizer.from_pretrained(base).save_pretrained(root / "perturbed")
    return base, root / "perturbed"
