"""The model runtime shared by serving (`proxy/engines/local.py`) and training
(`evolution/rl/`): what both must do the same way, or a model is trained on other token
ids than it is served with.

- `checkpoint`: a causal LM and its tokenizer loaded from a checkpoint, with an adapter.
- `render`: a chat request (messages in OpenAI's shapes, tools) as the prompt's token ids.
- `bytes`: GPT-2's byte table, how byte-level vocabularies write bytes as characters.
- `tokens`: each token's text and bytes (`TokenTable`).
- `step`: one forward step with a KV cache, under the name the model takes it by.
- `guide`: the tool-call guide of each set of offered tool names (`ToolCallGuides`).
- `sampling`: the next token drawn, with its logprob under the tempered distribution.
"""

from __future__ import annotations

from runtime.model.render import prompt_ids, template_message

__all__ = ["prompt_ids", "template_message"]
