"""The evidence the control plane's plain functions take, read from the registry.

Each reader takes an open registry `Session` and a `WindowSpec` (or what the step names),
reads what one step needs in as few queries as it can, and returns values: the records of
`evolution` (`WindowRecords`, ...) or the registry's own rows. Nothing under `evolution/`
reads the registry itself (tests/test_layering.py).
"""

from activities.evidence.cases import cases_of, recorded_cases
from activities.evidence.corrections import correction_records
from activities.evidence.samples import canary_traffic, shadow_traffic
from activities.evidence.window import SAMPLE_CAP, read_window

__all__ = [
    "SAMPLE_CAP",
    "canary_traffic",
    "cases_of",
    "correction_records",
    "read_window",
    "recorded_cases",
    "shadow_traffic",
]
