"""Tool results read as failures in the shapes APIs write them, and successes left alone."""

from __future__ import annotations

import pydantic
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from proxy.capture.tool_results import tool_error_class


class _Booking(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    patient_number: str
    day: str = pydantic.Field(pattern=r"^\d{4}-\d{2}-\d{2}$")


def _fastapi_bodies() -> list[dict]:
    """What a real FastAPI app answers: 422 validation errors and an HTTPException."""
    app = FastAPI()

    @app.post("/book")
    def book(booking: _Booking) -> dict:
        return {"status": "ok", "summary": f"booked {booking.patient_number}"}

    @app.get("/missing")
    def missing() -> dict:
        from fastapi import HTTPException

        raise HTTPException(status_code=404, detail="no such booking")

    client = TestClient(app)
    refused = [
        client.post("/book", json={"patient": "1", "day": "2026-01-01"}),
        client.post("/book", json={"patient_number": "1", "day": "01/02/2026"}),
        client.get("/missing"),
    ]
    assert all(response.status_code >= 400 for response in refused)
    ok = client.post("/book", json={"patient_number": "1", "day": "2026-01-01"})
    return [response.json() for response in refused] + [ok.json()]


def test_fastapi_refusals_are_errors_and_its_success_is_not() -> None:
    missing_field, bad_pattern, not_found, booked = _fastapi_bodies()
    assert tool_error_class(missing_field) == "validation_error"
    assert tool_error_class(bad_pattern) == "validation_error"
    assert tool_error_class(not_found) == "tool_error"
    assert tool_error_class(booked) is None


def test_common_error_shapes() -> None:
    assert tool_error_class({"error": "order not found"}) == "error"
    assert tool_error_class({"error": "x", "error_type": "not_found"}) == "not_found"
    assert tool_error_class({"errors": [{"message": "bad date"}]}) == "validation_error"
    assert tool_error_class({"ok": False, "reason": "locked"}) == "tool_error"
    assert tool_error_class({"success": False}) == "tool_error"
    assert tool_error_class({"status": "failed", "message": "timeout"}) == "tool_error"
    assert tool_error_class({"status_code": 429, "message": "slow down"}) == "http_429"
    assert tool_error_class("Error: invalid order_id") == "tool_error"
    assert tool_error_class("Traceback (most recent call last): ...") == "tool_error"


@given(
    st.dictionaries(
        st.sampled_from(["status", "summary", "detail", "result", "items", "id", "ok"]),
        st.one_of(
            st.sampled_from(["ok", "done", "shipped", 200, 201, True, "fine"]),
            st.lists(st.integers(), max_size=3),
        ),
        min_size=1,
    )
)
def test_results_without_an_error_sign_are_successes(result: dict) -> None:
    if set(result) == {"detail"}:
        return  # a body of `detail` alone is FastAPI's error shape
    assert tool_error_class(result) is None


@given(
    st.text(max_size=60).filter(
        lambda t: not t.strip().lower().startswith(("err", "exc", "tra", "inv", "fai"))
    )
)
def test_plain_text_reads_as_success_unless_it_opens_like_an_error(text: str) -> None:
    assert tool_error_class(text) is None
