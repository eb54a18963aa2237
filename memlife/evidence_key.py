"""The content hash that evidence carries: keyed, so receipts never give content back.

Receipts, the run's Parquet and the operations dataset said which content an operation
acted on by the content's plain sha256. They are kept for years and read by people who
need not see memories, and a short memory is found again from its plain hash by guessing:
"Card on file ends in 4821." in 10,000 tries, a city or a diet in fewer. Evidence written
since session 29 carries ``hmac-sha256:`` + HMAC-SHA256(the store's run secret, sha256)
instead (``Journal.run_secret``, made once per store, never in the receipts). Whoever holds
the store ties it to a record (``receipts verify``); the receipts alone tell nothing.
Evidence written before holds the plain hash and is compared as it is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac

from memlife.journal.base import Operation

PREFIX = "hmac-sha256:"


def keyed(sha: str | None, secret: bytes) -> str | None:
    """The evidence form of a content hash (None stays None)."""
    if sha is None:
        return None
    return PREFIX + hmac.new(secret, sha.encode(), hashlib.sha256).hexdigest()


def for_evidence(op: Operation, secret: bytes) -> Operation:
    """``op`` as receipts, Parquet and the dataset show it: its content hash keyed."""
    return dataclasses.replace(op, content_sha256=keyed(op.content_sha256, secret))


def as_written(sha: str | None, written: object, secret: bytes) -> str | None:
    """``sha`` in the form the evidence value ``written`` has: keyed where it is keyed,
    plain in evidence from before keys (so old receipts verify as they did)."""
    if isinstance(written, str) and written.startswith(PREFIX):
        return keyed(sha, secret)
    return sha
