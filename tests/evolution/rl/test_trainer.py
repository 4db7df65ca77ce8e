"""The torch trainer's mechanics: checkpoints, exact resume, PPO with KL, LoRA, clear errors.

The learning itself is asserted in test_grpo.py; here a cheap synthetic reward (does the
sample contain an "a"?) gives an untrained tiny model mixed groups, so every path runs fast.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from evolution.rl.backends.torch import use_threads  # noqa: E402
from evolution.rl.checkpoints import latest_checkpoint  # noqa: E402
from evolution.rl.config import LoraSettings, TrainConfig  # noqa: E402
from evolution.rl.objectives import ObjectiveConfig  # noqa: E402
from evolution.rl.samples import RecordedPrompt  # noqa: E402
from evolution.rl.trainer import train  # noqa: E402
from evoplane.demo.tiny import TinyModelSpec, init_tiny  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PROMPTS = [
    RecordedPrompt(
        event_id=str(i),
        tenant="acme",
        messages=[{"role": "user", "content": f"say something {i}"}],
        reference={"name": "any", "arguments": {}},
    )
    for i in range(6)
]


def has_an_a(prompt: RecordedPrompt, text: str) -> float:
    return float("a" in text)


def only_some_prompts_teach(prompt: RecordedPrompt, text: str) -> float:
    """Mixed rewards for odd-numbered prompts (a coin: the first character's parity), the same
    reward for every sample of an even-numbered one."""
    if int(prompt.event_id) % 2 == 0:
        return 1.0
    return float(ord(text[0]) % 2) if text else 0.0


def config(**changes) -> TrainConfig:
    fields = dict(
        steps=4,
        prompts_per_step=2,
        group_size=4,
        max_new_tokens=12,
        learning_rate=1e-3,
        checkpoint_every=2,
        seed=0,
    )
    return TrainConfig(**{**fields, **changes})


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return init_tiny(tmp_path_factory.mktemp("base"), TinyModelSpec(seed=0))


def weights(directory: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(directory / "model.safetensors")


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_checkpoints_and_an_interrupted_job_resumes_exactly(base, tmp_path) -> None:
    whole = train(base, tmp_path / "whole", PROMPTS, has_an_a, config())
    assert [m.step for m in whole.history] == [1, 2, 3, 4] and whole.resumed_from == 0
    assert any(m.groups_used for m in whole.history), "no group had mixed rewards"
    names = sorted(p.name for p in (tmp_path / "whole").iterdir())
    assert names == ["final", "step-2", "step-4"]
    assert not same(weights(whole.checkpoint), weights(base))

    # A job killed after its step-2 checkpoint: step-4 was never written.
    broken = tmp_path / "broken"
    shutil.copytree(tmp_path / "whole", broken, ignore=shutil.ignore_patterns("step-4", "final"))
    (broken / ".step-4.partial").mkdir()  # a checkpoint cut off mid-write is ignored
    assert latest_checkpoint(broken) == broken / "step-2"
    resumed = train(base, broken, PROMPTS, has_an_a, config())
    assert resumed.resumed_from == 2 and [m.step for m in resumed.history] == [3, 4]
    # Optimiser, sampling RNG and weights all came back: the same weights as without a crash.
    assert same(weights(resumed.checkpoint), weights(whole.checkpoint))


def test_ppo_with_a_kl_penalty_and_lora_give_a_plain_merged_checkpoint(base, tmp_path) -> None:
    from transformers import AutoModelForCausalLM

    lora_ppo = config(
        objective=ObjectiveConfig(kind="ppo", kl_coef=0.1),
        lora=LoraSettings(rank=4, alpha=8),
        learning_rate=5e-3,
    )
    result = train(
        base,
        tmp_path,
        PROMPTS,
        has_an_a,
        lora_ppo,
    )
    assert all(m.kl >= 0 for m in result.history)
    assert (tmp_path / "step-2" / "adapter" / "adapter_config.json").exists()
    merged = weights(result.checkpoint)
    assert not any("lora" in key for key in merged)
    assert not same(merged, weights(base))
    AutoModelForCausalLM.from_pretrained(result.checkpoint)  # loads as a plain model
    # Resuming a LoRA job reloads its adapter on the unchanged base.
    shutil.rmtree(tmp_path / "step-4")
    again = train(base, tmp_path, PROMPTS, has_an_a, lora_ppo)
    assert again.resumed_from == 2


def test_prompts_without_a_reference_are_refused_clearly(base, tmp_path) -> None:
    unlabelled = [RecordedPrompt(event_id="x", tenant="acme", messages=PROMPTS[0].messages)]
    with pytest.raises(ValueError, match="no training prompt has a reference"):
        train(base, tmp_path, unlabelled, has_an_a, config())


def test_dynamic_sampling_fills_the_batch_with_groups_that_teach(base, tmp_path) -> None:
    # Half the prompts give every sample the same reward, so a step of two drawn prompts
    # often keeps fewer than two groups; drawing more until two teach fills every step.
    plain = train(base, tmp_path / "plain", PROMPTS, only_some_prompts_teach, config(steps=6))
    filled = train(
        base,
        tmp_path / "filled",
        PROMPTS,
        only_some_prompts_teach,
        config(steps=6, fill_draws=40),
    )
    assert min(m.groups_used for m in plain.history) < 2
    assert [m.groups_used for m in filled.history] == [2] * 6


def test_a_job_uses_every_cpu_unless_told_otherwise_whatever_the_process_had_set() -> None:
    import os

    import torch

    cpus = len(os.sched_getaffinity(0))
    use_threads(None)  # after one_torch_thread (as a worker's local engine sets it)
    assert torch.get_num_threads() == cpus
    use_threads(1)
    assert torch.get_num_threads() == 1
