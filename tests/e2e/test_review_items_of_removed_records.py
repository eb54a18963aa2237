"""Review items about records the nightly run itself removes are closed with the operation
that removed them: a hard-expired record's, and a merged duplicate's (session 22 review:
they stayed open for ever, their nights frozen, and the replacement opened the same
finding again beside them). A superseded record cannot be verified, and a record whose
every finding was answered counts as retained."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife.journal import open_journal
from memlife.model import MemoryRecord, Status
from memlife.pipeline import RunConfig, run_local
from memlife.review_queue import ReviewError, ReviewQueue, resolve
from memlife.stores.sqlite import SqliteStore

DAY1 = datetime(2026, 1, 5, 8, tzinfo=UTC)
NIGHT1 = DAY1 + timedelta(days=2)
NIGHT2 = NIGHT1 + timedelta(days=14)


def rec(rid: str, text: str, at: datetime, ns: str = "/team/notes", **kw: object) -> MemoryRecord:
    return MemoryRecord.model_validate({
        "id": rid, "actor_id": "u-7", "namespace": ns, "memory_type": "semantic",
        "content": text, "created_at": at, "source": "agent_inferred", "confidence": 0.6, **kw,
    })  # fmt: skip


def put(home: Path, *records: MemoryRecord) -> None:
    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many(list(records))
    finally:
        store.close()


def items(home: Path, *states: str) -> list:
    store = SqliteStore(home / "memlife.db")
    try:
        return ReviewQueue.for_store(store).list(states=states or ("open", "disputed"))
    finally:
        store.close()


@pytest.fixture()
def home(offline_home: Path) -> Path:
    put(offline_home,
        rec("exp", "Restart the build agent with systemctl.", DAY1, ns="/users/u-7/procedures",
            memory_type="procedural", expires_at=DAY1 + timedelta(days=5)),
        rec("dup", "The user keeps bees in the garden.", DAY1),
        rec("other", "The team standup is at 9:30.", DAY1))  # fmt: skip
    run_local(RunConfig(dry_run=False, now=NIGHT1))
    return offline_home


def test_items_of_records_the_night_deletes_or_supersedes_are_closed(home: Path) -> None:
    before = {(i.record_id, i.reason): i.item_id for i in items(home)}
    assert {"exp", "dup", "other"} <= {rid for rid, _ in before}
    put(home, rec("dup2", "The user keeps bees in the garden.", DAY1 + timedelta(days=3)))
    night = run_local(RunConfig(dry_run=False, now=NIGHT2))
    assert night.lifecycle["deleted"] == 1 and night.lifecycle["superseded"] == 2
    left = {i.record_id for i in items(home)}
    assert not left & {"exp", "dup", "dup2"}, left
    closed = [i for i in items(home, "resolved") if i.item_id in before.values()]
    assert (
        night.other["review_items_closed"]
        == len(closed)
        == sum(rid in ("exp", "dup") for rid, _ in before)
    )
    store = SqliteStore(home / "memlife.db")
    try:
        ops = {o.operation_id: o for o in open_journal(store).by_run(night.run_id)}
    finally:
        store.close()
    for item in closed:  # each closed by the operation that removed its record
        op = ops[item.operation_id]  # type: ignore[index]
        assert op.record_id == item.record_id
        assert item.decision == {"exp": "deleted", "dup": "superseded"}[item.record_id]
        assert item.reviewer == f"memlife:{night.run_id}"
    # the next night neither reopens them nor opens the finding twice
    again = run_local(RunConfig(dry_run=False, now=NIGHT2 + timedelta(days=1)))
    assert again.other.get("review_items_closed", 0) == 0
    reasons = [(i.record_id, i.reason) for i in items(home)]
    assert len(reasons) == len(set(reasons)) and not {r for r, _ in reasons} & {"exp", "dup"}


def test_a_superseded_record_cannot_be_verified(home: Path) -> None:
    iid = next(i.item_id for i in items(home) if i.record_id == "dup")
    store = SqliteStore(home / "memlife.db")
    try:
        dup = store.get("dup")
        assert dup is not None
        store.set_status(["dup"], Status.superseded, replaced_by="other")
        with pytest.raises(ReviewError, match="is superseded, not active; verify is refused"):
            resolve(store, iid, "verify", "ana@example.com", receipts=f"file://{home}/r")
        after = store.get("dup")
        assert after is not None and after.last_verified_at == dup.last_verified_at
    finally:
        store.close()


def test_a_record_whose_every_finding_was_answered_is_counted_retained(home: Path) -> None:
    """Not left for review, and not lost from the outcomes either: the night's outcomes sum
    to the records it processed (session 22 review: such a record was counted nowhere)."""
    store = SqliteStore(home / "memlife.db")
    try:
        for item in items(home):
            if item.record_id == "other":
                resolve(store, item.item_id, "keep", "ana@example.com", receipts=f"file://{home}/r")
    finally:
        store.close()
    night = run_local(RunConfig(dry_run=False, now=NIGHT1 + timedelta(days=1)))
    life = night.lifecycle
    assert night.other["review_answered"] == 1
    outcomes = ("retained", "held", "reviewed", "deleted", "superseded")
    assert life["processed"] == sum(life[k] for k in outcomes) == 3
    assert life["retained"] >= 1 and life["reviewed"] == 2
