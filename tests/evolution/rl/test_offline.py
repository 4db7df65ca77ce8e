"""SFT, DPO and IPO on the tiny model: each moves the weights the way its data says, writes
checkpoints and resumes exactly as RL does."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from evolution.rl.config import TrainConfig  # noqa: E402
from evolution.rl.data import PreferencePair  # noqa: E402
from evolution.rl.objectives import ObjectiveConfig  # noqa: E402
from evolution.rl.offline import train_offline  # noqa: E402
from evolution.rl.policy import Policy  # noqa: E402
from evolution.rl.samples import RecordedPrompt  # noqa: E402
from evolution.rl.settings import TrainingSettings  # noqa: E402
from evolution.rl.sft import Demonstration  # noqa: E402
from evoplane.demo.tiny import TinyModelSpec, init_tiny  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MESSAGES = [{"role": "user", "content": "which tool?"}]
PROMPT = RecordedPrompt(event_id="p", tenant="acme", messages=MESSAGES)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return init_tiny(tmp_path_factory.mktemp("base"), TinyModelSpec(seed=0))


def config(kind: str, **changes) -> TrainConfig:
    # IPO pulls h to 1 / (2 beta): a small beta puts that target past where Adam's first,
    # sign-sized steps overshoot on the tiny model (beta 0.5 oscillates around h = 1).
    fields = dict(
        objective=ObjectiveConfig(kind=kind, beta=0.05 if kind == "ipo" else 0.5),
        steps=6,
        prompts_per_step=2,
        learning_rate=3e-3,
        checkpoint_every=3,
    )
    return TrainConfig(**{**fields, **changes})


def sequence_logprob(checkpoint: Path, text: str) -> float:
    policy = Policy.load(checkpoint)
    ids = policy.tokenizer.encode(text, add_special_tokens=False) + [policy.eos_id]
    logprobs, _ = policy.token_logprobs(policy.prompt_ids(MESSAGES), [ids])
    return float(logprobs.sum())


def test_sft_raises_the_likelihood_of_its_targets(base, tmp_path) -> None:
    demos = [Demonstration(MESSAGES, "cancel")]
    result = train_offline(base, tmp_path, demos, config("sft"))
    assert sequence_logprob(result.checkpoint, "cancel") > sequence_logprob(base, "cancel") + 1
    assert result.history[-1].loss < result.history[0].loss
    assert all(m.tokens > 0 for m in result.history)


@pytest.mark.parametrize("kind", ["dpo", "ipo"])
def test_preference_training_moves_chosen_ahead_of_rejected(base, tmp_path, kind) -> None:
    pairs = [PreferencePair(PROMPT, chosen="cancel", rejected="lookup", source="correction")]
    result = train_offline(base, tmp_path, pairs, config(kind))

    def lead(checkpoint: Path) -> float:
        return sequence_logprob(checkpoint, "cancel") - sequence_logprob(checkpoint, "lookup")

    assert lead(result.checkpoint) > lead(base) + 0.5
    assert result.history[0].accuracy is not None
    assert result.history[-1].loss < result.history[0].loss


def test_rpo_raises_the_chosen_answers_own_likelihood_more_than_dpo(base, tmp_path) -> None:
    """DPO asks only that the chosen answer lead the rejected one (on pairs that share most
    of their tokens, both may fall); the chosen answer's NLL term (RPO) also pulls it up."""
    pairs = [
        PreferencePair(PROMPT, chosen="cancel_order", rejected="cancel_orders", source="retry")
    ]
    dpo = train_offline(base, tmp_path / "dpo", pairs, config("dpo"))
    rpo_config = config("dpo", objective=ObjectiveConfig(kind="dpo", beta=0.5, chosen_nll=1.0))
    rpo = train_offline(base, tmp_path / "rpo", pairs, rpo_config)
    before = sequence_logprob(base, "cancel_order")
    gained = {
        name: sequence_logprob(result.checkpoint, "cancel_order") - before
        for name, result in (("dpo", dpo), ("rpo", rpo))
    }
    assert gained["rpo"] > gained["dpo"] + 0.5 and gained["rpo"] > 0
    job = TrainingSettings().train_config(algorithm="dpo").objective  # what a DPO job runs
    assert job.kind == "dpo" and job.chosen_nll == 1.0


