"""Upstream engines: where the gateway sends a chat completion after applying the version."""

from proxy.engines.base import UpstreamEngine, UpstreamError, UpstreamTimeout
from proxy.engines.local import LocalEngine
from proxy.engines.openai_compat import OpenAICompatEngine
from proxy.engines.sglang import SGLangEngine
from proxy.engines.sglang_admin import SGLangAdmin, WeightSyncError

__all__ = [
    "LocalEngine",
    "OpenAICompatEngine",
    "SGLangAdmin",
    "SGLangEngine",
    "UpstreamEngine",
    "UpstreamError",
    "UpstreamTimeout",
    "WeightSyncError",
]
