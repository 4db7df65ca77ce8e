"""The one client of the control API: the CLI, the demo and the scenario suite call it.

Each method is one route; a refusal or an unreachable API becomes a `ControlAPIError`
that says what happened and what to do.
"""

from __future__ import annotations

from typing import Any

import httpx

__all__ = ["ControlAPIError", "ControlClient"]


class ControlAPIError(RuntimeError):
    """The control API refused a request or could not be reached."""


class ControlClient:
    """The control API at `base_url`, called with the admin token."""

    def __init__(self, base_url: str, token: str, timeout: float = 60) -> None:
        self.base_url = base_url
        self.http = httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=timeout
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def call(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        """One call; parameters that are None are left out."""
        try:
            response = self.http.request(
                method, path, json=body, params={k: v for k, v in params.items() if v is not None}
            )
        except httpx.TransportError as error:
            raise ControlAPIError(
                f"the control API at {self.base_url} is not reachable ({error}); start it with "
                "`evoplane up` (or `evoplane api` beside your own Temporal)"
            ) from None
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail")
            except ValueError:
                detail = response.text
            raise ControlAPIError(f"{method} {path}: {response.status_code}: {detail}")
        return response.json()

    def evolve(
        self, agent: str, options: dict[str, Any], tenants: list[str] | None = None
    ) -> dict[str, Any]:
        """Start an evolution: its id, run id and Temporal UI link."""
        return self.call(
            "POST", "/api/evolutions", {"agent": agent, "tenants": tenants, "options": options}
        )

    def evolutions(self, agent: str | None = None) -> list[dict[str, Any]]:
        return self.call("GET", "/api/evolutions", agent=agent)

    def evolution(self, evolution_id: str) -> dict[str, Any]:
        """The evolution's record, its live status (None once the workflow is gone) and link."""
        return self.call("GET", f"/api/evolutions/{evolution_id}")

    def decide(self, evolution_id: str, decision: str, actor: str, reason: str = "") -> Any:
        """`approve`, `reject` or `abort` the evolution, as `actor`, for `reason`."""
        body = {"actor": actor, "reason": reason}
        return self.call("POST", f"/api/evolutions/{evolution_id}/{decision}", body)

    def versions(self, agent: str) -> dict[str, Any]:
        """The agent's aliases and versions."""
        return self.call("GET", f"/api/agents/{agent}/versions")

    def version(self, agent: str, version: str) -> dict[str, Any]:
        """One version (an id, `v3` or an alias): its spec, fingerprints, parent, aliases."""
        return self.call("GET", f"/api/agents/{agent}/versions/{version}")

    def version_diff(self, agent: str, before: str, after: str) -> dict[str, Any]:
        """What changed from version `before` to `after`, part by part."""
        return self.call("GET", f"/api/agents/{agent}/versions/{before}/diff/{after}")

    def configure(self, agent: str, settings: dict[str, Any]) -> dict[str, Any]:
        """Replace the agent's evolution settings."""
        return self.call("PUT", f"/api/agents/{agent}/settings", settings)

    def rollback(
        self, agent: str, actor: str, reason: str, to_version: str | None = None
    ) -> dict[str, Any]:
        body = {"to_version": to_version, "actor": actor, "reason": reason}
        return self.call("POST", f"/api/agents/{agent}/rollback", body)

    def end_holdback(self, agent: str, actor: str, reason: str = "") -> dict[str, Any]:
        body = {"actor": actor, "reason": reason}
        return self.call("POST", f"/api/agents/{agent}/holdback/end", body)

    def schedule(
        self, agent: str, every_minutes: float, tenants: list[str] | None = None
    ) -> dict[str, Any]:
        body = {"agent": agent, "every_minutes": every_minutes, "tenants": tenants}
        return self.call("POST", "/api/schedules", body)

    # --- review, code scorers, evaluation sets ---------------------------------------------

    def review(
        self,
        agent: str | None = None,
        *,
        status: str | None = "open",
        kind: str | None = None,
        reviewer: str | None = None,
        limit: int = 50,
    ) -> dict[str, Any]:
        """The review queue (brought up to date) and each reviewer's progress."""
        return self.call(
            "GET", "/api/review", agent=agent, status=status, kind=kind, reviewer=reviewer,
            limit=limit,
        )  # fmt: skip

    def review_item(self, item_id: int) -> dict[str, Any]:
        return self.call("GET", f"/api/review/{item_id}")

    def label(
        self, item_id: int, reviewer: str, label: str, score: float | None = None, note: str = ""
    ) -> dict[str, Any]:
        body = {"reviewer": reviewer, "label": label, "score": score, "note": note}
        return self.call("POST", f"/api/review/{item_id}/label", body)

    def skip(self, item_id: int, reviewer: str, reason: str = "") -> dict[str, Any]:
        return self.call(
            "POST", f"/api/review/{item_id}/skip", {"reviewer": reviewer, "reason": reason}
        )

    def score(self, agent: str, **body: Any) -> dict[str, Any]:
        """Run the agent's code scorers now (their report), or schedule them."""
        wanted = {key: value for key, value in body.items() if value is not None}
        return self.call("POST", f"/api/agents/{agent}/score", wanted)

    def scorers(self, agent: str) -> list[dict[str, Any]]:
        return self.call("GET", f"/api/agents/{agent}/scorers")

    def evaluation_sets(self, agent: str) -> list[dict[str, Any]]:
        return self.call("GET", f"/api/agents/{agent}/evaluation-sets")

    def evaluation_set(
        self, agent: str, name: str = "default", version: int | None = None
    ) -> dict[str, Any]:
        return self.call("GET", f"/api/agents/{agent}/evaluation-sets/{name}", version=version)
