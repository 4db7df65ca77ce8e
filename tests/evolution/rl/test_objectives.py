"""The policy-gradient objectives: advantages, the decoupled importance weight, clipping, KL."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from evolution.rl.objectives import (  # noqa: E402
    ObjectiveConfig,
    distillation_advantages,
    group_advantages,
    mixed_groups,
    policy_loss,
)

rewards_and_groups = st.lists(
    st.tuples(st.floats(-10, 10, allow_nan=False), st.integers(0, 4)), min_size=1, max_size=40
)


@settings(max_examples=200, deadline=None)
@given(rewards_and_groups, st.booleans())
@example([(0.0, 0), (5.960464477539063e-08, 0)], True)  # mixed by one count, flat by another
def test_advantages_are_centred_per_group_and_zero_without_signal(pairs, normalise) -> None:
    rewards = [r for r, _ in pairs]
    groups = [g for _, g in pairs]
    advantages = group_advantages(rewards, groups, normalise_std=normalise)
    mixed = mixed_groups(rewards, groups)
    for group in set(groups):
        mine = [a for a, g in zip(advantages, groups, strict=True) if g == group]
        assert abs(sum(mine)) < 1e-6 * max(1.0, len(mine))
        if group not in mixed:
            assert all(abs(a) < 1e-6 for a in mine)
        elif normalise:  # unit variance within the group
            variance = sum(a * a for a in mine) / len(mine)
            assert math.isclose(variance, 1.0, rel_tol=1e-6)
    # Ordering within a group follows the rewards.
    for (r1, g1), a1 in zip(pairs, advantages, strict=True):
        for (r2, g2), a2 in zip(pairs, advantages, strict=True):
            if g1 == g2 and g1 in mixed and r1 > r2 + 1e-6:
                assert a1 > a2


def tensors(rows):
    return torch.tensor(rows, dtype=torch.float32)


def test_on_policy_the_loss_is_the_policy_gradient_and_the_weight_is_one() -> None:
    logprobs = tensors([[-1.0, -2.0], [-0.5, -0.1]]).requires_grad_()
    mask = tensors([[1, 1], [1, 0]])
    advantages = tensors([1.0, -1.0])
    fixed = logprobs.detach()
    terms = policy_loss(logprobs, fixed, fixed, advantages, mask, ObjectiveConfig())
    terms.loss.backward()
    # d(-A * ratio)/d logprob = -A at ratio 1, averaged over the 3 real tokens.
    expected = tensors([[-1 / 3, -1 / 3], [1 / 3, 0.0]])
    assert torch.allclose(logprobs.grad, expected)
    assert terms.importance_weight == pytest.approx(1.0)
    assert terms.clip_fraction == 0.0


def test_stale_behaviour_is_corrected_and_truncated() -> None:
    current = tensors([[-1.0, -1.0]])
    mask = tensors([[1, 1]])
    advantages = tensors([1.0])
    config = ObjectiveConfig(max_importance_weight=2.0)
    # The recorded weights gave these tokens more probability than the current ones: w < 1.
    stale = policy_loss(current, current, tensors([[-0.5, -0.5]]), advantages, mask, config)
    assert stale.importance_weight == pytest.approx(math.exp(-0.5))
    # Far less probable under the recorded weights: w would be e^3, truncated to 2.
    rare = policy_loss(current, current, tensors([[-4.0, -4.0]]), advantages, mask, config)
    assert rare.importance_weight == pytest.approx(2.0)


def test_ratio_is_clipped_asymmetrically_with_clip_higher() -> None:
    proximal = tensors([[-1.0]])
    mask = tensors([[1]])
    config = ObjectiveConfig(eps_low=0.2, eps_high=0.28)
    up = (proximal + math.log(1.5)).requires_grad_()
    terms = policy_loss(up, proximal, proximal, tensors([1.0]), mask, config)
    terms.loss.backward()
    assert terms.clip_fraction == 1.0 and up.grad.abs().sum() == 0  # past 1 + eps_high
    inside = (proximal + math.log(1.25)).requires_grad_()
    terms = policy_loss(inside, proximal, proximal, tensors([1.0]), mask, config)
    terms.loss.backward()
    assert terms.clip_fraction == 0.0 and inside.grad.abs().sum() > 0  # within clip-higher


def test_ppo_adds_a_non_negative_kl_to_the_reference() -> None:
    logprobs = tensors([[-1.0, -2.0]])
    mask = tensors([[1, 1]])
    same = policy_loss(
        logprobs, logprobs, logprobs, tensors([0.0]), mask, ObjectiveConfig(kind="ppo"), logprobs
    )
    assert same.kl == pytest.approx(0.0, abs=1e-7)
    moved = policy_loss(
        logprobs,
        logprobs,
        logprobs,
        tensors([0.0]),
        mask,
        ObjectiveConfig(kind="ppo", kl_coef=0.5),
        tensors([[-1.5, -1.0]]),
    )
    assert moved.kl > 0 and moved.loss.item() == pytest.approx(0.5 * moved.kl)


def test_sft_loss_is_the_token_mean_negative_log_likelihood() -> None:
    from evolution.rl.objectives import sft_loss

    logprobs = tensors([[-1.0, -2.0, -9.0], [-0.5, 0.0, 0.0]]).requires_grad_()
    mask = tensors([[1, 1, 0], [1, 0, 0]])
    loss = sft_loss(logprobs, mask)
    assert loss.item() == pytest.approx((1.0 + 2.0 + 0.5) / 3)  # the padding's -9 counts not
    loss.backward()
    assert torch.allclose(logprobs.grad, -mask / 3)


def test_dpo_loss_against_a_hand_computed_pair() -> None:
    from evolution.rl.objectives import preference_loss

    # h = (-3 - -4) - (-5 - -4.5) = 1 + 0.5 = 1.5; beta 0.1: loss = -log sigmoid(0.15).
    chosen = tensors([-3.0]).requires_grad_()
    rejected = tensors([-5.0]).requires_grad_()
    terms = preference_loss(chosen, rejected, tensors([-4.0]), tensors([-4.5]), beta=0.1)
    expected = -math.log(1 / (1 + math.exp(-0.15)))
    assert terms.loss.item() == pytest.approx(expected)
    assert terms.margin == pytest.approx(0.15) and terms.accuracy == 1.0
    terms.loss.backward()
    # d/dchosen = -beta * sigmoid(-beta h); rejected gets the opposite.
    pull = 0.1 / (1 + math.exp(0.15))
    assert float(chosen.grad) == pytest.approx(-pull)
    assert float(rejected.grad) == pytest.approx(pull)


def test_rpo_adds_the_chosen_completions_likelihood_to_dpo() -> None:
    from evolution.rl.objectives import preference_loss, sft_loss

    # The pair of the DPO case above, its chosen completion two tokens (-1, -2, sum -3):
    # loss = -log sigmoid(0.15) + 0.5 * (1 + 2) / 2.
    tokens = tensors([[-1.0, -2.0]]).requires_grad_()
    chosen = tokens.sum(dim=1)
    nll = sft_loss(tokens, tensors([[1, 1]]))
    terms = preference_loss(
        chosen,
        tensors([-5.0]),
        tensors([-4.0]),
        tensors([-4.5]),
        beta=0.1,
        chosen_nll=nll,
        nll_weight=0.5,
    )
    assert terms.loss.item() == pytest.approx(-math.log(1 / (1 + math.exp(-0.15))) + 0.75)
    assert terms.margin == pytest.approx(0.15)  # what a person watches is DPO's alone
    terms.loss.backward()
    # each token: DPO's pull on the sum, plus the NLL's -0.5 / 2.
    pull = 0.1 / (1 + math.exp(0.15))
    assert torch.allclose(tokens.grad, tensors([[-pull - 0.25, -pull - 0.25]]))
    plain = preference_loss(chosen, tensors([-5.0]), tensors([-4.0]), tensors([-4.5]), beta=0.1)
    assert plain.loss.item() == pytest.approx(-math.log(1 / (1 + math.exp(-0.15))))


def test_ipo_loss_against_a_hand_computed_pair() -> None:
    from evolution.rl.objectives import preference_loss

    # h = (-2 - -2) - (-2 - -1) = 1; beta 0.25: target 1 / (2 * 0.25) = 2; loss (1 - 2)^2 = 1.
    chosen = tensors([-2.0, -1.0]).requires_grad_()
    rejected = tensors([-2.0, -1.0])
    terms = preference_loss(
        chosen, rejected, tensors([-2.0, -1.0]), tensors([-1.0, -3.0]), beta=0.25, kind="ipo"
    )
    # second pair: h = 0 - 2 = -2; loss (-2 - 2)^2 = 16; mean (1 + 16) / 2.
    assert terms.loss.item() == pytest.approx(8.5)
    assert terms.accuracy == 0.5
    terms.loss.backward()
    # d/dchosen of mean((h - 2)^2) over 2 pairs = 2 (h - 2) / 2 = [-1, -4].
    assert torch.allclose(chosen.grad, tensors([-1.0, -4.0]))


def test_a_pair_the_policy_already_prefers_costs_less_than_one_it_does_not() -> None:
    from evolution.rl.objectives import preference_loss

    ref = tensors([-2.0])
    good = preference_loss(tensors([-1.0]), tensors([-3.0]), ref, ref, beta=0.5)
    bad = preference_loss(tensors([-3.0]), tensors([-1.0]), ref, ref, beta=0.5)
    even = preference_loss(ref, ref, ref, ref, beta=0.5)
    assert even.loss.item() == pytest.approx(math.log(2))
    assert good.loss.item() < even.loss.item() < bad.loss.item()


def test_per_token_advantages_weight_each_token_by_its_own() -> None:
    logprobs = tensors([[-1.0, -2.0], [-0.5, -0.1]]).requires_grad_()
    mask = tensors([[1, 1], [1, 0]])
    advantages = tensors([[1.0, 2.0], [-1.0, 5.0]])  # the padding's 5 must not count
    fixed = logprobs.detach()
    terms = policy_loss(logprobs, fixed, fixed, advantages, mask, ObjectiveConfig())
    terms.loss.backward()
    assert torch.allclose(logprobs.grad, tensors([[-1 / 3, -2 / 3], [1 / 3, 0.0]]))
    assert terms.loss.item() == pytest.approx(-(1.0 + 2.0 - 1.0) / 3)


def test_distillation_loss_against_a_hand_computed_case() -> None:
    student = [[-1.0, -2.0], [-0.5]]  # the sampled tokens' logprobs under the student
    teacher = [[-0.5, -3.0], [-0.5]]  # and under the teacher
    advantages = [distillation_advantages(t, s) for t, s in zip(teacher, student, strict=True)]
    assert advantages == [[0.5, -1.0], [0.0]]  # log teacher - log student, per token
    logprobs = tensors([[-1.0, -2.0], [-0.5, 0.0]]).requires_grad_()
    mask = tensors([[1, 1], [1, 0]])
    fixed = logprobs.detach()
    terms = policy_loss(
        logprobs,
        fixed,
        fixed,
        tensors([[0.5, -1.0], [0.0, 0.0]]),
        mask,
        ObjectiveConfig(kind="distill"),
    )
    terms.loss.backward()
    # The loss is the reverse KL estimate over the 3 tokens: sum(log s - log t) / 3, and
    # its gradient (log s - log t) / 3 per token: up where the teacher is likelier, down
    # where it is less likely, nothing where they agree.
    assert terms.loss.item() == pytest.approx((-0.5 + 1.0 + 0.0) / 3)
    assert torch.allclose(logprobs.grad, tensors([[-0.5 / 3, 1.0 / 3], [0.0, 0.0]]))
    assert terms.kl == 0.0  # no reference penalty: the teacher is the pull
