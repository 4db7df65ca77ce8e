"""Real SGLang on a CUDA GPU: LoRA adapters loaded under versioned names, served, unloaded.

A module of its own: its server (with --enable-lora) starts once the plain one has stopped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.engines.sglang import SGLangEngine
from proxy.engines.sglang_admin import SGLangAdmin
from tests.gpu.sglang_support import LORA_ARGS, MISSING, greedy, serve_tiny, token_ids
from tests.support.sglang_server import SGLangServer

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(MISSING is not None, reason=MISSING or ""),
    pytest.mark.timeout(1200),
]


@pytest.fixture(scope="module")
def lora_server(checkpoints, tmp_path_factory) -> Iterator[SGLangServer]:
    log_dir = tmp_path_factory.mktemp("sglang-lora")
    with serve_tiny(checkpoints[0], log_dir, LORA_ARGS) as running:
        yield running


def tiny_adapter(base: Path, directory: Path) -> Path:
    """A LoRA adapter on q_proj and v_proj whose random B matrices surely change outputs."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    config = LoraConfig(
        r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"
    )
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base), config)
    torch.manual_seed(7)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0.0, 0.5)
    model.save_pretrained(directory)
    return directory


async def test_lora_adapters_load_serve_and_unload(lora_server, checkpoints, tmp_path) -> None:
    adapter_dir = tiny_adapter(checkpoints[0], tmp_path / "adapter")
    engine = SGLangEngine(lora_server.base_url, connect_timeout=5, max_connections=8)
    admin = SGLangAdmin(lora_server.url, timeout=60, update_timeout=300)
    try:
        base = await token_ids(engine, model="tiny")
        adapter = await admin.load_lora_adapter("tiny", "v1", adapter_dir)
        assert adapter == "tiny@v1" and adapter in await admin.adapters()
        reply = await engine.complete(greedy(), model=adapter, timeout=60)
        assert reply["model"] == adapter
        assert reply["choices"][0]["token_ids"] != base
        await admin.unload_lora_adapter(adapter)
        assert adapter not in await admin.adapters()
    finally:
        await engine.aclose()
        await admin.aclose()