def test_an_offline_job_resumes_exactly_after_an_interruption(base, tmp_path) -> None:
    from safetensors.torch import load_file

    pairs = [
        PreferencePair(PROMPT, chosen="cancel", rejected="lookup", source="retry"),
        PreferencePair(PROMPT, chosen="refund", rejected="escalate", source="group"),
    ]
    whole = train_offline(base, tmp_path / "whole", pairs, config("dpo"))
    broken = tmp_path / "broken"
    shutil.copytree(tmp_path / "whole", broken, ignore=shutil.ignore_patterns("step-6", "final"))
    resumed = train_offline(base, broken, pairs, config("dpo"))
    assert resumed.resumed_from == 3 and [m.step for m in resumed.history] == [4, 5, 6]
    a = load_file(whole.checkpoint / "model.safetensors")
    b = load_file(resumed.checkpoint / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_demonstrations_beside_the_pairs_hold_their_targets_while_the_pairs_move(
    base, tmp_path
) -> None:
    """A DPO job reads the rewarded calls beside its pairs: their likelihood rises with the
    pair's chosen answer leading its rejected one (`evolution.rl.plan`)."""
    other = [{"role": "user", "content": "where is it?"}]
    pairs = [PreferencePair(PROMPT, chosen="cancel", rejected="lookup", source="correction")]
    demos = [Demonstration(other, "lookup")]
    result = train_offline(base, tmp_path, [*pairs, *demos], config("dpo"))

    def logprob(checkpoint: Path, messages, text: str) -> float:
        policy = Policy.load(checkpoint)
        ids = policy.tokenizer.encode(text, add_special_tokens=False) + [policy.eos_id]
        logprobs, _ = policy.token_logprobs(policy.prompt_ids(messages), [ids])
        return float(logprobs.sum())

    def lead(checkpoint: Path) -> float:
        return logprob(checkpoint, MESSAGES, "cancel") - logprob(checkpoint, MESSAGES, "lookup")

    assert lead(result.checkpoint) > lead(base) + 0.5
    assert logprob(result.checkpoint, other, "lookup") > logprob(base, other, "lookup") + 1
    assert any(m.accuracy is not None for m in result.history)


def test_offline_objectives_refuse_the_wrong_data_clearly(base, tmp_path) -> None:
    demos = [Demonstration(MESSAGES, "cancel")]
    with pytest.raises(ValueError, match="no preference pairs to train dpo on"):
        train_offline(base, tmp_path, demos, config("dpo"))
    with pytest.raises(ValueError, match="sft trains on Demonstrations only"):
        pair = PreferencePair(PROMPT, chosen="cancel", rejected="lookup", source="retry")
        train_offline(base, tmp_path, [*demos, pair], config("sft"))
    with pytest.raises(ValueError, match="no demonstrations to train sft on"):
        train_offline(base, tmp_path, [], config("sft"))
    with pytest.raises(ValueError, match="grpo is not an offline objective"):
        train_offline(base, tmp_path, demos, config("grpo"))


def test_on_policy_distillation_moves_the_student_towards_the_teacher() -> None:
    from evolution.rl.data import distillation_groups
    from evolution.rl.step import update_policy
    from evoplane.demo.runner import MODEL_DIR

    # The teacher: the warm-started demo model; the student: the same with its weights
    # knocked about (seeded noise), so it shares the tokenizer and has something to regain.
    teacher, student = Policy.load(MODEL_DIR), Policy.load(MODEL_DIR)
    noise = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for weights in student.model.parameters():
            weights.add_(torch.randn(weights.shape, generator=noise) * 0.3 * weights.std())
    prompts = [
        RecordedPrompt(event_id=str(i), tenant="acme", messages=[{"role": "user", "content": t}])
        for i, t in enumerate(["hello", "which tool?", "cancel it"])
    ]

    def reverse_kl() -> float:  # per token, on student samples of a fixed draw
        generator = torch.Generator().manual_seed(123)
        groups = distillation_groups(
            student, teacher, prompts, samples=8, max_new_tokens=8, generator=generator
        )
        rewards = [r for g in groups for r in g["rewards"]]
        return -sum(rewards) / len(rewards)

    before = reverse_kl()
    optimiser = torch.optim.AdamW(student.model.parameters(), lr=3e-4)
    generator = torch.Generator().manual_seed(0)
    settings = TrainConfig(dynamic_sampling=False)
    for _ in range(12):
        groups = distillation_groups(
            student, teacher, prompts, samples=4, max_new_tokens=8, generator=generator
        )
        for group in groups:  # one advantage per sampled token
            assert [len(a) for a in group["advantages"]] == [len(c) for c in group["completions"]]
        update_policy(student, None, optimiser, groups, settings)
    assert reverse_kl() < 0.6 * before


def test_the_trainer_distils_from_a_teacher_checkpoint_on_prompts_without_references(
    tmp_path,
) -> None:
    from evolution.rl.data import distillation_groups
    from evolution.rl.rewards import ToolCallReward
    from evolution.rl.trainer import train
    from evoplane.demo.runner import MODEL_DIR

    student = Policy.load(MODEL_DIR)
    noise = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for weights in student.model.parameters():
            weights.add_(torch.randn(weights.shape, generator=noise) * 0.3 * weights.std())
    student.model.save_pretrained(tmp_path / "student")
    student.tokenizer.save_pretrained(tmp_path / "student")
    prompts = [  # no reference: GRPO could not train on them
        RecordedPrompt(event_id=str(i), tenant="acme", messages=[{"role": "user", "content": t}])
        for i, t in enumerate(["hello", "which tool?", "cancel it"])
    ]
    teacher = Policy.load(MODEL_DIR)

    def reverse_kl(checkpoint: Path) -> float:
        groups = distillation_groups(
            Policy.load(checkpoint),
            teacher,
            prompts,
            samples=8,
            max_new_tokens=8,
            generator=torch.Generator().manual_seed(123),
        )
        return -sum(r for g in groups for r in g["rewards"]) / sum(
            len(g["rewards"]) for g in groups
        )

    settings = TrainingSettings(
        steps=12, prompts_per_step=3, group_size=4, max_new_tokens=8, checkpoint_every=6
    )
    config = settings.train_config(algorithm="distill")
    assert config.objective.kind == "distill" and not config.dynamic_sampling
    result = train(
        tmp_path / "student", tmp_path / "out", prompts, ToolCallReward(), config, teacher=MODEL_DIR
    )
    assert reverse_kl(result.checkpoint) < 0.6 * reverse_kl(tmp_path / "student")
    assert all(m.groups_used == 3 for m in result.history)  # every group carries a signal
    with pytest.raises(ValueError, match="needs a teacher checkpoint"):
        train(tmp_path / "student", tmp_path / "again", prompts, ToolCallReward(), config)
