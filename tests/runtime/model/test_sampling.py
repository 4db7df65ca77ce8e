"""A drawn token comes with its logprob under the model's tempered distribution, whatever
narrowed the draw (top_p, a tool-call guide)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from runtime.model.sampling import draw, logprobs_of  # noqa: E402

VOCAB = 6
rows_of_logits = st.lists(
    st.lists(st.floats(-8, 8, allow_nan=False), min_size=VOCAB, max_size=VOCAB),
    min_size=1,
    max_size=4,
)


@given(
    rows_of_logits,
    st.floats(0.2, 2.0),
    st.floats(0.05, 1.0),
    st.integers(0, 2**32),
)
def test_a_drawn_token_reports_its_logprob_under_the_tempered_distribution(
    rows, temperature, top_p, seed
) -> None:
    logits = torch.tensor(rows)
    generator = torch.Generator().manual_seed(seed)
    tokens, logprobs = draw(logits, temperature=temperature, top_p=top_p, generator=generator)
    tempered = torch.log_softmax(logits / temperature, -1)
    assert torch.allclose(logprobs, tempered)
    chosen = logprobs_of(logprobs, tokens)
    assert chosen.tolist() == [tempered[row, t].item() for row, t in enumerate(tokens.tolist())]
    # Within top_p: the tokens more likely than the one drawn hold less than top_p.
    for row, token in enumerate(tokens.tolist()):
        above = tempered[row].exp()[tempered[row] > tempered[row, token]].sum()
        assert above < top_p + 1e-5


def test_greedy_takes_the_most_likely_allowed_token_with_the_models_logprob() -> None:
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0]])
    allowed = torch.tensor([[0.0, float("-inf"), 1.0, 2.0]])  # a guide ruled out token 1
    tokens, logprobs = draw(logits, allowed, temperature=0)
    assert tokens.tolist() == [3]
    assert logprobs_of(logprobs, tokens).item() == pytest.approx(
        torch.log_softmax(logits, -1)[0, 3].item()
    )


def test_a_guided_draw_keeps_to_the_allowed_tokens_and_the_same_seed_draws_the_same() -> None:
    logits = torch.zeros(8, VOCAB)
    allowed = logits.clone()
    allowed[:, :3] = float("-inf")

    def drawn(seed: int) -> list[int]:
        generator = torch.Generator().manual_seed(seed)
        tokens, logprobs = draw(logits, allowed, temperature=0.7, generator=generator)
        # Drawn among three, reported under the model's own six.
        assert torch.allclose(logprobs_of(logprobs, tokens), torch.full((8,), -math.log(VOCAB)))
        return tokens.tolist()

    assert all(token >= 3 for token in drawn(5))
    assert drawn(5) == drawn(5)
