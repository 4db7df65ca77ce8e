"""Real SGLang on a CUDA GPU: the tiny model served through SGLangEngine, and weight sync.

Skipped without CUDA or sglang; tests/gpu/README.md says how to run them. The same client
code is tested on CPU against tests/support/sglang_standin.py.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterator

import pytest

from proxy.capture.events import _message_action
from proxy.engines.sglang import SGLangEngine
from proxy.engines.sglang_admin import SGLangAdmin, WeightSyncError
from proxy.streaming import assemble_chunks
from tests.gpu.sglang_support import MISSING, greedy, serve_tiny, token_ids
from tests.support.sglang_server import SGLangServer

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(MISSING is not None, reason=MISSING or ""),
    pytest.mark.timeout(1200),  # the server's start counts against the first test
]


@pytest.fixture(scope="module")
def server(checkpoints, tmp_path_factory) -> Iterator[SGLangServer]:
    with serve_tiny(checkpoints[0], tmp_path_factory.mktemp("sglang")) as running:
        yield running


@pytest.fixture
async def engine(server) -> AsyncIterator[SGLangEngine]:
    engine = SGLangEngine(server.base_url, connect_timeout=5, max_connections=8)
    yield engine
    await engine.aclose()


@pytest.fixture
async def admin(server) -> AsyncIterator[SGLangAdmin]:
    admin = SGLangAdmin(server.url, timeout=60, update_timeout=300)
    yield admin
    await admin.aclose()


async def test_serves_the_tiny_model_with_token_ids_and_logprobs(engine, admin) -> None:
    assert await admin.health()
    assert (await admin.model_info()).weight_version == "tiny-base"
    reply = await engine.complete(greedy(), model=None, timeout=60)
    assert reply["model"] == "tiny-base"
    choice = reply["choices"][0]
    assert len(choice["token_ids"]) == 16 and all(0 <= t < 259 for t in choice["token_ids"])
    action, extra = _message_action(choice)
    assert extra == {} and action.token_ids == choice["token_ids"]
    assert len(action.logprobs) == 16 and all(lp <= 0 for lp in action.logprobs)


async def test_logprobs_are_the_models_own(engine, checkpoints) -> None:
    """Sampled at temperature 1, SGLang's logprobs match the HF model's (importance ratio 1)."""
    import torch
    from transformers import AutoModelForCausalLM

    body = greedy("what is my order status?", temperature=1.0, max_tokens=24, seed=3)
    choice = (await engine.complete(body, model=None, timeout=60))["choices"][0]
    prompt, output = choice["prompt_token_ids"], choice["token_ids"]
    served = [entry["logprob"] for entry in choice["logprobs"]["content"]]
    model = AutoModelForCausalLM.from_pretrained(checkpoints[0])  # float32
    with torch.no_grad():
        logits = model(torch.tensor([prompt + output])).logits[0, len(prompt) - 1 : -1]
    own = torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(output)[:, None])[:, 0]
    # SGLang serves a float32 checkpoint in float16: close, not equal.
    assert max(abs(a - b) for a, b in zip(served, own.tolist(), strict=True)) < 0.02
    assert math.isclose(sum(served), float(own.sum()), abs_tol=0.1)


async def test_streams_carry_token_ids(engine) -> None:
    chunks = [chunk async for chunk in engine.stream(greedy(), model=None, timeout=60)]
    assert {chunk["model"] for chunk in chunks} == {"tiny-base"}
    choice = assemble_chunks(chunks)["choices"][0]
    assert choice["token_ids"] == await token_ids(engine)  # greedy: the same tokens
    action, extra = _message_action(choice)
    assert extra == {} and len(action.logprobs) == len(action.token_ids) == 16


async def test_update_weights_from_disk_changes_outputs_and_back(
    engine, admin, checkpoints
) -> None:
    base, perturbed = checkpoints
    before = await token_ids(engine)
    synced = await admin.update_weights(perturbed, weight_version="tiny-perturbed")
    assert (synced.previous_version, synced.weight_version) == ("tiny-base", "tiny-perturbed")
    reply = await engine.complete(greedy(), model=None, timeout=60)
    assert reply["model"] == "tiny-perturbed"
    assert reply["choices"][0]["token_ids"] != before
    await admin.update_weights(base, weight_version="tiny-base")
    assert await token_ids(engine) == before


async def test_a_failed_update_keeps_the_old_weights(engine, admin, tmp_path) -> None:
    before = await token_ids(engine)
    empty = tmp_path / "no-weights"
    empty.mkdir()
    with pytest.raises(WeightSyncError) as caught:
        await admin.update_weights(empty, weight_version="broken")
    assert caught.value.served_version == "tiny-base"
    assert await admin.weight_version() == "tiny-base"
    assert await token_ids(engine) == before
