"""memlife.sql_in: long key lists asked in chunks under SQLite's parameter cap."""

from __future__ import annotations

import sqlite3

from memlife.model import MemoryRecord
from memlife.sql_in import CHUNK, in_chunks, marks
from memlife.stores.sqlite import SqliteStore
from tests.support.records import good


def test_every_key_is_asked_once_in_chunks_under_the_cap() -> None:
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    keys = [f"k{i}" for i in range(2 * CHUNK + 201)]
    con.executemany("INSERT INTO t VALUES (?)", [(k,) for k in keys[::2]])
    chunks = list(in_chunks(keys))
    assert [len(c) for _, c in chunks] == [CHUNK, CHUNK, 201]
    assert all(qs.count("?") == len(c) <= 999 for qs, c in chunks)
    found = {
        row[0] for qs, c in chunks for row in con.execute(f"SELECT k FROM t WHERE k IN ({qs})", c)
    }
    assert found == set(keys[::2])
    assert list(in_chunks([])) == [] and marks(3) == "?, ?, ?"


def test_store_get_many_past_one_chunk(tmp_path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    records = [MemoryRecord.model_validate(good(f"r{i:04d}")) for i in range(CHUNK + 37)]
    store.put_many(records)
    ids = [r.id for r in records] + ["missing"]
    got = store.get_many(ids)
    assert set(got) == {r.id for r in records}
    assert all(got[r.id].content == r.content for r in records)
