"""One forward step of a causal LM with a KV cache, under whichever name its forward takes
the cache by (transformers 5 renamed `past_key_values` to `cache`)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

__all__ = ["ForwardStep", "cache_of"]


@dataclass(frozen=True)
class ForwardStep:
    """How a model's forward takes a KV cache, read once from its signature.

    `cache_kwarg` is None for a model that takes none (a megatron view, say).
    """

    cache_kwarg: str | None
    trims_logits: bool  # forward accepts logits_to_keep

    @classmethod
    def of(cls, model: Any) -> ForwardStep:
        """The step of `model` (a peft model is read through to its base model)."""
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        parameters = inspect.signature(base.forward).parameters
        names = [name for name in ("cache", "past_key_values") if name in parameters]
        return cls(names[0] if names else None, "logits_to_keep" in parameters)

    @property
    def caches(self) -> bool:
        """Whether the model takes a KV cache."""
        return self.cache_kwarg is not None

    def run(
        self, model: Any, input_ids: Any, cache: Any = None, *, last: bool = False, **batch: Any
    ) -> tuple[Any, Any]:
        """The logits of `input_ids` after `cache`, and the cache to go on from.

        Args:
            last: only the last position's logits are wanted (the model may skip the rest).
            batch: a padded batch's `attention_mask` and `position_ids`.

        Returns:
            (logits [rows, positions, vocab], cache)
        """
        kwargs: dict[str, Any] = {"use_cache": True, **batch}
        if self.cache_kwarg:
            kwargs[self.cache_kwarg] = cache
        if last and self.trims_logits:
            kwargs["logits_to_keep"] = 1
        out = model(input_ids=input_ids, **kwargs)
        return out.logits, cache_of(out)

    def next_logits(self, model: Any, input_ids: Any, cache: Any, **batch: Any) -> tuple[Any, Any]:
        """The float logits for the token after `input_ids` ([rows, vocab]), and the cache."""
        logits, cache = self.run(model, input_ids, cache, last=True, **batch)
        return logits[:, -1, :].float(), cache


def cache_of(out: Any) -> Any:
    """The KV cache a forward pass returned (transformers 5 calls it `cache`)."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)
