"""Upstream engines: where the gateway sends a chat completion after applying the version."""

from proxy.engines.anthropic import AnthropicEngine
from proxy.engines.base import UpstreamEngine, UpstreamError, UpstreamTimeout
from proxy.engines.local import LocalEngine
from proxy.engines.openai_compat import OpenAICompatEngine
from proxy.engines.openai_responses import ResponsesEngine
from proxy.engines.sglang import SGLangEngine
from proxy.engines.sglang_admin import SGLangAdmin, WeightSyncError

# The engines that reach a server over HTTP, by a version's `model.engine`.
HTTP_ENGINES: dict[str, type[OpenAICompatEngine]] = {
    "openai": OpenAICompatEngine,
    "sglang": SGLangEngine,
    "anthropic": AnthropicEngine,
    "openai-responses": ResponsesEngine,
}

__all__ = [
    "HTTP_ENGINES",
    "AnthropicEngine",
    "LocalEngine",
    "OpenAICompatEngine",
    "ResponsesEngine",
    "SGLangAdmin",
    "SGLangEngine",
    "UpstreamEngine",
    "UpstreamError",
    "UpstreamTimeout",
    "WeightSyncError",
]
