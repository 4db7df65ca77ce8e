"""One guide per set of offered tool names, whatever their order; none without names."""

from __future__ import annotations

from types import SimpleNamespace

from runtime.model.guide import MAX_GUIDES, ToolCallGuides

ASCII = SimpleNamespace(texts=lambda: [chr(i) for i in range(128)])


def test_a_set_of_names_has_one_guide_whatever_their_order() -> None:
    guides = ToolCallGuides(ASCII)
    guide = guides.get(["lookup_order", "escalate"])
    assert guide is not None
    assert guides.get(("escalate", "lookup_order", "escalate")) is guide
    assert guides.get(()) is None


def test_the_oldest_guide_gives_way_once_there_are_too_many() -> None:
    guides = ToolCallGuides(ASCII)
    first = guides.get(["tool_0"])
    for i in range(1, MAX_GUIDES + 1):
        guides.get([f"tool_{i}"])
    assert guides.get(["tool_0"]) is not first
    assert guides.get([f"tool_{MAX_GUIDES}"]) is guides.get([f"tool_{MAX_GUIDES}"])
