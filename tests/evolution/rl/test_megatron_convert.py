"""HF <-> megatron-core weight conversion for Qwen2: exact round trips and Megatron's QKV layout.

Pure torch on CPU; tests/gpu/test_megatron_gpu.py runs the converted weights in megatron-core.
"""

from __future__ import annotations

import importlib.util

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from evolution.rl.megatron_convert import (  # noqa: E402
    Qwen2Shape,
    hf_to_megatron,
    interleave_qkv,
    megatron_to_hf,
    split_qkv,
)


def _qwen2(heads: int, kv_heads: int, *, tied: bool, theta: float = 10000.0):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=61,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        tie_word_embeddings=tied,
        max_position_embeddings=128,
        rope_parameters={"rope_type": "default", "rope_theta": theta},
    )
    torch.manual_seed(0)
    return Qwen2ForCausalLM(config)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import AutoModelForCausalLM

    from evoplane.demo.tiny import init_tiny

    return AutoModelForCausalLM.from_pretrained(init_tiny(tmp_path_factory.mktemp("tiny")))


def _assert_round_trip(model, spec: str) -> dict:
    shape = Qwen2Shape.from_hf(model.config)
    hf = model.state_dict()
    megatron = hf_to_megatron(hf, shape, spec)
    back = megatron_to_hf(megatron, shape)
    assert back.keys() == hf.keys()
    for key, tensor in hf.items():
        assert back[key].dtype == tensor.dtype and torch.equal(back[key], tensor), key
    return megatron


@pytest.mark.parametrize("spec", ["local", "te"])
def test_tiny_model_round_trips_exactly(tiny, spec) -> None:
    megatron = _assert_round_trip(tiny, spec)
    layer = "decoder.layers.0"
    assert megatron[f"{layer}.self_attention.linear_qkv.weight"].shape == (3 * 128, 128)
    assert megatron[f"{layer}.self_attention.linear_qkv.bias"].shape == (3 * 128,)
    assert megatron[f"{layer}.mlp.linear_fc1.weight"].shape == (2 * 512, 128)
    assert "output_layer.weight" not in megatron  # tied: the embedding is the output matrix
    fused = {f"{layer}.self_attention.linear_qkv.layer_norm_weight"}
    separate = {f"{layer}.input_layernorm.weight", f"{layer}.pre_mlp_layernorm.weight"}
    assert (fused <= megatron.keys()) == (spec == "te")
    assert (separate <= megatron.keys()) == (spec == "local")


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("spec", ["local", "te"])
def test_grouped_query_model_round_trips_exactly(tied, spec) -> None:
    model = _qwen2(heads=4, kv_heads=2, tied=tied)
    megatron = _assert_round_trip(model, spec)
    # 2 groups of (2 query heads + k + v), head dim 16
    assert megatron["decoder.layers.1.self_attention.linear_qkv.weight"].shape == (2 * 4 * 16, 64)
    assert ("output_layer.weight" in megatron) != tied
    if not tied:
        assert torch.equal(megatron["output_layer.weight"], model.state_dict()["lm_head.weight"])


def test_fused_rows_of_a_query_group_are_its_query_heads_then_its_key_then_its_value() -> None:
    """Megatron's order (attention.py): per group g, q heads of g, then k_g, then v_g."""
    groups, per_group, dim, width = 3, 2, 4, 5
    heads = groups * per_group
    # Each row carries its origin: 100*head for q, 1000 + g for k, 2000 + g for v.
    q = torch.arange(heads).repeat_interleave(dim)[:, None].float().expand(-1, width) * 100
    k = 1000 + torch.arange(groups).repeat_interleave(dim)[:, None].float().expand(-1, width)
    v = 2000 + torch.arange(groups).repeat_interleave(dim)[:, None].float().expand(-1, width)
    fused = interleave_qkv(q, k, v, groups)
    block = (per_group + 2) * dim
    assert fused.shape == ((heads + 2 * groups) * dim, width)
    for g in range(groups):
        rows = fused[g * block : (g + 1) * block, 0].tolist()
        expected = [
            100.0 * h for h in range(g * per_group, (g + 1) * per_group) for _ in range(dim)
        ]
        expected += [1000.0 + g] * dim + [2000.0 + g] * dim
        assert rows == expected


@settings(max_examples=150, deadline=None)
@given(
    groups=st.integers(1, 6),
    per_group=st.integers(1, 5),
    dim=st.integers(1, 8),
    trailing=st.sampled_from([(), (3,), (7,)]),  # a bias, or a weight of some width
)
def test_interleave_and_split_are_inverse(groups, per_group, dim, trailing) -> None:
    generator = torch.Generator().manual_seed(groups * 100 + per_group * 10 + dim)
    q = torch.randn(groups * per_group * dim, *trailing, generator=generator)
    k = torch.randn(groups * dim, *trailing, generator=generator)
    v = torch.randn(groups * dim, *trailing, generator=generator)
    fused = interleave_qkv(q, k, v, groups)
    assert fused.shape == ((groups * per_group + 2 * groups) * dim, *trailing)
    back = split_qkv(fused, groups, per_group, dim)
    assert all(torch.equal(a, b) for a, b in zip(back, (q, k, v), strict=True))
    # Megatron reads query head i from group i // per_group, as HF's repeat_kv pairs them.
    grouped = fused.reshape(groups, (per_group + 2) * dim, *trailing)
    for head in range(groups * per_group):
        g, j = divmod(head, per_group)
        assert torch.equal(grouped[g, j * dim : (j + 1) * dim], q[head * dim : (head + 1) * dim])
    assert torch.equal(grouped[:, per_group * dim : (per_group + 1) * dim].reshape(k.shape), k)


