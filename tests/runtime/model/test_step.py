"""The KV-cache argument is read from the model's forward: transformers 5's `cache`,
earlier `past_key_values`, or none at all (a megatron view)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from runtime.model.step import ForwardStep, cache_of


class Transformers5:
    def forward(self, input_ids, cache=None, use_cache=None, logits_to_keep=0): ...


class Transformers4:
    def forward(self, input_ids, past_key_values=None, use_cache=None): ...


class View:
    def forward(self, input_ids, **_): ...


class Peft:
    """A peft model: its own forward takes anything; its base model's says what it takes."""

    def forward(self, *args, **kwargs): ...

    def get_base_model(self) -> Transformers5:
        return Transformers5()


@pytest.mark.parametrize(
    ("model", "step"),
    [
        (Transformers5(), ForwardStep("cache", trims_logits=True)),
        (Transformers4(), ForwardStep("past_key_values", trims_logits=False)),
        (View(), ForwardStep(None, trims_logits=False)),
        (Peft(), ForwardStep("cache", trims_logits=True)),
    ],
)
def test_the_step_is_read_from_the_forward_signature(model, step) -> None:
    assert ForwardStep.of(model) == step
    assert step.caches == (step.cache_kwarg is not None)


def test_a_step_passes_the_cache_by_its_name_and_keeps_the_last_logits_only() -> None:
    torch = pytest.importorskip("torch")
    calls = []

    def model(input_ids, **kwargs):
        calls.append(kwargs)
        return SimpleNamespace(logits=torch.zeros(1, 3, 5, dtype=torch.float16), cache="next")

    logits, cache = ForwardStep("cache", trims_logits=True).next_logits(model, None, "kv")
    assert calls == [{"use_cache": True, "cache": "kv", "logits_to_keep": 1}]
    assert logits.shape == (1, 5) and logits.dtype == torch.float32 and cache == "next"


def test_the_cache_is_found_under_either_name() -> None:
    assert cache_of(SimpleNamespace(cache="new")) == "new"
    assert cache_of(SimpleNamespace(cache=None, past_key_values="old")) == "old"
    assert cache_of(SimpleNamespace(logits=0)) is None
