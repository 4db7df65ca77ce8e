"""Drawing the next token with its logprob, as RL needs it: the logprob is the token's
under the distribution it was drawn from (logits / temperature; the raw logits when greedy).

top_p and a tool-call guide only narrow which tokens may be drawn; the logprobs stay those
of the model's own tempered distribution, which is what the trainer recomputes.
"""

from __future__ import annotations

from typing import Any

__all__ = ["draw", "logprobs_of"]


def draw(
    logits: Any,
    allowed: Any = None,
    *,
    temperature: float,
    top_p: float = 1.0,
    generator: Any = None,
) -> tuple[Any, Any]:
    """The next token of each row, and the log-distribution it is reported under.

    Args:
        logits: the model's, [rows, vocab].
        allowed: the logits the tokens are drawn from (a guide's restriction of `logits`);
            `logits` when None.
        temperature: 0 draws greedily.
        top_p: the smallest head of the distribution whose mass reaches it may be drawn.
        generator: the `torch.Generator` of the draw.

    Returns:
        (tokens [rows], log-probabilities [rows, vocab] of `logits` / temperature)
    """
    import torch

    allowed = logits if allowed is None else allowed
    if temperature <= 0:
        return allowed.argmax(-1), torch.log_softmax(logits, -1)
    logprobs = torch.log_softmax(logits / temperature, -1)
    probs = logprobs.exp() if allowed is logits else torch.softmax(allowed / temperature, -1)
    if top_p < 1:
        probs = _nucleus(probs, top_p)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1), logprobs


def logprobs_of(logprobs: Any, tokens: Any) -> Any:
    """Each row's logprob of its token: `logprobs` [rows, vocab] at `tokens` [rows]."""
    return logprobs.gather(-1, tokens[:, None]).squeeze(-1)


def _nucleus(probs: Any, top_p: float) -> Any:
    """`probs` kept to the smallest head whose mass reaches `top_p` (the first token always)."""
    import torch

    ranked, order = probs.sort(-1, descending=True)
    ranked[ranked.cumsum(-1) - ranked > top_p] = 0
    return torch.zeros_like(probs).scatter(-1, order, ranked)
