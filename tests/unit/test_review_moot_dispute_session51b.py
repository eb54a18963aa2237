"""Audit 51b: a night closed a person's dispute as "answered earlier".

A record a reviewer kept on v1 came to say v2 (asked again: a new item), and a reviewer
disputed that item: the record is never deleted until the dispute is resolved. When the
record went back to v1, the queue closed the v2 item as moot (``answered_earlier``, by
memlife) whatever its state, so the dispute was gone with no person resolving it, and the
record lost its protection (``ReviewQueue.disputed`` no longer names it). A dispute stands
over content changes (a night renews a disputed item and keeps it disputed); it now stands
here too. Control: an *open* item of the content the record left is still closed as moot.
SQLite and DynamoDB (moto, in process and over HTTP) alike.
"""

from __future__ import annotations

from datetime import timedelta

from memlife.plan import Decision
from memlife.review_queue import ReviewQueue
from tests.unit.test_review_state import NIGHT, _d, store  # noqa: F401 (its fixture, F811 below)


def _night(queue: ReviewQueue, sha: str, n: int) -> dict[str, int]:
    d: Decision = _d("m-2", 1.0)
    d.content_sha256 = sha
    return dict(queue.queue([d], budget=5, run_id=f"n{n}", at=NIGHT + timedelta(days=n)))


def _kept_then_changed(queue: ReviewQueue) -> str:
    """Kept on v1, then v2 found: returns the v2 item's id (open)."""
    _night(queue, "v1", 1)
    (first,) = queue.list()
    queue.close(first.item_id, state="resolved", decision="keep", reviewer="ana", at=NIGHT,
                operation_id="op-1")  # fmt: skip
    _night(queue, "v2", 2)
    (second,) = queue.list()
    assert second.item_id != first.item_id
    return second.item_id


def test_a_disputed_item_stands_when_the_record_returns_to_kept_content(store) -> None:  # noqa: F811
    queue = ReviewQueue.for_store(store)
    iid = _kept_then_changed(queue)
    queue.close(iid, state="disputed", decision="dispute", reviewer="bo", at=NIGHT,
                operation_id="op-2")  # fmt: skip
    assert queue.disputed("a", "/n") == {"m-2"}
    _night(queue, "v1", 3)
    item = queue.get(iid)
    assert item is not None and (item.state, item.reviewer) == ("disputed", "bo"), item
    assert queue.disputed("a", "/n") == {"m-2"}, "the record lost its dispute"


def test_control_an_open_item_of_content_the_record_left_is_closed(store) -> None:  # noqa: F811
    queue = ReviewQueue.for_store(store)
    iid = _kept_then_changed(queue)
    counts = _night(queue, "v1", 3)
    assert counts["review_moot_closed"] == 1
    item = queue.get(iid)
    assert item is not None and (item.state, item.decision) == ("resolved", "answered_earlier")
