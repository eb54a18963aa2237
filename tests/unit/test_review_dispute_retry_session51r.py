"""Audit 51r: the delete applier's dispute check (audit 51b) excepted every REVIEW_DELETE.

51b made the delete applier keep a record disputed now, except a reviewer's own delete
(``REVIEW_DELETE``), "the answer that ends its item's dispute". That exception held for
any run carrying the operation, not only the resolve that checked the disputes under its
lease. A reviewer's delete the service failed retryably (a 500, a throttle) waits in the
journal for the retry queue; a second reviewer then disputes the item (the record is
still there: a dispute is allowed and says "never delete until resolved"); the next night's
retry queue carried out the first reviewer's delete anyway, and the night closed the
dispute ``resolved``/``delete`` by memlife: a dispute ended with no person answering it,
the record gone. Control: without the dispute the retry queue finishes the delete.

The fake AgentCore (real boto3 over HTTP, moto DynamoDB sidecar) fails the delete; the
review queue and journal are the home's, as in production without MEMLIFE_STATE.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from memlife.journal import OpState
from memlife.model import MemoryRecord, MemoryType, Source
from memlife.review_queue import ReviewQueue, resolve
from tests.e2e.test_agentcore_nightly import ac, apply, harness, home, journal, present  # noqa: F401
from tests.fakes.agentcore import bulk_load
from tests.support.lifecycle import ANCHOR, CUTOFF

RID = "m-rv-0001"


def _record() -> MemoryRecord:
    return MemoryRecord(
        id=RID, actor_id="u-rv", namespace="/team/notes",
        memory_type=MemoryType.semantic, content="Prefers the aisle seat on long flights.",
        owner=None, source=Source.agent_inferred, confidence=0.3,
        created_at=ANCHOR - timedelta(days=200),
    )  # fmt: skip


def _delete_failed_retryably(env: dict[str, Any]) -> str:
    """Night 1 opens the record's MISSING_OWNER item; a reviewer's delete of it is failed
    by the service (500): the operation waits for the retry queue. Returns the item id."""
    store, fake = env["store"], env["fake"]
    bulk_load(store, fake, [_record()])
    apply(env)
    queue = ReviewQueue.for_store(store)
    (iid,) = [i.item_id for i in queue.list() if i.record_id == RID and i.reason == "MISSING_OWNER"]
    fake.fail_next_deletes([RID], 500)
    resolve(store, iid, "delete", "ana@example.com", receipts=env["sink"],
            now=CUTOFF + timedelta(hours=1))  # fmt: skip
    (op,) = [o for o in journal(env).for_record(RID) if "REVIEW_DELETE" in o.reasons]
    assert op.state is OpState.FAILED and op.next_retry_at is not None
    assert present(fake, RID)
    return iid


def test_a_dispute_after_a_failed_review_delete_keeps_the_record(ac: dict) -> None:  # noqa: F811
    iid = _delete_failed_retryably(ac)
    store = ac["store"]
    resolve(store, iid, "dispute", "ben@example.com", receipts=ac["sink"],
            now=CUTOFF + timedelta(hours=2))  # fmt: skip
    assert ReviewQueue.for_store(store).get(iid).state == "disputed"  # type: ignore[union-attr]
    apply(ac, now=CUTOFF + timedelta(days=1))  # the next night: its retry queue runs first
    assert present(ac["fake"], RID), "the disputed record was deleted by the retry queue"
    item = ReviewQueue.for_store(store).get(iid)
    assert item is not None and item.state == "disputed", (item.state, item.reviewer)


def test_control_without_a_dispute_the_retry_queue_finishes_the_delete(ac: dict) -> None:  # noqa: F811
    _delete_failed_retryably(ac)
    night = apply(ac, now=CUTOFF + timedelta(days=1))
    assert not present(ac["fake"], RID)
    assert night.other.get("retry_queue_deleted") == 1, night.other
