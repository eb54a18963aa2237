"""DynamoDB batch calls hand back what they did not do (``UnprocessedItems``/``Keys``)
instead of failing: resent with a growing pause, as botocore retries a throttled call, and
after as many tries a throttling error (the run's THROTTLED path), not a loop for good."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from botocore.exceptions import ClientError

UNPROCESSED_TRIES = 8  # as botocore's max_attempts for the state and sidecar clients


def before_send(operation: str, tries: int) -> None:
    """Call before each send of one batch (``tries``: sends so far): pause before a resend,
    and refuse a ninth."""
    if tries >= UNPROCESSED_TRIES:
        raise ClientError(
            {
                "Error": {
                    "Code": "ProvisionedThroughputExceededException",
                    "Message": f"items still unprocessed after {tries} tries",
                }
            },
            operation,
        )
    if tries:
        time.sleep(min(1.0, 0.05 * 2**tries))


def responses(
    operation: str, send: Callable[..., dict[str, Any]], request: dict[str, Any], left: str
) -> Iterator[dict[str, Any]]:
    """Each response to ``request`` and to the resends of what it hands back under ``left``
    (``UnprocessedKeys`` / ``UnprocessedItems``), paused and bounded by ``before_send``."""
    tries = 0
    while request:
        before_send(operation, tries)
        tries += 1
        resp = send(RequestItems=request)
        yield resp
        request = resp.get(left) or {}
