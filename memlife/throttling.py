"""Throttling: which errors deserve a retry with backoff, and the local engine's retries.

Under Prefect a shard batch that was throttled is retried by its task
(flows/limits.retrying: MEMLIFE_TASK_RETRIES times, backoff MEMLIFE_RETRY_BACKOFF_SECONDS
doubling, jitter MEMLIFE_RETRY_JITTER); a batch still failing becomes failed-shard
entries and the run goes on (``partial_failure``). ``retried`` gives the local engine
(`memlife run --engine local`, the default on one machine) the same: before it, a store or
state table throttled past botocore's own attempts failed the whole run.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence

from memlife.apply import carry
from memlife.apply.tally import Tally
from memlife.errors import is_throttling as is_throttling  # lives there: light to import
from memlife.run_types import BatchOutcome, Shard
from memlife.settings import settings


def failed_outcome(
    shards: Sequence[Shard], error: BaseException | str, tally: Tally | None = None
) -> BatchOutcome:
    """Every shard of a batch that failed as a whole: recorded by name and error type only.
    ``tally``: what its throttled attempts recorded (model spend, verdicts: apply/carry.py),
    else what the attempts that ended in ``error`` left."""
    code = error if isinstance(error, str) else getattr(error, "code", None) or type(error).__name__
    left = tally if tally is not None else carry.taken_by(error)
    return BatchOutcome(failed_shards=[s.failed(str(code)) for s in shards], tally=left or Tally())


def retried(
    run: Callable[[], BatchOutcome],
    shards: Sequence[Shard],
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> BatchOutcome:
    """``run`` (one shard batch), retried while it is throttled, as a Prefect task would be;
    still throttled after the last retry, its shards are failed-shard entries (THROTTLED).
    Any other error propagates: a bug is not retried."""
    s = settings()
    jitter = random.Random()  # its own stream: memlife never moves the global one
    delays = backoff_delays(s.task_retries, s.retry_backoff_seconds)
    attempt = 0
    while True:
        try:
            return run()
        except Exception as exc:
            if not is_throttling(exc):
                raise
            if attempt >= s.task_retries:  # its attempts' spend and verdicts stay counted
                return failed_outcome(shards, "THROTTLED", carry.taken_by(exc))
        jittered = delays[attempt] * (1 + jitter.uniform(-s.retry_jitter, s.retry_jitter))
        sleep(max(0.0, jittered))
        attempt += 1


MAX_RETRY_DELAY_SECONDS = 900.0  # one wait: a night's batch never sleeps for hours


def backoff_delays(retries: int, factor: float) -> list[float]:
    """The wait before each retry of a throttled batch: ``factor`` doubling (10, 20, 40 s),
    each capped at MAX_RETRY_DELAY_SECONDS; the Prefect tasks (flows/limits.retrying) and
    the local engine use the same list. Uncapped, MEMLIFE_TASK_RETRIES=10 with the largest
    factor (an hour) slept 21 days before its last try."""
    return [min(MAX_RETRY_DELAY_SECONDS, factor * 2.0**r) for r in range(retries)]
