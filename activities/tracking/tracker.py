"""The tracker the activities use: evolution runs and registry mirrors in one MLflow server."""

from __future__ import annotations

from mlflow import MlflowClient

from activities.tracking.registries import RegistryMirror
from activities.tracking.review import ReviewMirror
from activities.tracking.runs import EvolutionRuns

__all__ = ["EvolutionTracker"]


class EvolutionTracker(EvolutionRuns, RegistryMirror, ReviewMirror):
    """Records evolutions in one MLflow server, and mirrors the review queue and evaluation
    sets there; safe to call again after any failure.

    Args:
        tracking_uri: the MLflow tracking server (also used as its model registry).
        temporal_ui_url: base URL of the Temporal Web UI, to link runs to their workflow.
    """

    def __init__(self, tracking_uri: str, temporal_ui_url: str | None = None) -> None:
        self.tracking_uri = tracking_uri
        self.temporal_ui_url = temporal_ui_url.rstrip("/") if temporal_ui_url else None
        # An explicit client, never mlflow's globals: two trackers must not interfere.
        self._client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
