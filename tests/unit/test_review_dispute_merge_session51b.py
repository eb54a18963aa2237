"""Audit 51b: a night's merge closed a person's dispute.

A disputed record is never deleted until a person resolves the dispute (README, review;
``plan.py``: a delete of a disputed record is a retain + DISPUTED). The dispute lives on
its review item. When the night merged the disputed record with a word-for-word
restatement (superseded by the replacement, not deleted), ``run_commit.close_removed``
closed every open *and disputed* item of the record as ``superseded`` by memlife: no person
resolved the dispute, and from then on nothing protected the record: superseded retention
deletes it (proposes it, where deletion is not enforced). A reviewer's own supersede
leaves a dispute standing (session 42a); the night's now does too. Control: an open
(undisputed) item of a merged record is still closed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife.pipeline import RunConfig, run_local
from memlife.review_queue import ReviewQueue, resolve
from memlife.stores.sqlite import SqliteStore
from tests.e2e.test_review_items_of_removed_records import DAY1, NIGHT1, NIGHT2, items, put, rec


@pytest.fixture()
def merged(offline_home: Path) -> tuple[Path, str]:
    """Night 1 opens the items of ``dup``; ``dup2`` restates it; returns the dup item."""
    put(offline_home, rec("dup", "The user keeps bees in the garden.", DAY1),
        rec("other", "The team standup is at 9:30.", DAY1))  # fmt: skip
    run_local(RunConfig(dry_run=False, now=NIGHT1))
    (iid,) = [i.item_id for i in items(offline_home) if i.record_id == "dup"]
    return offline_home, iid


def _dispute(home: Path, iid: str) -> None:
    store = SqliteStore(home / "memlife.db")
    try:
        resolve(store, iid, "dispute", "ana@example.com", receipts=f"file://{home}/r")
    finally:
        store.close()


def test_a_disputed_record_merged_by_the_night_keeps_its_dispute(merged: tuple[Path, str]) -> None:
    home, iid = merged
    _dispute(home, iid)
    put(home, rec("dup2", "The user keeps bees in the garden.", DAY1 + timedelta(days=3)))
    night = run_local(RunConfig(dry_run=False, now=NIGHT2))
    assert night.lifecycle["superseded"] == 2  # dup and dup2 into one replacement
    store = SqliteStore(home / "memlife.db")
    try:
        item = ReviewQueue.for_store(store).get(iid)
        assert item is not None
        assert (item.state, item.reviewer) == ("disputed", "ana@example.com"), item
    finally:
        store.close()
    # past the superseded retention (real time since the supersede): dup2 is due, and so
    # was dup once its dispute was closed (proposed: /team/notes does not enforce deletion)
    later = datetime.now(UTC) + timedelta(days=120)
    after = run_local(RunConfig(dry_run=False, now=later, allow_future_cutoff=True))
    assert after.other["proposed_deletions"] == 1, "the disputed record is due for deletion"


def test_control_an_open_item_of_a_merged_record_is_closed(merged: tuple[Path, str]) -> None:
    home, iid = merged
    put(home, rec("dup2", "The user keeps bees in the garden.", DAY1 + timedelta(days=3)))
    night = run_local(RunConfig(dry_run=False, now=NIGHT2))
    store = SqliteStore(home / "memlife.db")
    try:
        item = ReviewQueue.for_store(store).get(iid)
        assert item is not None and (item.state, item.decision) == ("resolved", "superseded")
        assert item.reviewer == f"memlife:{night.run_id}"
    finally:
        store.close()
