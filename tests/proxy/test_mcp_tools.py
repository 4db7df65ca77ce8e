"""The tool-schema overlay at the MCP boundary, for any listing, overlay and arguments."""

from __future__ import annotations

import mcp_types as types
from hypothesis import given
from hypothesis import strategies as st

from atdp import Guardrails, ModelRef, ToolOverride, ToolSchemaOverlay, VersionSpec
from proxy.mcp.tools import is_blocked, overlaid_tools, upstream_arguments

names = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True)
values = st.one_of(st.integers(), st.text(max_size=5), st.booleans(), st.none())


def tool(name: str, parameters: list[str]) -> types.Tool:
    schema = {"type": "object", "properties": {p: {"type": "string"} for p in parameters}}
    return types.Tool(name=name, description=f"the {name} tool", input_schema=schema)


@st.composite
def overlays(draw):
    """A listing, a version overlay renaming some parameters of some tools, blocked tools."""
    listing = draw(st.dictionaries(names, st.lists(names, max_size=4, unique=True), max_size=5))
    overrides, blocked = {}, []
    for name, parameters in listing.items():
        if draw(st.booleans()):
            blocked.append(name)
        if parameters and draw(st.booleans()):
            renamed = {
                p: f"{p}_new" for p in draw(st.lists(st.sampled_from(parameters), unique=True))
            }
            schema = {
                "type": "object",
                "properties": {renamed.get(p, p): {"type": "string"} for p in parameters},
            }
            overrides[name] = ToolOverride(
                description=f"{name}, rewritten",
                parameters=schema,
                argument_map={new: old for old, new in renamed.items()},
            )
    spec = VersionSpec(
        model=ModelRef(engine="openai", model="m"),
        tools=ToolSchemaOverlay(tools=overrides),
        guardrails=Guardrails(blocked_tools=blocked),
    )
    return [tool(n, p) for n, p in listing.items()], spec


@given(overlays())
def test_the_client_sees_the_versions_tools_in_order_without_the_blocked(case) -> None:
    listing, spec = case
    before = [t.model_copy(deep=True) for t in listing]
    shown = overlaid_tools(listing, spec)
    assert listing == before  # the upstream's listing is left as it was
    assert [t.name for t in shown] == [t.name for t in listing if not is_blocked(t.name, spec)]
    for seen in shown:
        override = spec.tools.tools.get(seen.name)
        original = next(t for t in listing if t.name == seen.name)
        if override is None:
            assert seen == original
        else:
            assert seen.input_schema == override.parameters
            assert seen.description == override.description


@given(overlays(), st.data())
def test_arguments_in_the_clients_names_reach_the_server_in_its_own(case, data) -> None:
    listing, spec = case
    for original in listing:
        server_names = list(original.input_schema["properties"])
        arguments = data.draw(st.fixed_dictionaries({p: values for p in server_names}))
        override = spec.tools.tools.get(original.name)
        to_client = {old: new for new, old in (override.argument_map if override else {}).items()}
        sent = {to_client.get(k, k): v for k, v in arguments.items()}
        assert upstream_arguments(original.name, sent, spec) == arguments
    assert upstream_arguments("anything", None, spec) is None
