"""The operators as the build activity runs them: each one's evidence read from the
registry, its plain proposal (`evolution`), and what it stores (memory items).

`Operator` pairs the halves; the activity runs them apart, the evidence read in one
transaction and the proposal written in another.
"""

from activities.operators.harness import make_harness_operator, read_harness_cases
from activities.operators.memory import memory_operator
from activities.operators.operator import Operator
from activities.operators.skills import skill_operator
from activities.operators.tool_schema import tool_schema_operator

__all__ = [
    "Operator",
    "make_harness_operator",
    "memory_operator",
    "read_harness_cases",
    "skill_operator",
    "tool_schema_operator",
]
