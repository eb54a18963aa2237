"""A stored id that is not text, at a page's end, stops its shard naming the record's field.

Audit 51h. Another tool writing ids as bytes (``uuid.bytes``; the `id` column is TEXT
affinity, a BLOB stays a BLOB) made the row sort after every text id. Where such a row
ended a page, the page token was built from it: ``json.dumps`` raised a bare
``TypeError: Object of type bytes is not JSON serializable``. The night's search for the
unreadable row (`SqliteStore.corrupt_row`, pages of 1,000) hit the same boundary on a shard
of over a thousand rows and raised again from inside its handler: the whole night ended, for
every tenant, naming nothing; `memlife export` ended the same way.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlife.errors import CorruptRecordError
from memlife.model import MemoryRecord
from memlife.pipeline import RunConfig
from memlife.stores.sqlite import COLUMNS, SqliteStore, record_to_row

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CUTOFF = datetime(2026, 3, 1, tzinfo=UTC)
NS = "/users/u-b/facts"


def rec(i: int, actor: str = "u-b") -> MemoryRecord:
    return MemoryRecord(id=f"m-{actor}-{i:05d}", actor_id=actor,
                        namespace=f"/users/{actor}/facts", memory_type="semantic",
                        subject=f"s{i}", content=f"fact {i} of {actor}", owner="team",
                        created_at=T0)  # fmt: skip


def seed(store: SqliteStore, texts: int, blobs: int = 2) -> list[bytes]:
    """``texts`` records of u-b, then ``blobs`` rows whose id another tool wrote as bytes."""
    store.put_many([rec(i) for i in range(texts)])
    ids = [bytes([1, i]) for i in range(blobs)]
    insert = f"INSERT INTO records VALUES ({', '.join('?' * len(COLUMNS))})"
    for i, rid in enumerate(ids):
        row = list(record_to_row(rec(90000 + i)))
        row[0] = rid
        store.connection.execute(insert, row)
    return ids


def test_a_page_ending_on_a_bytes_id_names_the_field(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "m.db") as store:
        seed(store, 3)
        with pytest.raises(CorruptRecordError) as caught:
            store.page_views("u-b", NS, page_size=4)
        assert caught.value.field == "id"


def test_the_search_for_the_bad_row_finds_a_bytes_id_on_a_big_shard(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "m.db") as store:
        seed(store, 999)  # the search's first page of 1,000 ends on the first bytes id
        found = store.corrupt_row("u-b", NS)
        assert found is not None and found.field == "id"


def test_control_a_small_shard_with_a_bytes_id_is_found(tmp_path: Path) -> None:
    """Where no page ends on it, the search already found it (audit session 20's path)."""
    with SqliteStore(tmp_path / "m.db") as store:
        seed(store, 3)
        found = store.corrupt_row("u-b", NS)
        assert found is not None and found.field == "id"
        assert [v.id for v in store.page_views("u-b", NS, page_size=2)[0]] == [
            rec(0).id, rec(1).id,
        ]  # fmt: skip


def test_a_night_stops_only_the_shard_with_a_bytes_id(home: Path) -> None:
    from memlife.pipeline import run_local

    with SqliteStore(home / "memlife.db") as store:
        seed(store, 999)
        store.put_many([rec(i, "u-ok") for i in range(5)])
    summary = run_local(RunConfig(dry_run=True, now=CUTOFF))
    (failed,) = summary.failed_shards
    assert (failed["code"], failed["field"]) == ("CORRUPT_RECORD", "id")
    assert summary.records >= 5  # the other actor's shard was planned
    assert "\\u0001" not in json.dumps(summary.as_json())
