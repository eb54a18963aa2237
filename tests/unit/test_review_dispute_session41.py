"""A record disputed in one review item is not deleted through another (session 41).

A record can carry several items (one per reason: MISSING_OWNER, STALE_VERIFICATION...).
README: "dispute (the record is never deleted until the dispute is resolved)". A reviewer
deleting it through its other item deleted it anyway: the delete checked disputes only
among the records that would go with it, never the record itself (found by the review
queue's stateful machine's author, forty-first audit d)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from memlife.plan import Reason
from memlife.review_queue import ReviewError, ReviewQueue, item_id, resolve
from memlife.stores.sqlite import SqliteStore
from tests.unit.test_guards_session35 import NS, POLICY, T0, finding, night, rec, store

__all__ = ["store"]  # the SQLite store fixture


def test_a_record_disputed_in_one_item_is_not_deleted_through_another(
    store: SqliteStore, home: Path
) -> None:
    """Attacks the record's own dispute check in ``review_queue/resolving.py::_followers``:
    the delete through the second item is refused before anything is written (the record
    stays, the item stays open); resolving the disputed item itself with delete ends the
    dispute and deletes it."""
    r = rec("m-1")
    store.put_many([r])
    night(store, "night-1", T0, finding(r, Reason.MISSING_OWNER),
          finding(r, Reason.STALE_VERIFICATION))  # fmt: skip
    disputed = item_id("m-1", "MISSING_OWNER", "u-1", NS)
    other = item_id("m-1", "STALE_VERIFICATION", "u-1", NS)
    receipts = f"file://{home}/receipts"
    resolve(store, disputed, "dispute", "ana@example.com", policy=POLICY,
            now=T0 + timedelta(hours=1), receipts=receipts)  # fmt: skip
    with pytest.raises(ReviewError, match="disputed"):
        resolve(store, other, "delete", "eve@example.com", policy=POLICY,
                now=T0 + timedelta(hours=2), receipts=receipts)  # fmt: skip
    assert store.get("m-1") is not None
    queue = ReviewQueue.for_store(store)
    item = queue.get(other)
    assert item is not None and item.state == "open"
    # the dispute's own item may end it: a delete decided there is the dispute resolved
    resolve(store, disputed, "delete", "ana@example.com", policy=POLICY,
            now=T0 + timedelta(hours=3), receipts=receipts)  # fmt: skip
    assert store.get("m-1") is None
