"""The megatron backend: the shared GRPO/PPO loop with a megatron-core model learning.

`evolution.rl.trainer.train` runs it for `backend="megatron"`; the loop (`evolution.rl.loop`),
its `step-<N>/` and `final/` checkpoints and its `StepMetrics` are the torch backend's: only
the model that computes the loss differs.

    HF checkpoint --hf_to_megatron--> GPTModel (learner: logits, loss, AdamW)
                                          | megatron_to_hf, every step, on the GPU
                                          v
                                      HF Qwen2 (sampler: group completions, checkpoints)

Why an HF twin samples: G completions per prompt are generated token by token, which wants a
KV cache; megatron-core's inference engines are built for serving (contexts, CUDA graphs,
their own request loop), while `Policy.sample` is the tested sampler that records behaviour
logprobs. Copying the weights is a rename and a reshape on the GPU (no host round trip), and
the loss is taken on megatron's own logits. Both models compute the same function, so the
importance weight of fresh samples stays at 1: the step metric `importance_weight` shows any
drift between them.

One process, tensor and pipeline parallel 1: the optimiser is plain torch AdamW over the
model's parameters. Megatron's DistributedOptimizer shards optimiser state over data-parallel
ranks and needs its DDP gradient buffers; with one rank it would add machinery, not savings.
The learner keeps fp32 weights; the sampler and the checkpoints keep the base's dtype.

megatron-core needs Python >= 3.12 and CUDA, so it is imported inside the functions here
(GPU workers install the `gpu` extra); importing this module needs neither.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from evolution.rl.config import TrainConfig
from evolution.rl.loop import OpenModels, TrainingModels
from evolution.rl.megatron_convert import MegatronSpec, Qwen2Shape, hf_to_megatron, megatron_to_hf
from evolution.rl.policy import Policy
from evolution.rl.step import reference_policy

__all__ = ["MEGATRON_MISSING", "MegatronPolicy", "initialise_parallel", "megatron_models"]

MEGATRON_MISSING = (
    "megatron-core needs Python >= 3.12, CUDA and the gpu extra: pip install -e '.[train,gpu]'"
)


def megatron_models(config: TrainConfig, *, spec: MegatronSpec = "local") -> OpenModels:
    """The megatron backend for `evolution.rl.loop.run_training`, once the job is known to fit.

    Args:
        config: full fine-tune only (LoRA runs on the torch backend). A "cpu" device (the
            default) means the current GPU.
        spec: megatron's layer spec: "local" (megatron-core modules) or "te" (Transformer
            Engine, fused norms and kernels; needs transformer_engine).
    """
    _require_megatron()
    if config.lora is not None:
        raise ValueError(
            "the megatron backend fine-tunes all weights; LoRA runs on the torch backend"
        )
    return partial(_megatron_models, spec=spec)


def _megatron_models(
    base: Path, resume: Path | None, config: TrainConfig, *, spec: MegatronSpec
) -> TrainingModels:
    """The megatron learner and its HF twin (from `resume` when a job resumes)."""
    import torch

    device = _device(config)
    torch.manual_seed(config.seed)
    initialise_parallel(config.seed, device)
    policy = MegatronPolicy.load(resume or base, spec=spec, device=device)
    return TrainingModels(
        learner=policy.learner,
        sampler=policy.sync,  # sampled with the synced twin, learned with megatron
        reference=reference_policy(base, config, device),
        optimiser=torch.optim.AdamW(policy.learner.model.parameters(), lr=config.learning_rate),
        device=device,
    )


# --- the model pair -----------------------------------------------------------------------


@dataclass
class MegatronPolicy:
    """A megatron-core GPTModel that learns and an HF twin that samples and is saved.

    `learner` is a `Policy` whose model is the GPTModel behind the slice of the HF interface
    `Policy.token_logprobs` uses, so the loss code is the torch backend's own.
    """

    learner: Policy
    sampler: Policy
    shape: Qwen2Shape
    spec: MegatronSpec

    @classmethod
    def load(
        cls, directory: str | Path, *, spec: MegatronSpec = "local", device: str = "cuda"
    ) -> MegatronPolicy:
        """Both models from an HF checkpoint; `initialise_parallel` must have run."""
        sampler = Policy.load(directory, device=device)
        shape = Qwen2Shape.from_hf(sampler.model.config)
        gpt = _build_gpt(shape, spec, device)
        _load_into(gpt, hf_to_megatron(sampler.model.state_dict(), shape, spec))
        gpt.eval()
        return cls(Policy(_CausalLMView(gpt), sampler.tokenizer), sampler, shape, spec)

    @property
    def gpt(self) -> Any:
        return self.learner.model.gpt

    def sync(self) -> Policy:
        """Copy the learner's weights into the sampler; returns the sampler."""
        import torch

        with torch.no_grad():
            state = megatron_to_hf(self.gpt.state_dict(), self.shape)
            self.sampler.model.load_state_dict(state, strict=True)
        return self.sampler

    def save_pretrained(self, directory: str | Path) -> Path:
        """The learner's weights as an HF checkpoint (with the tokenizer) in `directory`."""
        sampler = self.sync()
        sampler.model.save_pretrained(directory)
        sampler.tokenizer.save_pretrained(directory)
        return Path(directory)


