"""When a retryable failure comes back: exponential backoff with full jitter, capped at a day."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from memlife.model import days_after

RETRY_BASE = timedelta(minutes=5)
RETRY_CAP = timedelta(hours=24)
# our own generator: jitter never moves the global random state a host application seeds
_JITTER = random.Random()


# past this many doublings the delay is at the cap anyway (5 min x 2**9 > a day); without
# the bound a failure retried every night overflowed timedelta on its 40th attempt and
# wedged the retry queue for good
_MAX_DOUBLINGS = 16


def next_retry(attempts: int, now: datetime) -> datetime:
    doublings = min(max(0, attempts - 1), _MAX_DOUBLINGS)  # 2**(attempts-1), bounded
    delay = min(RETRY_CAP, RETRY_BASE * (1 << doublings))
    # a run whose cutoff is the calendar's last day (--allow-future-cutoff): its last
    # instant, not an OverflowError (audit 50f)
    return days_after(now, delay * (0.5 + _JITTER.random() / 2) / timedelta(days=1))
