"""The local engine on the real tiny Qwen2: sampling, logprobs the trainer can trust, tool
calls, streaming, bounded concurrency, and two sets of weights decoding side by side."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from atdp.tool_text import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, ToolCallStream, parse_tool_calls
from evoplane.demo.tiny import TinyModelSpec, init_tiny
from proxy.engines import LocalEngine, UpstreamError, UpstreamTimeout
from proxy.engines.local import LoadedModel, Sampling, _Job, load_model, prompt_ids
from proxy.streaming import assemble_chunks

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ORDER_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Look up an order",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        },
    }
]
ORDER_QUESTION = [{"role": "user", "content": "Where is order 42?"}]
ORDER_ANSWER = (
    'Checking.<tool_call>{"name": "lookup_order", "arguments": {"order_id": "42"}}</tool_call>'
)
# What byte-level models drift into under RL: bytes of two tool names blended into one.
BLENDED_ANSWER = ORDER_ANSWER.replace("lookup_order", "lookup_ordar")
HELLO = [{"role": "user", "content": "hello there"}]


def teach(directory: Path, seed: int = 1, answer: str = ORDER_ANSWER) -> Path:
    """A tiny model that answers ORDER_QUESTION with `answer` (about 150 steps, 2 s)."""
    init_tiny(directory, TinyModelSpec(seed=seed))
    loaded = load_model(directory)
    model, tokenizer = loaded.model, loaded.tokenizer
    prompt = tokenizer.apply_chat_template(
        ORDER_QUESTION, tools=ORDER_TOOLS, add_generation_prompt=True, tokenize=False
    )
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    answer_ids = tokenizer(answer + tokenizer.eos_token, add_special_tokens=False)
    answer_ids = answer_ids["input_ids"]
    inputs = torch.tensor([prompt_ids + answer_ids])
    labels = torch.tensor([[-100] * len(prompt_ids) + answer_ids])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(400):
        loss = model(input_ids=inputs, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss.item() < 0.01:
            break
    model.save_pretrained(directory)
    return directory


def lora_adapter(base: Path, directory: Path) -> Path:
    """A LoRA adapter with non-zero weights, so it changes what the base model says."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(7)
    model = AutoModelForCausalLM.from_pretrained(base)
    config = LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory) -> Path:
    return init_tiny(tmp_path_factory.mktemp("base"), TinyModelSpec(seed=0))


@pytest.fixture(scope="module")
def taught_dir(tmp_path_factory) -> Path:
    return teach(tmp_path_factory.mktemp("taught"))


@pytest.fixture(scope="module")
def blending_dir(tmp_path_factory) -> Path:
    """A model that calls the offered lookup_order by a name no tool has: lookup_ordar."""
    return teach(tmp_path_factory.mktemp("blending"), answer=BLENDED_ANSWER)


def request(messages=HELLO, **params) -> dict:
    return {"model": "ignored", "messages": messages, **params}


def recomputed(loaded: LoadedModel, prompt: list[int], completion: list[int], temperature: float):
    """Each completion token's logprob from one plain forward pass over prompt + completion."""
    with torch.inference_mode():
        logits = loaded.model(input_ids=torch.tensor([prompt + completion])).logits[0].float()
    logits = logits[len(prompt) - 1 : -1]
    if temperature:
        logits = logits / temperature
    logprobs = torch.log_softmax(logits, -1)
    return logprobs.gather(-1, torch.tensor(completion)[:, None]).squeeze(-1).tolist()


def logprobs_of(choice: dict) -> list[float]:
    return [entry["logprob"] for entry in choice["logprobs"]["content"]]


class Gate:
    """Wraps a model's forward so the decoder blocks inside it until the test opens the gate;
    records the shape of every batch it runs."""

    def __init__(self, loaded: LoadedModel) -> None:
        self.opened = threading.Event()
        self.inside = 0
        self.shapes: list[tuple[int, int]] = []  # (rows, tokens) of each forward
        self._lock = threading.Lock()
        forward = loaded.model.forward

        def gated(*args, **kwargs):
            with self._lock:
                self.inside += 1
                self.shapes.append(tuple(kwargs["input_ids"].shape))
            try:
                assert self.opened.wait(30), "the test never opened the gate"
                return forward(*args, **kwargs)
            finally:
                with self._lock:
                    self.inside -= 1

        loaded.model.forward = gated

    @property
    def decode_rows(self) -> list[int]:
        """The rows of each decoding step (one new token a row), prefills left out."""
        return [rows for rows, tokens in self.shapes if tokens == 1]

    async def wait_inside(self, count: int) -> None:
        async with asyncio.timeout(20):
            while self.inside < count:
                await asyncio.sleep(0.01)  # the event loop is free while models run


