"""The Temporal search attributes Evoplane keeps current on every evolution.

They make the Temporal UI a product surface: "all rollbacks of agent X" is a filter
(`Agent = "X" AND Outcome = "rolled_back"`: `Action` is what was decided, so a canary
that failed and rolled back a harness change has `Action = "harness"`), not a code read.
`Tenant` holds the tenants in scope, every tenant of the agent when none was named.
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

__all__ = ["ACTION", "AGENT", "ALL", "OUTCOME", "STAGE", "TENANT", "dev_server_flags"]

AGENT = SearchAttributeKey.for_keyword("Agent")
TENANT = SearchAttributeKey.for_keyword_list("Tenant")  # an evolution may span tenants
ACTION = SearchAttributeKey.for_keyword("Action")
STAGE = SearchAttributeKey.for_keyword("Stage")
OUTCOME = SearchAttributeKey.for_keyword("Outcome")

ALL = (AGENT, TENANT, ACTION, STAGE, OUTCOME)

_TYPE_NAMES = {"KEYWORD": "Keyword", "KEYWORD_LIST": "KeywordList"}


def dev_server_flags() -> list[str]:
    """`--search-attribute Name=Type` flags that register ALL on `temporal server start-dev`."""
    flags: list[str] = []
    for key in ALL:
        flags += ["--search-attribute", f"{key.name}={_TYPE_NAMES[key.indexed_value_type.name]}"]
    return flags
