"""How fast one endpoint is asked: a request-rate limiter and the server's ``Retry-After``, read safely.

Why apart from the client: both turn a number from a user or a server into pacing, and each is small enough to
read on its own.
"""

from __future__ import annotations

import email.utils
import time
from fractions import Fraction

from asyncio_throttle import Throttler

_MAX_RETRY_AFTER_S = 120.0


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After as seconds (delta-seconds or an HTTP date), capped so a hostile header cannot stall a run."""
    if not value:
        return None
    try:
        secs = float(value)
    except ValueError:
        try:
            dt = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        secs = dt.timestamp() - time.time()
    return max(0.0, min(secs, _MAX_RETRY_AFTER_S))


def throttler(rate: float | None) -> Throttler | None:
    """asyncio-throttle takes (count, period); express a float req/s rate as an exact small fraction."""
    if not rate or rate <= 0:
        return None
    frac = Fraction(rate).limit_denominator(1000)
    return Throttler(rate_limit=max(1, frac.numerator), period=float(frac.denominator))
