"""Code scorers for tests: entry points as a team would write them, and an HTTP endpoint.

The functions are named in agent settings as `tests.support.scorers:<name>`; the endpoint
is a real server on loopback that scores a batch and remembers what it was sent.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.conftest import free_port

__all__ = ["SLOW_SECONDS", "ScoringEndpoint"]

SLOW_SECONDS = 30.0


def says_booked(trajectory: dict[str, Any]) -> dict[str, Any]:
    """A booking exists when the answer says so: 1, else 0, with a critique."""
    answer = (trajectory.get("answer") or "").lower()
    booked = "booked" in answer
    return {"value": booked, "critique": "a booking was confirmed" if booked else "no booking"}


def abstains(trajectory: dict[str, Any]) -> None:
    return None


def raises(trajectory: dict[str, Any]) -> float:
    raise RuntimeError("the bookings database is down")


def hangs(trajectory: dict[str, Any]) -> float:
    time.sleep(SLOW_SECONDS)
    return 1.0


def answers_nonsense(trajectory: dict[str, Any]) -> str:
    return "looks fine to me"


NOT_A_FUNCTION = 42


class ScoringEndpoint:
    """A scoring endpoint on loopback: `score` maps a trajectory to a value (or raises to
    leave it out of the answer); `status` other than 200 fails every request."""

    def __init__(self, score=lambda t: 1.0, status: int = 200) -> None:
        self.score, self.status = score, status
        self.batches: list[list[dict[str, Any]]] = []
        self.port = free_port()
        app = Starlette(routes=[Route("/score", self._handle, methods=["POST"])])
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/score"

    async def _handle(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.batches.append(body["trajectories"])
        if self.status != 200:
            return JSONResponse({"error": "scripted failure"}, status_code=self.status)
        results = []
        for trajectory in body["trajectories"]:
            try:
                value = self.score(trajectory)
            except LookupError:
                continue
            results.append({"trajectory_id": trajectory["trajectory_id"], "value": value})
        return JSONResponse({"results": results})

    def __enter__(self) -> ScoringEndpoint:
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)
        return self

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join()