def test_transformer_config_arguments_follow_the_hf_config() -> None:
    model = _qwen2(heads=8, kv_heads=2, tied=False, theta=1e6)
    shape = Qwen2Shape.from_hf(model.config)
    kwargs = shape.transformer_config_kwargs()
    expected = {
        "num_layers": 2,
        "hidden_size": 64,
        "ffn_hidden_size": 96,
        "num_attention_heads": 8,
        "num_query_groups": 2,
        "kv_channels": 8,
        "normalization": "RMSNorm",
        "layernorm_epsilon": model.config.rms_norm_eps,
        "gated_linear_unit": True,
        "add_qkv_bias": True,
        "add_bias_linear": False,
        "hidden_dropout": 0.0,
        "attention_dropout": 0.0,
        "rotary_interleaved": False,
    }
    assert {key: kwargs[key] for key in expected} == expected
    assert kwargs["activation_func"] is torch.nn.functional.silu
    assert shape.gpt_model_kwargs() == {
        "vocab_size": 61,
        "max_sequence_length": 128,
        "position_embedding_type": "rope",
        "rotary_base": 1e6,
        "share_embeddings_and_output_weights": False,
    }


def test_rope_theta_of_transformers_4_configs_is_read() -> None:
    from types import SimpleNamespace

    config = _qwen2(heads=4, kv_heads=4, tied=True).config
    legacy = SimpleNamespace(**{**config.to_dict(), "rope_theta": 5e5, "rope_parameters": None})
    assert Qwen2Shape.from_hf(legacy).rotary_base == 5e5


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"hidden_act": "gelu"}, "hidden_act"),
        ({"use_sliding_window": True, "sliding_window": 16}, "sliding-window"),
        ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 2.0}}, "yarn"),
    ],
)
def test_unsupported_models_are_refused_with_the_reason(change, words) -> None:
    config = _qwen2(heads=4, kv_heads=2, tied=True).config
    for key, value in change.items():
        setattr(config, key, value)
    with pytest.raises(ValueError, match=words):
        Qwen2Shape.from_hf(config)


def test_unknown_megatron_weights_are_refused_and_extra_state_ignored() -> None:
    model = _qwen2(heads=4, kv_heads=2, tied=True)
    shape = Qwen2Shape.from_hf(model.config)
    megatron = hf_to_megatron(model.state_dict(), shape, "local")
    megatron["decoder.layers.0.self_attention.linear_proj._extra_state"] = None
    assert megatron_to_hf(megatron, shape).keys() == model.state_dict().keys()
    megatron["decoder.layers.0.self_attention.q_layernorm.weight"] = torch.ones(16)
    with pytest.raises(ValueError, match="q_layernorm"):
        megatron_to_hf(megatron, shape)


class _GPTCallConvention(torch.nn.Module):
    """An HF model called the way megatron-core's GPTModel is: ids, positions, mask."""

    def __init__(self, hf) -> None:
        super().__init__()
        self.hf = hf

    def forward(self, input_ids, position_ids, attention_mask):
        assert attention_mask is None  # the causal mask comes from the layers' mask type
        return self.hf(input_ids=input_ids, position_ids=position_ids).logits


def test_the_learner_view_gives_policy_the_gpt_models_logprobs(tiny) -> None:
    """`MegatronPolicy.learner` wraps the GPTModel so the torch trainer's loss code runs on it.

    Found on a GPU: `Policy` reads its model's `forward` signature, which the view lacked.
    """
    from transformers import AutoTokenizer

    from evolution.rl.backends.megatron import _CausalLMView
    from evolution.rl.policy import Policy

    tokenizer = AutoTokenizer.from_pretrained(tiny.name_or_path)
    direct = Policy(tiny, tokenizer)
    learner = Policy(_CausalLMView(_GPTCallConvention(tiny)), tokenizer)
    prompt = learner.prompt_ids([{"role": "user", "content": "Where is order 7?"}])
    completions = [list(b'<tool_call>{"name": "lookup_order"}</tool_call>'), list(b"No.")]

    expected, mask = direct.token_logprobs(prompt, completions)
    actual, same_mask = learner.token_logprobs(prompt, completions, grad=True)
    torch.testing.assert_close(actual, expected)
    assert torch.equal(mask, same_mask) and actual.requires_grad
    assert learner.model.train() is learner.model and tiny.training
    assert learner.model.eval() is learner.model and not tiny.training


@pytest.mark.skipif(
    importlib.util.find_spec("megatron") is not None, reason="megatron-core is installed here"
)
def test_megatron_backend_says_what_to_install_where_megatron_is_missing(tmp_path) -> None:
    from evolution.rl.config import TrainConfig
    from evolution.rl.trainer import train

    with pytest.raises(ImportError, match=r"Python >= 3.12, CUDA and the gpu extra"):
        train(tmp_path, tmp_path / "out", [], None, TrainConfig(backend="megatron"))
