"""The chat-completion request check: tool parameter schemas, whose verdicts are cached."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import ValidationError

from proxy.schemas import ChatCompletionRequest

# Schema-like documents: mostly keywords the metaschema checks, with values of any type,
# so both valid and invalid schemas come up often.
_KEYWORDS = st.sampled_from(
    ["type", "properties", "required", "items", "enum", "minimum", "description", "x-note"]
)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(["object", "string", "x"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYWORDS, inner, max_size=3),
    max_leaves=8,
)
_SCHEMAS = st.dictionaries(_KEYWORDS, _VALUES, max_size=4)


def _request(parameters: dict) -> dict:
    return {
        "model": "bot",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": parameters}}],
    }


def _metaschema_accepts(schema: dict) -> bool:
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return False
    return True


@settings(max_examples=200, deadline=None)
@given(_SCHEMAS)
def test_a_schema_is_accepted_exactly_when_the_metaschema_accepts_it(schema) -> None:
    expected = _metaschema_accepts(schema) and schema.get("type", "object") == "object"
    for _ in range(2):  # the second time, the verdict comes from the cache
        try:
            ChatCompletionRequest.model_validate(_request(schema))
            accepted = True
        except ValidationError:
            accepted = False
        assert accepted == expected


def test_the_same_schema_with_keys_in_another_order_gets_the_same_verdict() -> None:
    bad = {"type": "object", "properties": {"a": {"type": 5}}}
    reordered = {"properties": {"a": {"type": 5}}, "type": "object"}
    for schema in (bad, reordered, bad):
        with pytest.raises(ValidationError, match="not a valid JSON Schema"):
            ChatCompletionRequest.model_validate(_request(schema))
    good = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    ChatCompletionRequest.model_validate(_request(good))
    ChatCompletionRequest.model_validate(_request(dict(reversed(good.items()))))


def test_a_schema_json_cannot_hold_as_a_cache_key_is_still_checked() -> None:
    huge = 2**70  # beyond what orjson writes: checked without the cache
    ChatCompletionRequest.model_validate(_request({"type": "object", "maximum": huge}))
    with pytest.raises(ValidationError, match="not a valid JSON Schema"):
        ChatCompletionRequest.model_validate(_request({"type": "object", "required": huge}))
