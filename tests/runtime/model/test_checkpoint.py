"""Loading a checkpoint: a missing directory is named, end-of-turn tokens are all found."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from runtime.model.checkpoint import eos_ids, load_checkpoint, max_positions


def test_a_missing_checkpoint_or_adapter_is_named(tmp_path) -> None:
    pytest.importorskip("transformers")
    with pytest.raises(FileNotFoundError, match="nowhere is not a directory"):
        load_checkpoint(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="adapter is not a directory"):
        load_checkpoint(tmp_path, tmp_path / "adapter")


@pytest.mark.parametrize(
    ("configured", "expected"),
    [(None, {2}), (7, {2, 7}), ([7, 8], {2, 7, 8}), ([2], {2})],
)
def test_a_turn_ends_at_the_generation_configs_tokens_and_the_tokenizers(
    configured, expected
) -> None:
    model = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=configured))
    assert eos_ids(model, SimpleNamespace(eos_token_id=2)) == expected


def test_the_context_length_is_read_through_an_adapter() -> None:
    base = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=2048))
    adapted = SimpleNamespace(get_base_model=lambda: base)
    assert max_positions(adapted) == max_positions(base) == 2048
    assert max_positions(SimpleNamespace(config=SimpleNamespace())) is None


def test_checkpoints_loaded_from_several_threads_at_once_all_load(tmp_path) -> None:
    """transformers builds a model under a process-wide meta-device context, so loads in
    threads side by side (the gateway's engines, the replay gate's baseline and candidate)
    once left each other's weights on the meta device (huggingface/transformers#41782)."""
    pytest.importorskip("transformers")
    from concurrent.futures import ThreadPoolExecutor

    from evoplane.demo.tiny import init_tiny

    directory = init_tiny(tmp_path / "tiny")
    with ThreadPoolExecutor(max_workers=6) as pool:
        loaded = list(pool.map(lambda _: load_checkpoint(directory), range(12)))
    for model, _ in loaded:
        assert all(parameter.device.type == "cpu" for parameter in model.parameters())
