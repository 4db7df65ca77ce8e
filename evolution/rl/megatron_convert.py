"""HF <-> megatron-core weights for Qwen2-family models: pure torch, no megatron import.

The megatron backend trains a megatron-core `GPTModel` while the gateway, SGLang and the
registry speak Hugging Face checkpoints, so weights cross between the two names and layouts
(the name table and the layout facts this code relies on, each checked against
megatron-core's source: docs/megatron-weights.md). Both directions only slice, concatenate
and rename: a round trip is bitwise exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "MegatronSpec",
    "Qwen2Shape",
    "hf_to_megatron",
    "interleave_qkv",
    "megatron_to_hf",
    "split_qkv",
]

MegatronSpec = Literal["local", "te"]


@dataclass(frozen=True)
class Qwen2Shape:
    """What the conversion and the megatron model need to know of a Qwen2-family model."""

    layers: int
    hidden_size: int
    ffn_hidden_size: int
    heads: int
    query_groups: int
    head_dim: int
    vocab_size: int
    max_positions: int
    rotary_base: float
    norm_eps: float
    tied_embeddings: bool

    @classmethod
    def from_hf(cls, config: Any) -> Qwen2Shape:
        """The shape of an HF `Qwen2Config`; raises on features the megatron model lacks."""
        _check_supported(config)
        heads = config.num_attention_heads
        return cls(
            layers=config.num_hidden_layers,
            hidden_size=config.hidden_size,
            ffn_hidden_size=config.intermediate_size,
            heads=heads,
            query_groups=config.num_key_value_heads or heads,
            head_dim=getattr(config, "head_dim", None) or config.hidden_size // heads,
            vocab_size=config.vocab_size,
            max_positions=config.max_position_embeddings,
            rotary_base=float(_rope(config).get("rope_theta", 10000.0)),
            norm_eps=config.rms_norm_eps,
            tied_embeddings=bool(config.tie_word_embeddings),
        )

    @property
    def heads_per_group(self) -> int:
        return self.heads // self.query_groups

    def transformer_config_kwargs(self) -> dict[str, Any]:
        """Arguments of megatron-core's `TransformerConfig` for this model.

        No dropout: RL compares logprobs of the same tokens under the trainer and the sampler,
        and Qwen2 trains without it. Fusions that need apex or custom kernels are off; the
        caller adds dtype and initialisation settings.
        """
        import torch.nn.functional as F

        return {
            "num_layers": self.layers,
            "hidden_size": self.hidden_size,
            "ffn_hidden_size": self.ffn_hidden_size,
            "num_attention_heads": self.heads,
            "num_query_groups": self.query_groups,
            "kv_channels": self.head_dim,
            "normalization": "RMSNorm",
            "layernorm_epsilon": self.norm_eps,
            "gated_linear_unit": True,  # SwiGLU: silu(gate) * up
            "activation_func": F.silu,
            "add_qkv_bias": True,
            "add_bias_linear": False,
            "hidden_dropout": 0.0,
            "attention_dropout": 0.0,
            "rotary_interleaved": False,  # HF's rotate_half, not RoFormer pairs
            "bias_activation_fusion": False,
            "bias_dropout_fusion": False,
            "masked_softmax_fusion": False,
            "apply_rope_fusion": False,
            "gradient_accumulation_fusion": False,
        }

    def gpt_model_kwargs(self) -> dict[str, Any]:
        """Arguments of megatron-core's `GPTModel` besides the config and the layer spec."""
        return {
            "vocab_size": self.vocab_size,
            "max_sequence_length": self.max_positions,
            "position_embedding_type": "rope",
            "rotary_base": self.rotary_base,
            "share_embeddings_and_output_weights": self.tied_embeddings,
        }