# --- sampling and logprobs ----------------------------------------------------------------


async def test_greedy_answers_are_deterministic_and_logprobs_are_the_models_own(base_dir) -> None:
    engine = LocalEngine(base_dir, version="tiny@1")
    body = request(temperature=0, max_tokens=24)
    first = await engine.complete(body, model=None, timeout=60)
    again = await engine.complete(body, model=None, timeout=60)
    choice = first["choices"][0]
    assert first["model"] == "tiny@1" and first["object"] == "chat.completion"
    assert choice["token_ids"] == again["choices"][0]["token_ids"]
    assert len(choice["token_ids"]) == len(choice["logprobs"]["content"]) == 24
    assert first["usage"] == {
        "prompt_tokens": len(first["prompt_token_ids"]),
        "completion_tokens": 24,
        "total_tokens": len(first["prompt_token_ids"]) + 24,
    }
    assert choice["finish_reason"] == "length"
    loaded = engine.loaded
    template = loaded.tokenizer.apply_chat_template(
        HELLO, add_generation_prompt=True, tokenize=False
    )
    assert (
        first["prompt_token_ids"]
        == loaded.tokenizer(template, add_special_tokens=False)["input_ids"]
    )
    # Importance ratio 1: what the trainer recomputes is what was recorded.
    expected = recomputed(loaded, first["prompt_token_ids"], choice["token_ids"], 0)
    assert max(abs(a - b) for a, b in zip(expected, logprobs_of(choice), strict=True)) < 1e-4
    assert choice["message"]["content"] == loaded.tokenizer.decode(choice["token_ids"])


async def test_sampled_logprobs_are_those_of_the_tempered_distribution(base_dir) -> None:
    engine = LocalEngine(base_dir)
    body = request(temperature=0.7, top_p=0.9, n=3, seed=11, max_tokens=16)
    response = await engine.complete(
        {**body, "logprobs": True, "top_logprobs": 3}, model=None, timeout=60
    )
    assert len(response["choices"]) == 3
    assert response["model"] == str(base_dir)  # no name given: the weights' path
    for choice in response["choices"]:
        ids = choice["token_ids"]
        expected = recomputed(engine.loaded, response["prompt_token_ids"], ids, 0.7)
        assert max(abs(a - b) for a, b in zip(expected, logprobs_of(choice), strict=True)) < 1e-4
        for entry in choice["logprobs"]["content"]:
            top = [t["logprob"] for t in entry["top_logprobs"]]
            assert len(top) == 3 and top == sorted(top, reverse=True)
            assert entry["logprob"] <= top[0] + 1e-6
    assert response["usage"]["completion_tokens"] == sum(
        len(c["token_ids"]) for c in response["choices"]
    )


async def test_a_seed_gives_the_same_answer_whatever_runs_beside_it(base_dir) -> None:
    engine = LocalEngine(base_dir, max_concurrency=3)
    seeded = request(temperature=1.0, seed=1234, max_tokens=20)
    alone = await engine.complete(seeded, model=None, timeout=60)
    noise = request(temperature=1.0, max_tokens=20)
    crowded = await asyncio.gather(
        engine.complete(noise, model=None, timeout=60),
        engine.complete(seeded, model=None, timeout=60),
        engine.complete(noise, model=None, timeout=60),
    )
    other = await engine.complete({**seeded, "seed": 4321}, model=None, timeout=60)
    ids = alone["choices"][0]["token_ids"]
    assert crowded[1]["choices"][0]["token_ids"] == ids
    assert other["choices"][0]["token_ids"] != ids


async def test_a_lora_adapter_serves_its_own_logprobs(base_dir, tmp_path) -> None:
    adapter = lora_adapter(base_dir, tmp_path / "adapter")
    plain = LocalEngine(base_dir)
    adapted = LocalEngine(base_dir, adapter, version="tiny@1+lora")
    body = request(temperature=0, max_tokens=16)
    base_answer = await plain.complete(body, model=None, timeout=60)
    answer = await adapted.complete(body, model=None, timeout=60)
    choice = answer["choices"][0]
    assert answer["model"] == "tiny@1+lora"
    assert logprobs_of(choice) != logprobs_of(base_answer["choices"][0])
    expected = recomputed(adapted.loaded, answer["prompt_token_ids"], choice["token_ids"], 0)
    assert max(abs(a - b) for a, b in zip(expected, logprobs_of(choice), strict=True)) < 1e-4


