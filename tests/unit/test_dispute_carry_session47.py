"""Session 47 (audit 47m): the disputes `import --erasures` carries (memlife/dispute_export.py) attacked
with a hand-edited erasures file, on each review backend."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from memlife.dispute_export import carry_disputes
from memlife.review_queue import ReviewQueue, item_id
from tests.unit.test_guards_session35 import T0, finding, rec
from tests.unit.test_roundtrip_session47 import _dispute, backend  # noqa: F401 (fixture)

OTHER_NS = "/users/u-2/facts"


# fmt: skip
def test_a_dispute_line_never_disputes_another_records_item(backend: Any) -> None:  # noqa: F811
    """The new store's night opened an item on u-2's m-2 (no owner). The adversary adds a
    dispute line naming u-1's own m-1 (which exists, so the scope check passes) but the
    item id of u-2's finding. Must hold: u-2's item stays open and m-2 undisputed (a
    dispute keeps a record from every delete); the line disputes nothing but m-1."""
    backend.put_many([rec("m-1"), rec("m-2", actor_id="u-2", namespace=OTHER_NS)])
    m1, m2 = backend.get("m-1"), backend.get("m-2")
    queue = ReviewQueue.for_store(backend)
    queue.queue([finding(m2)], budget=10, run_id="run-n", at=T0)
    (theirs,) = queue.list()
    assert theirs.item_id == item_id("m-2", "MISSING_OWNER", "u-2", OTHER_NS)
    carry_disputes(backend, [_dispute(m1, item_id=theirs.item_id)], now=T0 + timedelta(days=1))
    assert queue.disputed("u-2", OTHER_NS) == frozenset()
    assert queue.get(theirs.item_id).state == "open"
