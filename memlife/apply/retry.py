"""When a retryable failure comes back: exponential backoff with full jitter, capped at a day."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

RETRY_BASE = timedelta(minutes=5)
RETRY_CAP = timedelta(hours=24)
# our own generator: jitter never moves the global random state a host application seeds
_JITTER = random.Random()


def next_retry(attempts: int, now: datetime) -> datetime:
    delay = min(RETRY_CAP, RETRY_BASE * (1 << max(0, attempts - 1)))  # 2**(attempts-1)
    return now + delay * (0.5 + _JITTER.random() / 2)