# --- tool calls and stop strings ----------------------------------------------------------


async def test_tool_calls_are_parsed_out_of_the_text(taught_dir) -> None:
    engine = LocalEngine(taught_dir, version="taught@1")
    body = request(ORDER_QUESTION, tools=ORDER_TOOLS, temperature=0, max_tokens=120)
    response = await engine.complete(body, model=None, timeout=60)
    choice = response["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Checking."
    (call,) = choice["message"]["tool_calls"]
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"]["name"] == "lookup_order"
    assert json.loads(call["function"]["arguments"]) == {"order_id": "42"}
    assert choice["token_ids"][-1] in engine.loaded.eos_ids  # the end of turn is an action too
    assert len(choice["token_ids"]) == len(choice["logprobs"]["content"])

    untooled = await engine.complete({**body, "tool_choice": "none"}, model=None, timeout=60)
    assert untooled["choices"][0]["message"] == {"role": "assistant", "content": ORDER_ANSWER}
    assert untooled["choices"][0]["finish_reason"] == "stop"


async def test_a_stop_string_ends_the_answer_and_is_cut_off(taught_dir) -> None:
    engine = LocalEngine(taught_dir)
    body = request(ORDER_QUESTION, tools=ORDER_TOOLS, temperature=0, stop=["<tool_call>"])
    response = await engine.complete(body, model=None, timeout=60)
    choice = response["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "Checking."}
    assert choice["finish_reason"] == "stop"
    assert len(choice["token_ids"]) == len("Checking.<tool_call>")  # one token per byte

    chunks = [c async for c in engine.stream(body, model=None, timeout=60)]
    deltas = [c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]]
    assert "".join(deltas) == "Checking."  # "<tool_call" was held back, never sent
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


async def test_streaming_sends_what_a_completion_returns_token_by_token(taught_dir) -> None:
    engine = LocalEngine(taught_dir, version="taught@1")
    body = request(ORDER_QUESTION, tools=ORDER_TOOLS, temperature=0, max_tokens=120)
    whole = await engine.complete(body, model=None, timeout=60)
    chunks = [
        c
        async for c in engine.stream(
            {**body, "stream_options": {"include_usage": True}}, model=None, timeout=60
        )
    ]
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "taught@1" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[0]["prompt_token_ids"] == whole["prompt_token_ids"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == whole["usage"]
    token_chunks = [c for c in chunks if c["choices"] and c["choices"][0].get("token_ids")]
    assert all(len(c["choices"][0]["token_ids"]) == 1 for c in token_chunks)

    streamed = assemble_chunks(chunks)["choices"][0]
    expected = whole["choices"][0]
    assert streamed["token_ids"] == expected["token_ids"]
    assert streamed["logprobs"]["content"] == expected["logprobs"]["content"]
    assert streamed["finish_reason"] == "tool_calls"
    assert streamed["message"]["content"] == "Checking."
    (call,) = streamed["message"]["tool_calls"]
    assert call["function"]["name"] == "lookup_order"
    assert json.loads(call["function"]["arguments"]) == {"order_id": "42"}


async def test_streams_of_several_choices_end_each_choice(base_dir) -> None:
    engine = LocalEngine(base_dir)
    body = request(temperature=1.0, seed=5, n=2, max_tokens=8)
    chunks = [c async for c in engine.stream(body, model=None, timeout=60)]
    whole = await engine.complete(body, model=None, timeout=60)
    assembled = assemble_chunks(chunks)
    assert [c["finish_reason"] for c in assembled["choices"]] == ["length", "length"]
    assert [c["token_ids"] for c in assembled["choices"]] == [
        c["token_ids"] for c in whole["choices"]
    ]


# --- serving: concurrency, timeouts, two sets of weights ----------------------------------


async def test_concurrency_is_bounded_and_the_event_loop_stays_free(base_dir) -> None:
    engine = LocalEngine(base_dir, max_concurrency=2)
    gate = Gate(await engine.load())
    body = request(temperature=0, max_tokens=3)
    requests = [
        asyncio.ensure_future(engine.complete(body, model=None, timeout=60)) for _ in range(5)
    ]
    await gate.wait_inside(1)
    await asyncio.sleep(0.2)
    assert engine.in_flight == 5  # one prefilling, one waiting to join, three for a slot
    gate.opened.set()
    answers = await asyncio.gather(*requests)
    assert max(gate.decode_rows) == 2  # two decode together, never more
    assert len({tuple(a["choices"][0]["token_ids"]) for a in answers}) == 1
    assert engine.in_flight == 0


async def test_requests_decode_together_as_each_would_alone(base_dir) -> None:
    """Prompts of different lengths, greedy and sampled, n of 1 and 3, joining a batch at
    different steps: each answer is the one it gets alone, with its own logprobs."""
    engine = LocalEngine(base_dir, max_concurrency=8)
    bodies = [
        request(temperature=0, max_tokens=24),
        request(
            [{"role": "user", "content": "where is my order? " * 6}], temperature=0, max_tokens=9
        ),
        request(temperature=0.8, seed=7, n=3, max_tokens=17),
        request(ORDER_QUESTION, tools=ORDER_TOOLS, temperature=1.0, seed=3, max_tokens=30),
    ]
    alone = [await engine.complete(body, model=None, timeout=60) for body in bodies]
    gate = Gate(engine.loaded)
    gate.opened.set()
    together = await asyncio.gather(
        *(engine.complete(body, model=None, timeout=60) for body in bodies),
        _late(engine, bodies[1]),
    )
    assert max(gate.decode_rows) >= 6  # the batch held several requests at once
    for body, single, batched in zip(
        bodies + bodies[1:2], alone + alone[1:2], together, strict=True
    ):
        temperature = body["temperature"]
        for mine, theirs in zip(batched["choices"], single["choices"], strict=True):
            assert mine["token_ids"] == theirs["token_ids"]
            assert mine["message"] == theirs["message"]
            expected = recomputed(
                engine.loaded, batched["prompt_token_ids"], mine["token_ids"], temperature
            )
            got = logprobs_of(mine)
            assert max(abs(a - b) for a, b in zip(expected, got, strict=True)) < 1e-4


async def test_a_request_that_fails_leaves_the_others_decoding(base_dir) -> None:
    engine = LocalEngine(base_dir)
    body = request(temperature=0, max_tokens=20)
    alone = await engine.complete(body, model=None, timeout=60)
    loaded = engine.loaded
    gate = Gate(loaded)
    running = asyncio.ensure_future(engine.complete(body, model=None, timeout=60))
    await gate.wait_inside(1)  # its prefill: the broken request joins the batch after it

    def on_step(steps: list) -> None:
        on_step.calls = getattr(on_step, "calls", 0) + 1
        if on_step.calls == 3:
            raise RuntimeError("the stream's consumer broke")

    prompt = prompt_ids(loaded, body)
    sampling = Sampling.of(body, default_max_tokens=20)
    broken = _Job(prompt, sampling, 20, threading.Event(), on_step)
    loaded.decoder.submit(broken)
    gate.opened.set()
    with pytest.raises(UpstreamError, match="the stream's consumer broke"):
        await asyncio.wrap_future(broken.done)
    answer = await running
    assert answer["choices"][0]["token_ids"] == alone["choices"][0]["token_ids"]
    assert 2 in gate.decode_rows  # they did decode together


async def _late(engine: LocalEngine, body: dict) -> dict:
    """`body` sent once the others have decoded a few steps."""
    await asyncio.sleep(0.05)
    return await engine.complete(body, model=None, timeout=60)


async def test_a_timeout_stops_the_generation_and_frees_its_slot(base_dir) -> None:
    engine = LocalEngine(base_dir, max_concurrency=1)
    gate = Gate(await engine.load())
    asyncio.get_running_loop().call_later(0.5, gate.opened.set)
    with pytest.raises(UpstreamTimeout):
        await engine.complete(request(temperature=0, max_tokens=200), model=None, timeout=0.2)
    assert engine.in_flight == 0
    answer = await engine.complete(request(temperature=0, max_tokens=2), model=None, timeout=60)
    assert len(answer["choices"][0]["token_ids"]) == 2


async def test_a_stream_closed_early_stops_its_generation(base_dir) -> None:
    engine = LocalEngine(base_dir, max_concurrency=1)
    loaded = await engine.load()
    forward, calls = loaded.model.forward, []
    loaded.model.forward = lambda *a, **k: calls.append(1) or forward(*a, **k)
    stream = engine.stream(request(temperature=0, max_tokens=2000), model=None, timeout=60)
    for _ in range(4):
        await anext(stream)
    await stream.aclose()  # what a client that hangs up leads to
    assert engine.in_flight == 0
    made = len(calls)
    answer = await engine.complete(request(temperature=0, max_tokens=2), model=None, timeout=60)
    assert len(answer["choices"][0]["token_ids"]) == 2
    assert made < 100 and len(calls) == made + 2


async def test_two_sets_of_weights_decode_side_by_side_each_on_its_own(
    base_dir, taught_dir
) -> None:
    """Stable and a canary on the same device, as the engine pool serves them: one engine
    per set of weights, both batches stepped by one scheduler thread."""
    body = request(ORDER_QUESTION, tools=ORDER_TOOLS, temperature=0, max_tokens=12)
    stable = LocalEngine(base_dir, version="tiny@1", max_concurrency=8)
    canary = LocalEngine(taught_dir, version="tiny@2", max_concurrency=8)
    before = (await stable.complete(body, model=None, timeout=60))["choices"][0]["token_ids"]
    after = (await canary.complete(body, model=None, timeout=60))["choices"][0]["token_ids"]
    assert before != after

    gate = Gate(stable.loaded)
    old = [asyncio.ensure_future(stable.complete(body, model=None, timeout=60)) for _ in range(3)]
    old.append(asyncio.ensure_future(_stream_ids(stable, body)))
    await gate.wait_inside(1)  # stable's batch is stuck in its first forward
    # The canary's requests join their own batch (one scheduler thread runs both, so they
    # run once stable's forward is let go).
    new_requests = asyncio.gather(
        *(canary.complete(body, model=None, timeout=60) for _ in range(2)),
        _stream_ids(canary, body),
    )
    await asyncio.sleep(0.2)
    assert stable.in_flight == 4 and canary.in_flight == 3
    gate.opened.set()
    finished, new = await asyncio.gather(asyncio.gather(*old), new_requests)

    for answer in finished[:3]:
        assert (answer["model"], answer["choices"][0]["token_ids"]) == ("tiny@1", before)
    assert finished[3] == ("tiny@1", before)
    for answer in new[:2]:
        assert (answer["model"], answer["choices"][0]["token_ids"]) == ("tiny@2", after)
    assert new[2] == ("tiny@2", after)


async def _stream_ids(engine: LocalEngine, body: dict) -> tuple[str, list[int]]:
    chunks = [c async for c in engine.stream(body, model=None, timeout=60)]
    assembled = assemble_chunks(chunks)
    return assembled["model"], assembled["choices"][0]["token_ids"]


async def test_concurrent_first_requests_share_one_load(base_dir, monkeypatch) -> None:
    engine = LocalEngine(base_dir)
    loads = []
    monkeypatch.setattr(
        "proxy.engines.local.load_model", lambda *a, **k: loads.append(a) or load_model(*a, **k)
    )
    body = request(temperature=0, max_tokens=2)
    await asyncio.gather(*(engine.complete(body, model=None, timeout=60) for _ in range(3)))
    assert len(loads) == 1


async def test_closing_waits_for_requests_in_flight_then_frees_the_weights(base_dir) -> None:
    engine = LocalEngine(base_dir)
    gate = Gate(await engine.load())
    running = asyncio.ensure_future(
        engine.complete(request(temperature=0, max_tokens=2), model=None, timeout=60)
    )
    await gate.wait_inside(1)
    closing = asyncio.ensure_future(engine.aclose())
    await asyncio.sleep(0.1)
    assert not closing.done() and engine.loaded is not None
    gate.opened.set()
    await asyncio.gather(running, closing)
    assert engine.loaded is None
    # A request that still reaches it (an evicted engine in a request's hands) is served.
    answer = await engine.complete(request(temperature=0, max_tokens=2), model=None, timeout=60)
    assert answer["choices"][0]["token_ids"] and engine.loaded is None


# --- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"temperature": -1}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"n": 0}, "n must be"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ({"seed": "abc"}, "invalid sampling"),
        ({"temperature": "hot"}, "temperature must be a number"),
    ],
)
async def test_invalid_sampling_parameters_are_refused(base_dir, params, message) -> None:
    engine = LocalEngine(base_dir)
    with pytest.raises(UpstreamError, match=message) as caught:
        await engine.complete(request(**params), model=None, timeout=60)
    assert caught.value.status == 400