def _rope(config: Any) -> dict[str, Any]:
    """RoPE settings: `rope_parameters` (transformers 5) or `rope_theta`/`rope_scaling` (4)."""
    params = dict(getattr(config, "rope_parameters", None) or {})
    if "rope_theta" not in params and getattr(config, "rope_theta", None) is not None:
        params["rope_theta"] = config.rope_theta
    scaling = getattr(config, "rope_scaling", None) or {}
    params.setdefault("rope_type", scaling.get("rope_type") or scaling.get("type") or "default")
    return params


def _check_supported(config: Any) -> None:
    problems = []
    if getattr(config, "model_type", "qwen2") != "qwen2":
        problems.append(f"model_type {config.model_type!r} (only qwen2 is converted)")
    if getattr(config, "hidden_act", "silu") != "silu":
        problems.append(f"hidden_act {config.hidden_act!r} (SwiGLU needs silu)")
    if _rope(config)["rope_type"] != "default":
        problems.append(f"rope_type {_rope(config)['rope_type']!r} (plain RoPE only)")
    if getattr(config, "use_sliding_window", False):
        problems.append("sliding-window attention")
    heads, groups = config.num_attention_heads, config.num_key_value_heads or 0
    if groups and heads % groups:
        problems.append(f"{heads} heads in {groups} query groups")
    if problems:
        raise ValueError(
            "the megatron backend cannot build this model: " + "; ".join(problems) + "; "
            "train it with the torch backend"
        )


# --- the fused QKV projection -----------------------------------------------------------


def interleave_qkv(q: Any, k: Any, v: Any, query_groups: int) -> Any:
    """Megatron's `linear_qkv` rows (weight or bias) from HF's q, k and v projections.

    Each of q [heads * d, ...], k and v [groups * d, ...] is cut into its query groups, and
    each group's rows are laid out as its query heads, its key head, its value head.
    """
    import torch

    rest = q.shape[1:]
    parts = [t.reshape(query_groups, -1, *rest) for t in (q, k, v)]
    return torch.cat(parts, dim=1).reshape(-1, *rest)


def split_qkv(qkv: Any, query_groups: int, heads_per_group: int, head_dim: int) -> tuple:
    """HF's (q, k, v) from Megatron's fused `linear_qkv` rows: `interleave_qkv` undone."""
    rest = qkv.shape[1:]
    grouped = qkv.reshape(query_groups, (heads_per_group + 2) * head_dim, *rest)
    q, k, v = grouped.split([heads_per_group * head_dim, head_dim, head_dim], dim=1)
    return tuple(t.reshape(-1, *rest).contiguous() for t in (q, k, v))


# --- whole state dicts --------------------------------------------------------------------


def _norm_keys(spec: MegatronSpec, layer: str) -> tuple[str, str]:
    """Where a layer's two RMSNorm weights live: own modules (local) or fused into TE linears."""
    if spec == "te":
        return (
            f"{layer}.self_attention.linear_qkv.layer_norm_weight",
            f"{layer}.mlp.linear_fc1.layer_norm_weight",
        )
    if spec == "local":
        return f"{layer}.input_layernorm.weight", f"{layer}.pre_mlp_layernorm.weight"
    raise ValueError(f"unknown megatron layer spec {spec!r}: use 'local' or 'te'")


