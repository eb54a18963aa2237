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

from memlife.run_types import BatchOutcome, Shard
from memlife.settings import settings


def failed_outcome(shards: Sequence[Shard], error: BaseException | str) -> BatchOutcome:
    """Every shard of a batch that failed as a whole: recorded by name and error type only."""
    code = error if isinstance(error, str) else getattr(error, "code", None) or type(error).__name__
    return BatchOutcome(failed_shards=[s.failed(str(code)) for s in shards])


_THROTTLE_CODES = {
    "ThrottledException",
    "ThrottlingException",
    "Throttling",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "ThrottlingError",  # a DynamoDB transaction's cancellation reason
    "ProvisionedThroughputExceeded",  # the same on a provisioned table or index
    "TransactionConflict",  # another transaction on one of its items: try again later
    "RequestLimitExceeded",
    "SlowDown",
    "RateLimitError",
    "rate_limit_error",
    "overloaded_error",
    "429",
    "529",
    "THROTTLED",  # memlife's own code (memlife.foreign_errors keeps it for a library's)
}


def is_throttling(exc: BaseException | None) -> bool:
    """True for rate limiting / overload (worth a retry with backoff), False otherwise."""
    seen = 0
    while exc is not None and seen < 5:
        names = {type(exc).__name__, str(getattr(exc, "code", "") or "")}
        status = getattr(exc, "status_code", None)
        if status is not None:
            names.add(str(status))
        response = getattr(exc, "response", None)
        if isinstance(response, dict):  # botocore ClientError
            names.add(str(response.get("Error", {}).get("Code", "")))
            names |= {str(r.get("Code")) for r in response.get("CancellationReasons") or []}
        if names & _THROTTLE_CODES:
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


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
            if attempt >= s.task_retries:
                return failed_outcome(shards, "THROTTLED")
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