async def test_a_missing_checkpoint_is_named(tmp_path) -> None:
    engine = LocalEngine(tmp_path / "nowhere", version="ghost@1")
    with pytest.raises(UpstreamError, match="could not load ghost@1") as caught:
        await engine.complete(request(), model=None, timeout=60)
    assert caught.value.status == 503 and "nowhere" in str(caught.value)


def test_importing_the_gateway_does_not_import_torch() -> None:
    code = "import sys, proxy.gateway, proxy.engines; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- the tool-call parser -----------------------------------------------------------------

plain_text = st.text(alphabet=st.sampled_from('ab <>/_clot{}"\n'), max_size=30) | st.text(
    max_size=10
)
arguments = st.dictionaries(
    st.text(min_size=1, max_size=8), st.one_of(st.integers(), st.text(max_size=8)), max_size=3
)
calls = st.tuples(st.text(min_size=1, max_size=12), arguments)
parts = st.lists(st.one_of(plain_text, calls), max_size=6)


def render(part) -> str:
    if isinstance(part, str):
        return part
    name, args = part
    return f"{TOOL_CALL_OPEN}{json.dumps({'name': name, 'arguments': args})}{TOOL_CALL_CLOSE}"


@given(parts)
def test_tool_calls_round_trip_through_the_parser(parts) -> None:
    text = "".join(render(p) for p in parts)
    expected_calls = [p for p in parts if not isinstance(p, str)]
    # Adjacent texts may spell a tag ("<tool_" + "call>"): then it is not this round trip.
    assume(text.count(TOOL_CALL_OPEN) == text.count(TOOL_CALL_CLOSE) == len(expected_calls))
    content, parsed = parse_tool_calls(text)
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in parsed] == [
        (name, args) for name, args in expected_calls
    ]
    texts = "".join(p for p in parts if isinstance(p, str))
    assert content == (texts.strip() or None if expected_calls else text)


