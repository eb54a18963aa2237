"""Audit 51b: a delete journaled before a dispute was carried out after it.

The planner turns a delete of a disputed record into retain + DISPUTED: a disputed record is
never deleted until a person resolves the dispute. The dispute lives in the review queue,
not on the record, and the delete applier re-checked only the record (hold, scope, text,
deadline). So a night killed after journaling a hard-expired record's delete (or one whose
delete failed retryably), then a reviewer's dispute of that record's item, then the rerun
(or the next night's retry queue): the journaled delete was carried out and the disputed
record was gone. Control: without the dispute the rerun deletes it, as it should.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from memlife.faults import InjectedFault, inject
from memlife.pipeline import RunConfig, run_local
from memlife.review_queue import ReviewQueue, resolve
from memlife.stores.sqlite import SqliteStore
from tests.e2e.test_review_items_of_removed_records import DAY1, NIGHT1, items, put, rec

NIGHT2 = NIGHT1 + timedelta(days=6)  # past the record's deadline


def _killed_after_journaling_the_delete(home: Path) -> str:
    """Night 1 opens the expiring record's items; night 2 journals its delete and dies.
    Returns the record's MISSING_OWNER item."""
    put(home, rec("exp", "Restart the build agent with systemctl.", DAY1,
                  ns="/users/u-7/procedures", memory_type="procedural",
                  expires_at=NIGHT1 + timedelta(days=5)))  # fmt: skip
    run_local(RunConfig(dry_run=False, now=NIGHT1))
    (iid,) = [i.item_id for i in items(home) if i.reason == "MISSING_OWNER"]
    with inject("after_journal_write"), pytest.raises(InjectedFault):
        run_local(RunConfig(dry_run=False, now=NIGHT2))
    return iid


def test_a_delete_journaled_before_a_dispute_is_not_carried_out(offline_home: Path) -> None:
    iid = _killed_after_journaling_the_delete(offline_home)
    store = SqliteStore(offline_home / "memlife.db")
    try:
        resolve(store, iid, "dispute", "ana@example.com", receipts=f"file://{offline_home}/r")
    finally:
        store.close()
    run_local(RunConfig(dry_run=False, now=NIGHT2))  # the rerun
    store = SqliteStore(offline_home / "memlife.db")
    try:
        assert store.get("exp") is not None, "the disputed record was deleted"
        item = ReviewQueue.for_store(store).get(iid)
        assert item is not None and item.state == "disputed"
    finally:
        store.close()


def test_control_the_rerun_deletes_an_undisputed_expired_record(offline_home: Path) -> None:
    _killed_after_journaling_the_delete(offline_home)
    night = run_local(RunConfig(dry_run=False, now=NIGHT2))
    assert night.lifecycle["deleted"] == 1
    store = SqliteStore(offline_home / "memlife.db")
    try:
        assert store.get("exp") is None
    finally:
        store.close()
