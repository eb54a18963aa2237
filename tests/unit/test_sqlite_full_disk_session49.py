"""A store file on a full disk is refused with the error that happened: the disk is full.

Audit 49h. SQLite rolls the whole transaction back itself when a statement finds the disk
full (SQLITE_FULL), and the store's transaction then ran its own ROLLBACK, which raised
"cannot rollback - no transaction is active" in place of the full disk: the operator of a
night, an import or a `remember` read that memlife had a transaction bug, not that the
disk was full. The journal and the review queue, in the same file, did the same. A full
disk is simulated with a small ``max_page_count`` on the store's own connection (the
limit is per connection); nothing of the refused write may be left behind.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlife.journal import OpKind
from memlife.journal.base import Operation
from memlife.journal.sqlite import SqliteJournal
from memlife.model import MemoryRecord, Status
from memlife.stores.sqlite import SqliteStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def rec(i: int, words: int = 50) -> MemoryRecord:
    return MemoryRecord(id=f"m-{i}", actor_id="u-1", namespace="/users/u-1/facts",
                        memory_type="semantic", content=f"fact{i} " * words,
                        created_at=T0)  # fmt: skip


def full(store: SqliteStore) -> None:
    """The disk has room for two more pages of this file."""
    pages = store.connection.execute("PRAGMA page_count").fetchone()[0]
    store.connection.execute(f"PRAGMA max_page_count={pages + 2}")


BIG = [rec(i, 2000) for i in range(1, 30)]  # ~400 kB: far more than two pages

WRITES: dict[str, Callable[[SqliteStore], object]] = {
    "put_many": lambda s: s.put_many(BIG),
    "insert_new": lambda s: s.insert_new(BIG),
    "put_replacement": lambda s: s.put_replacement(rec(99, 40000)),
    "add_tombstones": lambda s: s.add_tombstones(
        [("u-1", f"t-{i}" * 20, f"{i:064x}", f"{i:064x}") for i in range(3000)]
    ),
}


@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_full_disk_is_refused_as_a_full_disk_and_nothing_is_written(
    tmp_path: Path, write: str
) -> None:
    with SqliteStore(tmp_path / "m.db") as store:
        store.put_many([rec(0)])
        full(store)
        with pytest.raises(sqlite3.OperationalError) as caught:
            WRITES[write](store)
        assert caught.value.sqlite_errorname == "SQLITE_FULL", caught.value  # type: ignore[attr-defined]
        assert "full" in str(caught.value)
        assert not store.connection.in_transaction
        assert store.count() == 1 and store.tombstones() == []  # nothing half-written
        # room again: the store writes and commits as before
        store.connection.execute("PRAGMA max_page_count=1073741823")
        store.put_many([rec(7)])
    with SqliteStore(tmp_path / "m.db") as again:
        assert again.count() == 2 and again.get("m-7") is not None


def test_a_journal_write_on_a_full_disk_names_the_full_disk(tmp_path: Path) -> None:
    """The journal lives in the store's file: planning a night's operations on a full disk."""
    with SqliteStore(tmp_path / "m.db") as store:
        journal = SqliteJournal(store.connection, store.lock)
        full(store)
        ops = [Operation(operation_id=f"op-{i}", run_id="r-1", kind=OpKind.delete,
                         actor_id="u-1", namespace="/users/u-1/facts", record_id=f"m-{i}",
                         reasons=["EXPIRED"], policy_version="p-1", payload="x" * 4000)
               for i in range(200)]  # fmt: skip
        with pytest.raises(sqlite3.OperationalError) as caught:
            journal.plan(ops)
        assert "full" in str(caught.value)
        assert journal.get("op-0") is None


def test_control_a_write_that_fits_commits(tmp_path: Path) -> None:
    """Control: with the same limit, a write that fits goes through untouched."""
    with SqliteStore(tmp_path / "m.db") as store:
        store.put_many([rec(0)])
        store.connection.execute("PRAGMA max_page_count=100000")
        assert store.set_status(["m-0"], Status.quarantined).succeeded == ["m-0"]
        store.put_many([rec(1)])
    with SqliteStore(tmp_path / "m.db") as again:
        got = again.get("m-0")
        assert got is not None and got.status is Status.quarantined and again.count() == 2
