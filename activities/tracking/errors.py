"""MLflow's failures told apart: retry later (TrackingUnavailable) or fix the input."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

import requests
from mlflow.exceptions import MlflowException

__all__ = ["TrackingUnavailable", "error_code", "mlflow_call"]

# MLflow error codes that mean "the request was wrong". Everything else is retryable, including
# BAD_REQUEST: MLflow's SQL store answers a unique-key collision between racers with it.
_BAD_INPUT_CODES = {
    "RESOURCE_DOES_NOT_EXIST",
    "INVALID_PARAMETER_VALUE",
    "RESOURCE_ALREADY_EXISTS",
    "INVALID_STATE",
}

_Method = TypeVar("_Method", bound=Callable[..., Any])


class TrackingUnavailable(RuntimeError):
    """MLflow could not be reached or failed on its side; retrying later is safe."""

    def __init__(self, tracking_uri: str, error: BaseException) -> None:
        super().__init__(
            f"MLflow at {tracking_uri} is unavailable ({error}); check that the tracking "
            "server is running and reachable, or point EVOPLANE_MLFLOW_URI at one that is"
        )
        self.tracking_uri = tracking_uri


def _is_transport_failure(error: BaseException) -> bool:
    """True when a requests-level failure (refused, timeout, retries spent) caused `error`."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, requests.RequestException):
            return True
        if isinstance(current, MlflowException) and "API request to" in current.message:
            return True  # MLflow drops the cause of some transport errors
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _classified(tracking_uri: str, action: str, error: MlflowException) -> Exception:
    if _is_transport_failure(error) or error.error_code not in _BAD_INPUT_CODES:
        return TrackingUnavailable(tracking_uri, error)
    return ValueError(f"MLflow refused {action}: {error.message}")


def mlflow_call(method: _Method) -> _Method:
    """Turn MLflow errors into TrackingUnavailable (retry) or ValueError (fix the input)."""

    @functools.wraps(method)
    def wrapper(tracker: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(tracker, *args, **kwargs)
        except MlflowException as error:
            raise _classified(tracker.tracking_uri, method.__name__, error) from error
        except requests.RequestException as error:
            raise TrackingUnavailable(tracker.tracking_uri, error) from error

    return cast(_Method, wrapper)


def error_code(error: MlflowException) -> str:
    return str(error.error_code)
