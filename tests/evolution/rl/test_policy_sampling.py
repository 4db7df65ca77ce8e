"""Sampling several prompts in one batch gives each what it would get alone."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from evolution.rl.policy import Policy  # noqa: E402
from evoplane.demo.tiny import TinyModelSpec, init_tiny  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Find an order.",
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}},
        },
    }
]
CHATS = [
    [{"role": "user", "content": "Where is my order?"}],
    [
        {"role": "system", "content": "You answer questions about Acme's shop. " * 4},
        {"role": "user", "content": "How long are gift cards valid?"},
    ],
    [{"role": "user", "content": "Hi"}],
]


@pytest.fixture(scope="module")
def policy(tmp_path_factory) -> Policy:
    return Policy.load(init_tiny(tmp_path_factory.mktemp("tiny"), TinyModelSpec(seed=3)))


@pytest.fixture(scope="module")
def prompts(policy) -> list[list[int]]:
    ids = [policy.prompt_ids(chat, TOOLS if i != 1 else None) for i, chat in enumerate(CHATS)]
    assert len({len(p) for p in ids}) == len(ids)  # all lengths differ: rows are padded
    return ids


TOOL_NAMES = [["lookup_order"], [], ["lookup_order"]]


def test_a_batch_of_prompts_decodes_greedily_as_each_prompt_alone(policy, prompts) -> None:
    alone = [
        policy.sample(p, 2, max_new_tokens=24, temperature=0, tool_names=names)
        for p, names in zip(prompts, TOOL_NAMES, strict=True)
    ]
    together = policy.sample_many(
        prompts, 2, max_new_tokens=24, temperature=0, tool_names=TOOL_NAMES
    )
    assert [[c.token_ids for c in group] for group in together] == [
        [c.token_ids for c in group] for group in alone
    ]
    for group_alone, group_together in zip(alone, together, strict=True):
        for a, b in zip(group_alone, group_together, strict=True):
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


def test_sampled_logprobs_are_the_models_own_for_every_padded_row(policy, prompts) -> None:
    generator = torch.Generator().manual_seed(0)
    together = policy.sample_many(prompts, 3, max_new_tokens=16, generator=generator)
    for prompt, group in zip(prompts, together, strict=True):
        assert len(group) == 3
        recomputed, mask = policy.token_logprobs(prompt, [c.token_ids for c in group])
        for row, completion in enumerate(group):
            width = len(completion.token_ids)
            assert mask[row, :width].sum() == width
            assert recomputed[row, :width].tolist() == pytest.approx(completion.logprobs, abs=1e-4)


def test_scoring_after_a_shared_prompt_matches_scoring_each_pair_whole(policy, prompts) -> None:
    """Logprobs and their gradients are those of the full (prompt + completion) passes."""
    assert policy._caches  # an HF model takes a KV cache: the shared path is the default
    generator = torch.Generator().manual_seed(1)
    (group,) = policy.sample_many(prompts[1:2], 4, max_new_tokens=12, generator=generator)
    completions = [c.token_ids for c in group] + [[7]]  # a one-token completion too

    def scored(share: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
        policy.model.zero_grad()
        policy._caches = share
        try:
            logprobs, mask = policy.token_logprobs(prompts[1], completions, grad=True)
        finally:
            policy._caches = True
        (logprobs * torch.arange(1.0, mask.shape[1] + 1)).sum().backward()
        grads = [p.grad.clone() for p in policy.model.parameters() if p.grad is not None]
        return logprobs.detach(), grads

    shared, shared_grads = scored(True)
    whole, whole_grads = scored(False)
    assert torch.allclose(shared, whole, atol=1e-5)
    assert len(shared_grads) == len(whole_grads) > 0
    for a, b in zip(shared_grads, whole_grads, strict=True):
        assert torch.allclose(a, b, atol=1e-4, rtol=1e-3)


def test_a_completion_ends_at_every_end_of_turn_token_the_engine_stops_at(policy, prompts) -> None:
    """A generation config may name more end-of-turn tokens than the tokenizer's one."""
    (alone,) = policy.sample(prompts[0], 1, max_new_tokens=24, temperature=0)
    ids = alone.token_ids
    other = ids[3]
    config = policy.model.generation_config
    config.eos_token_id, before = [policy.eos_id, other], config.eos_token_id
    try:
        (ended,) = Policy(policy.model, policy.tokenizer).sample(
            prompts[0], 1, max_new_tokens=24, temperature=0
        )
    finally:
        config.eos_token_id = before
    assert ended.token_ids == ids[: ids.index(other) + 1]
    assert ended.logprobs == pytest.approx(alone.logprobs[: len(ended.token_ids)], abs=1e-5)
    assert ended.text == policy.tokenizer.decode(ids[: ids.index(other)])
