"""SFT targets from replay: a failed step re-served to a teacher, kept where it is verified.

A step failed when its own effective reward is below success. Its recorded request (the
messages and tools the model saw) is sent to a teacher, which answers `n` times; the first
answer the verifier accepts becomes a demonstration. A teacher is any OpenAI-compatible
chat endpoint (`OpenAITeacher`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from evolution.rl.data.text import completion_text
from evolution.rl.rewards import RewardFunction
from evolution.rl.samples import SUCCESS, RecordedPrompt
from evolution.rl.sft import Demonstration

__all__ = ["OpenAITeacher", "Teacher", "teacher_targets"]


class Teacher(Protocol):
    """Answers a recorded prompt `n` times, each answer as the model's text."""

    def __call__(self, prompt: RecordedPrompt, n: int) -> list[str]: ...


def teacher_targets(
    prompts: Sequence[RecordedPrompt],
    teacher: Teacher,
    verifier: RewardFunction,
    *,
    n: int = 4,
    accept: float = 1.0,
) -> list[Demonstration]:
    """A demonstration for each failed prompt the teacher answers acceptably (a verifier
    score of at least `accept`); prompts that did not fail are left alone."""
    targets = []
    for prompt in prompts:
        if prompt.reward is None or prompt.reward >= SUCCESS:
            continue
        answer = next((t for t in teacher(prompt, n) if verifier(prompt, t) >= accept), None)
        if answer is not None:
            targets.append(Demonstration(prompt.messages, answer, prompt.tools or None))
    return targets


class OpenAITeacher:
    """A chat-completions endpoint as teacher (`base_url` ends before `/chat/completions`).

    Args:
        client: an `httpx.Client` (one per upstream; tests pass one for a loopback server).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        temperature: float = 1.0,
        client: Any = None,
        timeout_s: float = 60.0,
    ) -> None:
        import httpx

        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.temperature = model, temperature
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = client or httpx.Client(timeout=timeout_s)

    def __call__(self, prompt: RecordedPrompt, n: int) -> list[str]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": prompt.messages,
            "temperature": self.temperature,
            "n": n,
        }
        if prompt.tools:
            body["tools"] = prompt.tools
        response = self.client.post(self.url, json=body, headers=self.headers)
        if response.status_code != 200:
            raise RuntimeError(
                f"the teacher at {self.url} answered {response.status_code}: "
                f"{response.text[:300]}; check its base URL, model and key"
            )
        return [_text(choice["message"]) for choice in response.json()["choices"]]


def _text(message: dict[str, Any]) -> str:
    calls = [
        {"name": c["function"]["name"], "arguments": c["function"].get("arguments")}
        for c in message.get("tool_calls") or []
    ]
    return completion_text({"content": message.get("content"), "tool_calls": calls})
