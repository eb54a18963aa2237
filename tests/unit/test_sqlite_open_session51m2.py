"""Mutation pass over audit 51h's refusal of files that are not memlife stores (audit 51m2).

Each test passes on the current code and fails under one hand mutant that the session's
tests let live: a store a DBA ran ``ANALYZE`` on (a table SQLite adds) refused as another
application's; a SQLite file holding no table yet refused; a lock held by another process
reported as "not a SQLite file ... restore the file from a backup"; a store damaged past
its first pages (found by the upgrade's read, not the probe) raised bare and unnamed.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

import memlife.stores.sqlite as sqlite_store
from memlife.errors import StoreError
from memlife.model import MemoryRecord
from memlife.sqlite_open import existing_tables
from memlife.stores.sqlite import STORE_VERSION, SqliteStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def rec(i: int) -> MemoryRecord:
    return MemoryRecord(id=f"m-{i}", actor_id="u-1", namespace="/users/u-1/facts",
                        memory_type="semantic", content=f"fact number {i} " * 20,
                        created_at=T0)  # fmt: skip


def test_a_store_with_tables_of_its_own_beside_memlifes_opens(tmp_path: Path) -> None:
    """Kills `not tables <= OWN_TABLES`: a store an operator ran ANALYZE on (sqlite_stat1)
    or added a view table to is still a memlife store; only a file with none of memlife's
    tables is another application's."""
    path = tmp_path / "memlife.db"
    with SqliteStore(path) as store:
        store.put_many([rec(1)])
    con = sqlite3.connect(path)
    con.execute("ANALYZE")
    con.execute("CREATE TABLE operator_notes (note TEXT)")
    con.commit()
    con.close()
    assert {"sqlite_stat1", "operator_notes"} <= set(existing_tables(path) or {})
    with SqliteStore(path) as store:
        assert store.count() == 1


def test_a_sqlite_file_with_no_table_yet_opens_as_a_new_store(tmp_path: Path) -> None:
    """Kills `tables is not None and ...`: a file SQLite wrote a header to but no table
    (`sqlite3 memlife.db 'PRAGMA user_version=0; VACUUM'` by a deploy step) is as new as an
    empty one: no other application's data is in it."""
    path = tmp_path / "placeholder.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x)")
    con.execute("DROP TABLE t")
    con.execute("VACUUM")
    con.close()
    assert path.stat().st_size > 0 and existing_tables(path) == {}
    with SqliteStore(path) as store:
        store.put_many([rec(1)])
        assert store.count() == 1


def test_a_lock_held_by_another_process_is_not_called_a_damaged_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills dropping `_not_a_store`'s OperationalError branch: a file another connection
    holds an exclusive lock on is busy, not damaged; "restore the file from a backup" is
    the wrong advice for a lock (an operator following it loses the night's writes)."""
    path = tmp_path / "journal-first.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE operations (operation_id TEXT PRIMARY KEY)")
    holder.execute("BEGIN EXCLUSIVE")
    # the probe's 30 s busy wait, cut short: the lock is held for the whole test
    monkeypatch.setattr(sqlite_store, "existing_tables",
                        lambda p: existing_tables(p, timeout=0.05))  # fmt: skip
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            SqliteStore(path).close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_store_damaged_past_its_first_pages_is_named_by_the_upgrade(tmp_path: Path) -> None:
    """Kills a bare re-raise in the schema/upgrade branch: the probe reads sqlite_master
    (page 1) fine; the upgrade's read of the records meets the damaged pages. The error
    still names the file, as the probe's does."""
    path = tmp_path / "old.db"
    with SqliteStore(path) as store:
        store.put_many([rec(i) for i in range(2000)])
        store.checkpoint()
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA user_version={STORE_VERSION - 1}")  # an older file: upgrade reads all
    size, pages = (con.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_size", "page_count"))
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    data = bytearray(path.read_bytes())
    for page in range(pages // 3, 2 * pages // 3):  # the middle third of the records' pages
        data[page * size : (page + 1) * size] = b"\xa5" * size
    path.write_bytes(bytes(data))
    assert existing_tables(path)  # the probe passes: only the upgrade meets the damage
    with pytest.raises(StoreError, match="old.db"):
        SqliteStore(path).close()
