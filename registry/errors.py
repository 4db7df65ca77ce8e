"""Errors the registry raises, phrased for the person who will read them."""

from __future__ import annotations

__all__ = ["AlreadyExistsError", "InvalidRecordError", "NotFoundError", "RegistryError"]


class RegistryError(Exception):
    """Base of the registry's own errors."""


class NotFoundError(RegistryError):
    """No such record, or not visible to the tenant asking (the two are indistinguishable)."""

    def __init__(self, what: str, key: object) -> None:
        super().__init__(f"{what} {key!s} not found")
        self.what, self.key = what, key


class AlreadyExistsError(RegistryError):
    def __init__(self, what: str, key: object) -> None:
        super().__init__(f"{what} {key!s} already exists")
        self.what, self.key = what, key


class InvalidRecordError(RegistryError, ValueError):
    """A write that would break a registry rule (wrong tenant, bad alias, ...)."""
