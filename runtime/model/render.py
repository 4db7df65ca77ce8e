"""A chat request as the token ids a model reads: one function for serving and training.

Chat templates know the roles and plain-text content of their own training data. Requests
in OpenAI's shapes bring two more things: the `developer` role (newer OpenAI models' name
for system instructions) and content given as a list of parts. Both are mapped here, once:
a served request and the same request trained on render to the same ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["prompt_ids", "template_message"]


def template_message(message: dict[str, Any]) -> dict[str, Any]:
    """`message` in the shape chat templates know: the developer role as system, content
    parts joined into their text (parts without text, such as images, are left out)."""
    message = dict(message)
    if message.get("role") == "developer":
        message["role"] = "system"
    content = message.get("content")
    if isinstance(content, list):
        message["content"] = "".join(
            part.get("text", "") for part in content if isinstance(part, dict)
        )
    return message


def prompt_ids(
    tokenizer: Any, messages: Sequence[dict[str, Any]], tools: Sequence[dict] | None = None
) -> list[int]:
    """The token ids of `messages` (and `tools`) in the tokenizer's chat template, ending
    with the opening of the assistant's turn.

    Raises:
        whatever the template raises (jinja errors for a request it cannot render).
    """
    text = tokenizer.apply_chat_template(
        [template_message(m) for m in messages],
        tools=list(tools) if tools else None,
        add_generation_prompt=True,
        tokenize=False,
    )
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])