def hf_to_megatron(
    state: Mapping[str, Any], shape: Qwen2Shape, spec: MegatronSpec = "local"
) -> dict[str, Any]:
    """A megatron-core GPTModel state dict from an HF Qwen2ForCausalLM one.

    Args:
        state: HF weights (`model.state_dict()` or a checkpoint file's tensors); with tied
            embeddings `lm_head.weight` may be present or not and is not used.
        spec: "local" for `get_gpt_layer_local_spec`, "te" for the Transformer Engine spec.
    """
    import torch

    out = {"embedding.word_embeddings.weight": state["model.embed_tokens.weight"]}
    for i in range(shape.layers):
        hf, mc = f"model.layers.{i}", f"decoder.layers.{i}"
        attn = f"{hf}.self_attn"
        for kind in ("weight", "bias"):
            q, k, v = (state[f"{attn}.{p}_proj.{kind}"] for p in "qkv")
            qkv = interleave_qkv(q, k, v, shape.query_groups)
            out[f"{mc}.self_attention.linear_qkv.{kind}"] = qkv
        out[f"{mc}.self_attention.linear_proj.weight"] = state[f"{attn}.o_proj.weight"]
        gate, up = state[f"{hf}.mlp.gate_proj.weight"], state[f"{hf}.mlp.up_proj.weight"]
        out[f"{mc}.mlp.linear_fc1.weight"] = torch.cat([gate, up], dim=0)
        out[f"{mc}.mlp.linear_fc2.weight"] = state[f"{hf}.mlp.down_proj.weight"]
        attn_norm, mlp_norm = _norm_keys(spec, mc)
        out[attn_norm] = state[f"{hf}.input_layernorm.weight"]
        out[mlp_norm] = state[f"{hf}.post_attention_layernorm.weight"]
    out["decoder.final_layernorm.weight"] = state["model.norm.weight"]
    if not shape.tied_embeddings:
        out["output_layer.weight"] = state["lm_head.weight"]
    return out


def megatron_to_hf(state: Mapping[str, Any], shape: Qwen2Shape) -> dict[str, Any]:
    """An HF Qwen2ForCausalLM state dict from a megatron-core GPTModel one (either spec).

    The keys are those of `Qwen2ForCausalLM.state_dict()`: with tied embeddings
    `lm_head.weight` is the embedding tensor itself, so `load_state_dict` takes it strictly.
    Raises when the megatron state holds weights this mapping does not know (a qk-norm, a
    bias), rather than dropping them.
    """
    used: set[str] = set()

    def take(key: str) -> Any:
        used.add(key)
        return state[key]

    spec: MegatronSpec = (
        "te" if "decoder.layers.0.self_attention.linear_qkv.layer_norm_weight" in state else "local"
    )
    embed = take("embedding.word_embeddings.weight")
    out = {"model.embed_tokens.weight": embed}
    for i in range(shape.layers):
        hf, mc = f"model.layers.{i}", f"decoder.layers.{i}"
        for kind in ("weight", "bias"):
            qkv = take(f"{mc}.self_attention.linear_qkv.{kind}")
            parts = split_qkv(qkv, shape.query_groups, shape.heads_per_group, shape.head_dim)
            for name, part in zip("qkv", parts, strict=True):
                out[f"{hf}.self_attn.{name}_proj.{kind}"] = part
        out[f"{hf}.self_attn.o_proj.weight"] = take(f"{mc}.self_attention.linear_proj.weight")
        gate, up = take(f"{mc}.mlp.linear_fc1.weight").chunk(2, dim=0)
        out[f"{hf}.mlp.gate_proj.weight"] = gate.contiguous()
        out[f"{hf}.mlp.up_proj.weight"] = up.contiguous()
        out[f"{hf}.mlp.down_proj.weight"] = take(f"{mc}.mlp.linear_fc2.weight")
        attn_norm, mlp_norm = _norm_keys(spec, mc)
        out[f"{hf}.input_layernorm.weight"] = take(attn_norm)
        out[f"{hf}.post_attention_layernorm.weight"] = take(mlp_norm)
    out["model.norm.weight"] = take("decoder.final_layernorm.weight")
    out["lm_head.weight"] = embed if shape.tied_embeddings else take("output_layer.weight")
    _check_all_used(state, used)
    return out


def _check_all_used(state: Mapping[str, Any], used: set[str]) -> None:
    """Every megatron weight must have gone somewhere; `_extra_state` and empties hold none."""
    left = [
        key
        for key, value in state.items()
        if key not in used
        and not key.endswith("_extra_state")
        and getattr(value, "numel", lambda: 1)() > 0
    ]
    if left:
        raise ValueError(
            f"megatron weights with no Qwen2 counterpart: {sorted(left)[:8]}; the model was "
            "built with features the converter does not map (qk-norm, linear biases, MoE)"
        )
