"""The policy being trained: a causal LM and its tokenizer, with sampling and scoring.

Two numbers matter to RL and both come from here: the token ids a completion is made of and
the log-probability of each under the policy. `sample` returns them for new group samples;
`token_logprobs` recomputes them for any (prompt, completion) pair, which is how the trainer
checks that ids and logprobs recorded by the gateway are the model's own (ratio 1 on-policy).
Loading, the forward step, the draw and the tool-call guides are the model runtime's
(`runtime.model`), the same the local engine serves with; batching groups is this module's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from atdp.tool_text import ToolCallGuide
from runtime.model import prompt_ids as render_prompt
from runtime.model.checkpoint import eos_ids, load_checkpoint
from runtime.model.guide import ToolCallGuides
from runtime.model.sampling import draw, logprobs_of
from runtime.model.step import ForwardStep
from runtime.model.tokens import TokenTable

__all__ = ["Completion", "Policy"]


@dataclass(frozen=True)
class Completion:
    """One sampled completion: its token ids, their logprobs, and its decoded text."""

    token_ids: list[int]
    logprobs: list[float]
    text: str


class Policy:
    """A transformers causal LM with the chat template it was trained with.

    Args:
        model: a `PreTrainedModel` (optionally a peft model).
        tokenizer: its tokenizer; the chat template turns recorded requests into prompts.
    """

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.eos_id = tokenizer.eos_token_id
        # Every token that ends a turn, as the local engine stops at them (a Qwen checkpoint's
        # generation config names <|endoftext|> besides the tokenizer's <|im_end|>).
        self.eos_ids = eos_ids(model, tokenizer)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self._step = ForwardStep.of(model)
        self._caches = self._step.caches  # a megatron view, say, takes no KV cache
        self.tokens = TokenTable(tokenizer)
        self.guides = ToolCallGuides(self.tokens)

    @classmethod
    def load(cls, directory: str | Path, *, device: str = "cpu") -> Policy:
        """The checkpoint in `directory`, loaded as the local engine loads it (float32)."""
        model, tokenizer = load_checkpoint(directory, device=device)
        return cls(model, tokenizer)

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    def prompt_ids(
        self, messages: Sequence[dict], tools: Sequence[dict] | None = None
    ) -> list[int]:
        """The token ids the model sees for a chat request, ending with the assistant turn:
        rendered as the local engine serves it (`runtime.model.prompt_ids`)."""
        return render_prompt(self.tokenizer, messages, tools)

    def sample(
        self,
        prompt: Sequence[int],
        n: int,
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        generator: Any = None,
        tool_names: Sequence[str] = (),
    ) -> list[Completion]:
        """`n` completions of one prompt, sampled at `temperature` (0: greedy), with logprobs.

        The logprob of each token is taken under the distribution it was drawn from
        (logits / temperature), which is the behaviour policy an importance weight needs.
        With `tool_names`, the head of a tool call is kept to them while it is written
        (`atdp.tool_text.ToolCallGuide`), as the local engine serves it; the logprobs stay
        the model's own, as they are there.
        """
        (completions,) = self.sample_many(
            [prompt],
            n,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            generator=generator,
            tool_names=[tool_names],
        )
        return completions

    def sample_many(
        self,
        prompts: Sequence[Sequence[int]],
        n: int,
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        generator: Any = None,
        tool_names: Sequence[Sequence[str]] | None = None,
    ) -> list[list[Completion]]:
        """`sample` for several prompts at once: `n` completions of each, in one batch.

        Each prompt is read once and its KV cache copied to its `n` rows, and a small
        model on a CPU spends much of a decoding step on per-call overhead, so one batch of
        all a training step's groups samples faster than a batch per group. Shorter prompts
        are padded on the left (masked, with positions counted from their first real
        token), so each row sees what it would alone.

        Args:
            tool_names: per prompt, the tools its tool calls are kept to (see `sample`).
        """
        import torch

        guides = [self.guides.get(names) for names in (tool_names or [()] * len(prompts))]
        rows = [(g, i * n, (i + 1) * n) for i, g in enumerate(guides) if g is not None]
        ids, extra = _left_padded(prompts, self.pad_id, self.device)
        written = [""] * (len(prompts) * n)  # each row's text so far, for the guides
        ends = torch.tensor(sorted(self.eos_ids), dtype=torch.long, device=self.device)
        finished = torch.zeros(len(written), dtype=torch.bool, device=self.device)
        tokens: list[torch.Tensor] = []
        logprobs: list[torch.Tensor] = []
        with torch.no_grad():
            # Each prompt is read once; its cache is then copied to its n rows.
            logits, cache = self._step.next_logits(self.model, ids, None, **extra)
            cache.batch_repeat_interleave(n)
            logits = logits.repeat_interleave(n, dim=0)
            extra = {key: value.repeat_interleave(n, dim=0) for key, value in extra.items()}
            while True:
                drawn = _restricted(logits, written, rows)
                token, logp = draw(logits, drawn, temperature=temperature, generator=generator)
                token = torch.where(finished, torch.full_like(token, self.pad_id), token)
                tokens.append(token)
                logprobs.append(logprobs_of(logp, token))
                finished |= torch.isin(token, ends)
                if bool(finished.all()) or len(tokens) == max_new_tokens:
                    break
                if rows:
                    pieces = [self.tokens.texts()[t] for t in token.tolist()]
                    written = [text + piece for text, piece in zip(written, pieces, strict=True)]
                extra = _one_more(extra)
                logits, cache = self._step.next_logits(self.model, token[:, None], cache, **extra)
        completions = [self._completion(row, tokens, logprobs) for row in range(len(written))]
        return [completions[i * n : (i + 1) * n] for i in range(len(prompts))]

    def _completion(self, row: int, tokens: list, logprobs: list) -> Completion:
        ids: list[int] = []
        lps: list[float] = []
        for token, logp in zip(tokens, logprobs, strict=True):
            ids.append(int(token[row]))
            lps.append(float(logp[row]))
            if ids[-1] in self.eos_ids:
                break
        text = self.tokenizer.decode([t for t in ids if t not in self.eos_ids])
        return Completion(token_ids=ids, logprobs=lps, text=text)

    def token_logprobs(
        self,
        prompt: Sequence[int],
        completions: Sequence[Sequence[int]],
        *,
        temperature: float = 1.0,
        grad: bool = False,
    ) -> tuple[Any, Any]:
        """Per-token logprobs of each completion after one shared prompt.

        A model that takes a KV cache reads the prompt once, for all completions, which
        for short completions after a long prompt is most of the work saved (the gradient
        flows through the shared prompt as it would through each copy).

        Returns:
            (logprobs, mask): tensors of shape [len(completions), longest completion]; the mask
            is 1 where a completion has a token. With `grad` the logprobs carry gradients.
        """
        import torch

        width = max(len(c) for c in completions)
        rows = [list(prompt) + list(c) + [self.pad_id] * (width - len(c)) for c in completions]
        ids = torch.tensor(rows, device=self.device)
        mask = torch.tensor(
            [[1.0] * len(c) + [0.0] * (width - len(c)) for c in completions], device=self.device
        )
        with torch.set_grad_enabled(grad):
            if self._caches and len(completions) > 1:
                logits = self._after_shared_prompt(prompt, ids[:, len(prompt) :]).float()
            else:
                logits = self.model(input_ids=ids).logits[:, len(prompt) - 1 : -1, :].float()
            if temperature > 0:
                logits = logits / temperature
            logp = torch.log_softmax(logits, dim=-1)
            chosen = logp.gather(2, ids[:, len(prompt) :, None]).squeeze(2)
        return chosen * mask, mask

    def _after_shared_prompt(self, prompt: Sequence[int], completions: Any) -> Any:
        """The logits that predict each token of `completions` (rows of ids) after `prompt`,
        the prompt run once and its KV cache copied to every row."""
        import torch

        rows = completions.shape[0]
        ids = torch.tensor([list(prompt)], device=self.device)
        logits, cache = self._step.run(self.model, ids, last=True)
        first = logits[:, -1:, :].expand(rows, -1, -1)  # predicts each first token
        if completions.shape[1] == 1:
            return first
        cache.batch_repeat_interleave(rows)
        rest, _ = self._step.run(self.model, completions[:, :-1], cache)
        return torch.cat([first, rest], dim=1)


def _left_padded(
    prompts: Sequence[Sequence[int]], pad_id: int, device: Any
) -> tuple[Any, dict[str, Any]]:
    """`prompts` as one batch of ids padded on the left, and what makes each row read as it
    would alone: its attention mask and positions from its first real token (none unpadded)."""
    import torch

    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad_id] * (width - len(p)) + list(p) for p in prompts], device=device)
    if all(len(p) == width for p in prompts):
        return ids, {}
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
    # Positions matter to models with absolute ones; rotary ones only see distances.
    return ids, {"attention_mask": mask, "position_ids": (mask.cumsum(-1) - 1).clamp(min=0)}


def _one_more(padding: dict[str, Any]) -> dict[str, Any]:
    """A padded batch's mask and positions for its next token (nothing for none)."""
    import torch

    if not padding:
        return padding
    mask = padding["attention_mask"]
    return {
        "attention_mask": torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1),
        "position_ids": padding["position_ids"][:, -1:] + 1,
    }


def _restricted(logits: Any, written: list[str], rows: list[tuple[ToolCallGuide, int, int]]) -> Any:
    """`logits` with each guide's restriction applied to its rows [start, stop)."""
    drawn = logits
    for guide, start, stop in rows:
        part = logits[start:stop]
        limited = guide.restrict(part, written[start:stop])
        if limited is not part:
            if drawn is logits:
                drawn = logits.clone()
            drawn[start:stop] = limited
    return drawn