@given(st.text(max_size=60))
def test_text_without_complete_calls_is_left_alone(text) -> None:
    content, parsed = parse_tool_calls(text)
    if not parsed:
        assert content == text


@given(parts, st.lists(st.integers(min_value=0, max_value=200), max_size=8))
def test_a_stream_in_any_pieces_splits_like_the_whole_text(parts, cuts) -> None:
    text = "".join(render(p) for p in parts)
    splitter = ToolCallStream()
    content, streamed = "", []
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    for start, end in zip(bounds, bounds[1:], strict=False):
        piece, found = splitter.feed(text[start:end])
        content, streamed = content + piece, streamed + found
    rest, found = splitter.close()
    content, streamed = content + rest, streamed + found
    whole_content, whole = parse_tool_calls(text)
    assert [c["function"] for c in streamed] == [c["function"] for c in whole]
    assert (content.strip() or None if whole else content) == whole_content


@given(
    st.sampled_from(
        ["{}", "not json", '{"name": ""}', '{"name": 3}', '{"name": "f", "arguments": 1}']
    )
)
def test_unparsable_calls_stay_content(payload) -> None:
    text = f"before {TOOL_CALL_OPEN}{payload}{TOOL_CALL_CLOSE} after"
    assert parse_tool_calls(text) == (text, [])