class _CausalLMView:
    """A GPTModel seen as a causal LM that `Policy.token_logprobs` can call."""

    def __init__(self, gpt: Any) -> None:
        self.gpt = gpt

    def forward(self, input_ids: Any, **_: Any) -> SimpleNamespace:
        import torch

        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        # attention_mask None: the layers' causal mask type builds the mask (local spec) or
        # is applied by the kernel (TE); completions are right-padded, so no padding mask.
        logits = self.gpt(input_ids, positions.expand_as(input_ids), None)
        return SimpleNamespace(logits=logits)

    __call__ = forward  # `Policy` reads the signature of `forward`, as on an HF model

    def parameters(self) -> Any:
        return self.gpt.parameters()

    def train(self, mode: bool = True) -> _CausalLMView:
        self.gpt.train(mode)
        return self

    def eval(self) -> _CausalLMView:
        return self.train(False)


def _build_gpt(shape: Qwen2Shape, spec: MegatronSpec, device: str) -> Any:
    """A megatron-core GPTModel of `shape` with the local or the Transformer Engine layers."""
    import torch
    from megatron.core.models.gpt import GPTModel
    from megatron.core.transformer.transformer_block import TransformerBlockSubmodules
    from megatron.core.transformer.transformer_config import TransformerConfig

    config = TransformerConfig(**shape.transformer_config_kwargs(), params_dtype=torch.float32)
    layer, final_norm = _layer_spec(spec)
    # The block spec names the final norm itself: left to megatron, a local layer spec gets
    # apex's FusedLayerNorm where apex is installed, which refuses RMSNorm.
    block = TransformerBlockSubmodules(layer_specs=[layer] * shape.layers, layer_norm=final_norm)
    # Parameters are made on the current CUDA device, which `initialise_parallel` set.
    return GPTModel(config, block, **shape.gpt_model_kwargs()).to(device)


def _layer_spec(spec: MegatronSpec) -> tuple[Any, Any]:
    from megatron.core.models.gpt import gpt_layer_specs

    if spec == "local":
        from megatron.core.transformer.torch_norm import WrappedTorchNorm

        return gpt_layer_specs.get_gpt_layer_local_spec(normalization="RMSNorm"), WrappedTorchNorm
    if spec == "te":
        try:
            from megatron.core.extensions.transformer_engine import TENorm
        except ImportError as error:
            raise ImportError(
                "the 'te' layer spec needs transformer_engine; install it or use spec='local'"
            ) from error
        return gpt_layer_specs.get_gpt_layer_with_transformer_engine_spec(), TENorm
    raise ValueError(f"unknown megatron layer spec {spec!r}: use 'local' or 'te'")


def _load_into(gpt: Any, state: dict[str, Any]) -> None:
    """Load converted weights; every real parameter must be covered (extra state needn't)."""
    result = gpt.load_state_dict(state, strict=False)
    own = gpt.state_dict()
    missing = [
        key
        for key in result.missing_keys
        if not key.endswith("_extra_state") and getattr(own[key], "numel", lambda: 1)() > 0
    ]
    if missing or result.unexpected_keys:
        raise ValueError(
            f"converted weights do not fit the megatron model: missing {missing[:8]}, "
            f"unexpected {list(result.unexpected_keys)[:8]}"
        )


# --- process setup ------------------------------------------------------------------------


def _require_megatron() -> None:
    try:
        import megatron.core  # noqa: F401
    except ImportError as error:
        raise ImportError(MEGATRON_MISSING) from error
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError(
            "the megatron backend needs a CUDA GPU and none is visible here; run the job on "
            "a GPU worker (task queue evoplane-gpu) or train with backend='torch'"
        )


def _device(config: TrainConfig) -> str:
    import torch

    if config.device.startswith("cuda"):
        return config.device
    return f"cuda:{torch.cuda.current_device()}"


def initialise_parallel(seed: int, device: str = "cuda") -> None:
    """torch.distributed and megatron's parallel state for one process (TP = PP = 1).

    Kept for the life of the process, so a GPU worker's next job reuses it; a process
    started with more ranks (torchrun) is refused: data parallelism is not wired here.
    """
    import torch
    from megatron.core import parallel_state, tensor_parallel

    index = torch.device(device).index
    if index is not None:  # "cuda" alone keeps the current device
        torch.cuda.set_device(index)
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(
            "nccl", init_method=f"tcp://127.0.0.1:{_free_port()}", world_size=1, rank=0
        )
    if torch.distributed.get_world_size() != 1:
        raise RuntimeError(
            "the megatron backend runs in one process (world size 1), not "
            f"{torch.distributed.get_world_size()}: start it without torchrun"
        )
    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel(
            tensor_model_parallel_size=1, pipeline_model_parallel_size=1
        )
    # Megatron's layers draw dropout and initialisation from its own CUDA RNG tracker.
    tensor_parallel.model_parallel_cuda_manual_seed(seed)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
