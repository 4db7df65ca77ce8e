"""The tool-call guides of one vocabulary: one per set of offered tool names, made once.

A guide (`atdp.tool_text.ToolCallGuide`) keeps the head of a tool call to the offered
names while it is written; serving and training draw through the same guides, so a model
is trained on the calls it is served to make.
"""

from __future__ import annotations

from collections.abc import Iterable

from atdp.tool_text import ToolCallGuide
from runtime.model.tokens import TokenTable

__all__ = ["ToolCallGuides"]

# Agents offer few tool sets; the guides are bounded all the same.
MAX_GUIDES = 64


class ToolCallGuides:
    """The guide of each set of tool names, over the texts of `tokens`' vocabulary."""

    def __init__(self, tokens: TokenTable) -> None:
        self.tokens = tokens
        self._guides: dict[tuple[str, ...], ToolCallGuide] = {}

    def get(self, names: Iterable[str]) -> ToolCallGuide | None:
        """The guide for these offered names (in any order); None for no names."""
        key = tuple(sorted(set(names)))
        if not key:
            return None
        if key not in self._guides:
            if len(self._guides) >= MAX_GUIDES:
                self._guides.pop(next(iter(self._guides)))
            self._guides[key] = ToolCallGuide(key, self.tokens.texts())
        return self._guides[key]