def called(response: dict) -> list[str]:
    return [c["function"]["name"] for c in response["choices"][0]["message"]["tool_calls"]]


async def test_a_tool_call_is_written_with_an_offered_name(blending_dir) -> None:
    """The guide keeps the name to the offered tools, the logprobs stay the model's own, and
    the RL trainer's sampler, given the same names, samples the very same tokens."""
    from evolution.rl.policy import Policy

    body = request(ORDER_QUESTION, tools=ORDER_TOOLS, temperature=0, max_tokens=96, logprobs=True)
    free = await LocalEngine(blending_dir, guide_tools=False).complete(body, model=None, timeout=60)
    assert called(free) == ["lookup_ordar"]

    engine = LocalEngine(blending_dir)
    guided = await engine.complete(body, model=None, timeout=60)
    assert called(guided) == ["lookup_order"]
    choice, prompt = guided["choices"][0], guided["prompt_token_ids"]
    expected = recomputed(engine.loaded, prompt, choice["token_ids"], temperature=0)
    assert logprobs_of(choice) == pytest.approx(expected, abs=1e-4)

    policy = Policy(engine.loaded.model, engine.loaded.tokenizer)
    (sample,) = policy.sample(
        prompt, 1, max_new_tokens=96, temperature=0, tool_names=["lookup_order"]
    )
    assert sample.token_ids == choice["token_ids"]
    (unguided,) = policy.sample(prompt, 1, max_new_tokens=96, temperature=0)
    assert unguided.token_ids == free["choices"][0]["token_ids"]
