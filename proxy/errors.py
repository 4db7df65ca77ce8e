"""Errors in OpenAI's shape, so the agent's own SDK raises the exception it expects.

{"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
"""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse

__all__ = ["GatewayError", "error_body", "gateway_error_handler"]

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    502: "upstream_error",
    504: "timeout_error",
}


class GatewayError(Exception):
    """An error the client gets as an HTTP status with an OpenAI error body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers or {}


def error_body(
    status: int, message: str, param: str | None = None, code: str | None = None
) -> dict:
    return {
        "error": {
            "message": message,
            "type": _TYPES.get(status, "api_error"),
            "param": param,
            "code": code,
        }
    }


async def gateway_error_handler(_: Request, error: GatewayError) -> JSONResponse:
    return JSONResponse(
        error_body(error.status, error.message, error.param, error.code),
        status_code=error.status,
        headers=error.headers,
    )
