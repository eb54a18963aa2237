"""What a reviewer saw: a token of the texts `review show` printed, checked again by
`review resolve --seen`."""

from __future__ import annotations

import hashlib
from typing import Any

from memlife.review_queue.base import ReviewItem


def seen_token(store: Any, item: ReviewItem) -> str:
    """A short token of the texts ``show`` printed (the record's and its pair's, as the
    store holds them now): ``review resolve --seen`` refuses when it no longer matches, so a
    decision never lands on a text a night renewed after the reviewer read it (audit 53b's
    Left). Hashes of hashes only; a record gone or another tenant's counts as none."""
    parts = [item.record_id, item.pair_id or "-"]
    for rid in (item.record_id, item.pair_id):
        r = store.get(rid) if rid else None
        mine = r is not None and (r.actor_id, r.namespace) == (item.actor_id, item.namespace)
        parts.append(r.sha256 if r is not None and mine else "-")
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:12]
