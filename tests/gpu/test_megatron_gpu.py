"""megatron-core on a CUDA GPU: training steps on the tiny model, and its weights back in HF.

Skipped without CUDA or megatron-core (which needs Python >= 3.12); tests/gpu/README.md says
how to run the GPU tests. The conversion itself is tested on CPU in
tests/evolution/rl/test_megatron_convert.py.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import replace

import pytest

from evolution.rl.samples import RecordedPrompt


def _missing() -> str | None:
    try:
        found = importlib.util.find_spec("megatron.core") is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        return "megatron-core is not installed: pip install -e '.[test,train,gpu]' (Python >= 3.12)"
    import torch

    return None if torch.cuda.is_available() else "needs a CUDA GPU"


MISSING = _missing()  # why these tests are skipped here, or None

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(MISSING is not None, reason=MISSING or ""),
    pytest.mark.timeout(600),
]

SPECS = [
    "local",
    pytest.param(
        "te",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("transformer_engine") is None,
            reason="transformer_engine is not installed",
        ),
    ),
]
# The te spec's fp32 GEMMs may run in TF32; the local spec's are plain fp32 like HF's.
LOGIT_TOLERANCE = {"local": 1e-3, "te": 2e-2}

PROMPTS = [
    RecordedPrompt(
        event_id=f"e{i}",
        tenant="t",
        messages=[{"role": "user", "content": f"Where is order {i}?"}],
        reference={"name": "lookup_order", "arguments": {"order_id": str(i)}},
    )
    for i in range(3)
]


def letters(prompt: RecordedPrompt, text: str) -> float:
    """The share of letters: mixed rewards in every group of the untrained model's noise."""
    return sum(ch.isalpha() for ch in text) / max(len(text), 1)


@pytest.mark.parametrize("spec", SPECS)
def test_train_megatron_steps_checkpoints_and_resumes(checkpoints, tmp_path, spec) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from evolution.rl.backends.megatron import megatron_models
    from evolution.rl.checkpoints import latest_checkpoint
    from evolution.rl.config import TrainConfig
    from evolution.rl.loop import run_training

    base = checkpoints[0]
    config = TrainConfig(
        backend="megatron",
        device="cuda",
        steps=2,
        prompts_per_step=2,
        group_size=4,
        max_new_tokens=16,
        learning_rate=1e-3,
        checkpoint_every=1,
        include_recorded=False,
    )
    megatron = megatron_models(config, spec=spec)
    result = run_training(megatron, base, tmp_path, PROMPTS, letters, config)
    assert [m.step for m in result.history] == [1, 2]
    assert all(math.isfinite(m.loss) and m.groups_used >= 1 for m in result.history)
    # Fresh samples are on-policy: the HF sampler and the megatron learner give the same
    # logprobs, so the decoupled importance weight is 1.
    assert all(abs(m.importance_weight - 1.0) < 1e-2 for m in result.history)
    assert latest_checkpoint(tmp_path).name == "step-2"

    start = AutoModelForCausalLM.from_pretrained(base)
    trained = AutoModelForCausalLM.from_pretrained(result.checkpoint)
    assert any(
        not torch.equal(a, b) for a, b in zip(start.parameters(), trained.parameters(), strict=True)
    )

    more = run_training(megatron, base, tmp_path, PROMPTS, letters, replace(config, steps=3))
    assert more.resumed_from == 2 and [m.step for m in more.history] == [3]


@pytest.mark.parametrize("spec", SPECS)
def test_a_megatron_step_converts_back_to_hf_with_the_same_logits(
    checkpoints, tmp_path, spec
) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from evolution.rl.backends.megatron import MegatronPolicy, initialise_parallel
    from evolution.rl.megatron_convert import megatron_to_hf
    from evolution.rl.objectives import ObjectiveConfig, policy_loss

    initialise_parallel(0)
    policy = MegatronPolicy.load(checkpoints[1], spec=spec, device="cuda")
    learner = policy.learner
    prompt = learner.prompt_ids([{"role": "user", "content": "Where is order 7?"}])
    completions = [list(b'<tool_call>{"name": "lookup_order"}</tool_call>'), list(b"No.")]
    before = {name: p.detach().clone() for name, p in policy.gpt.named_parameters()}

    optimiser = torch.optim.AdamW(learner.model.parameters(), lr=1e-3)
    learner.model.train()
    logprobs, mask = learner.token_logprobs(prompt, completions, grad=True)
    advantages = torch.tensor([1.0, -1.0], device=logprobs.device)
    terms = policy_loss(
        logprobs, logprobs.detach(), logprobs.detach(), advantages, mask, ObjectiveConfig()
    )
    terms.loss.backward()
    optimiser.step()
    learner.model.eval()
    assert math.isfinite(float(terms.loss.detach()))
    assert any(not torch.equal(p, before[name]) for name, p in policy.gpt.named_parameters())

    hf = AutoModelForCausalLM.from_pretrained(policy.save_pretrained(tmp_path / "hf"))
    hf = hf.to("cuda").eval()
    converted = megatron_to_hf(policy.gpt.state_dict(), policy.shape)
    assert all(torch.equal(hf.state_dict()[k], v) for k, v in converted.items())
    ids = torch.tensor([prompt + completions[0]], device="cuda")
    with torch.no_grad():
        expected = learner.model(input_ids=ids).logits.float()
        actual = hf(input_ids=ids).logits.float()
    tolerance = LOGIT_TOLERANCE[spec]
    torch.testing.assert_close(actual, expected, atol=tolerance, rtol=tolerance)


@pytest.mark.parametrize("spec", SPECS)
def test_offline_sft_and_rpo_train_on_megatron(checkpoints, tmp_path, spec) -> None:
    """SFT and DPO with the chosen answer's NLL (a DPO job's default) take their steps on
    the megatron backend as on torch: finite losses, the chosen answer moved ahead."""
    from evolution.rl.config import TrainConfig
    from evolution.rl.data import PreferencePair
    from evolution.rl.objectives import ObjectiveConfig
    from evolution.rl.offline import train_offline
    from evolution.rl.policy import Policy
    from evolution.rl.sft import Demonstration

    base = checkpoints[1]
    messages = PROMPTS[0].messages
    chosen, rejected = '{"name": "lookup_order"}', '{"name": "cancel_order"}'

    def lead(checkpoint) -> float:
        policy = Policy.load(checkpoint)
        prompt = policy.prompt_ids(messages)
        ids = [
            policy.tokenizer.encode(text, add_special_tokens=False) + [policy.eos_id]
            for text in (chosen, rejected)
        ]
        logprobs, _ = policy.token_logprobs(prompt, ids)
        sums = logprobs.sum(dim=1)
        return float(sums[0] - sums[1])

    common = dict(backend="megatron", device="cuda", steps=4, prompts_per_step=1)
    sft = TrainConfig(**common, objective=ObjectiveConfig(kind="sft"), learning_rate=1e-3)
    result = train_offline(base, tmp_path / "sft", [Demonstration(messages, chosen)], sft)
    assert all(math.isfinite(m.loss) for m in result.history)
    assert result.history[-1].loss < result.history[0].loss

    rpo = TrainConfig(
        **common,
        objective=ObjectiveConfig(kind="dpo", beta=0.5, chosen_nll=1.0),
        learning_rate=1e-3,
    )
    pairs = [PreferencePair(PROMPTS[0], chosen=chosen, rejected=rejected, source="correction")]
    result = train_offline(base, tmp_path / "rpo", pairs, rpo)
    assert all(math.isfinite(m.loss) for m in result.history)
    assert lead(result.checkpoint) > lead(base)
