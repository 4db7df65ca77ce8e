"""The training backends, one module each: `torch` (CPU or one GPU, LoRA or full weights) and
`megatron` (megatron-core on a GPU worker). Both run `evolution.rl.loop`; `evolution.rl.trainer`
picks one by `TrainConfig.backend`."""

__all__: list[str] = []
