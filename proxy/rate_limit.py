"""Per-tenant request rate limits."""

from __future__ import annotations

import time

from proxy.errors import GatewayError

__all__ = ["RateLimit", "TokenBucket"]


class TokenBucket:
    """Per-tenant request rate limit: `rate` per second, bursts of two seconds' worth."""

    def __init__(self, rate: float) -> None:
        self.rate, self.capacity = rate, max(1.0, 2 * rate)
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, tenant: str) -> float | None:
        """None if allowed; else seconds until a request would be."""
        now = time.monotonic()
        tokens, last = self._buckets.get(tenant, (self.capacity, now))
        tokens = min(self.capacity, tokens + (now - last) * self.rate)
        if tokens < 1.0:
            self._buckets[tenant] = (tokens, now)
            return (1.0 - tokens) / self.rate
        self._buckets[tenant] = (tokens - 1.0, now)
        return None


class RateLimit:
    """The gateway's limit of `rate` requests per second per tenant (None: no limit)."""

    def __init__(self, rate: float | None) -> None:
        self.bucket = TokenBucket(rate) if rate else None

    def check(self, tenant: str) -> None:
        """Count a request of `tenant`'s; 429, with when to retry, past the limit."""
        if self.bucket is None:
            return
        wait = self.bucket.take(tenant)
        if wait is not None:
            raise GatewayError(
                429,
                f"Rate limit for tenant '{tenant}' reached; retry in {wait:.2f} s.",
                code="rate_limit_exceeded",
                headers={"Retry-After": str(max(1, round(wait)))},
            )
