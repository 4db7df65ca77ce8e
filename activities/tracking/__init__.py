"""MLflow for evolutions: one run per evolution, and registry mirrors of our versions.

Every evolution gets a run in the experiment `evoplane/<agent>`: its parameters, the
decision, the candidate's diff against its parent, each gate's statistics per step (and
its findings about the agent, failures the parent shares, as a tag), and the outcome.
Harness versions are mirrored into MLflow's Prompt Registry and checkpoints into its Model
Registry, with `stable`/`canary` aliases following Evoplane's own aliases (Evoplane's
registry stays the source of truth; MLflow is where people look).

Temporal retries activities, and a timed-out attempt may still be running when the next
one starts, so every method is idempotent: runs are found by their evolution id, registry
versions by their `evoplane.version_id` tag, and parameters are written once.

Arguments are plain JSON values (a spec is `VersionSpec.model_dump(mode="json")`), so this
module does not depend on our pydantic models.
"""

from activities.tracking.diffs import harness_prompt_text
from activities.tracking.errors import TrackingUnavailable
from activities.tracking.names import CHECKPOINT_TAG, VERSION_TAG, model_name, prompt_name
from activities.tracking.tracker import EvolutionTracker
from activities.tracking.values import OUTCOMES

__all__ = [
    "CHECKPOINT_TAG",
    "OUTCOMES",
    "VERSION_TAG",
    "EvolutionTracker",
    "TrackingUnavailable",
    "harness_prompt_text",
    "model_name",
    "prompt_name",
]
