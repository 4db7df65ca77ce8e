"""Upstream engines: where the gateway sends a chat completion after applying the version."""

from proxy.engines.base import UpstreamEngine, UpstreamError, UpstreamTimeout
from proxy.engines.openai_compat import OpenAICompatEngine

__all__ = ["OpenAICompatEngine", "UpstreamEngine", "UpstreamError", "UpstreamTimeout"]
