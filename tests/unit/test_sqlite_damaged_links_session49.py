"""A damaged provenance read through the store's link lookups stops its shard, naming it.

Audit 49h. Planning reads each candidate's hold and replacement links without building the
record (``SqliteStore.links_many``, memlife/pinned.py), and the orphan walk finds what
points to a record through ``json_extract`` (``superseded_pointing_to``). A superseded row
whose provenance is not JSON (a hand edit, a damaged page) made the first raise a bare
JSONDecodeError and the second SQLite's "malformed JSON": ``corrupt_row`` checks the view
columns only, found nothing, so the error propagated and the apply night ended for every
tenant, naming nothing, its hard expiries not done. Session 20 made a damaged provenance a
``CorruptRecordError`` for whole-record reads only.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife.errors import CorruptRecordError
from memlife.model import MemoryRecord
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore

NOW = datetime(2026, 11, 1, tzinfo=UTC)
DAMAGED = ("{not json", "[1, 2]", '{"replaced_by": "R", "supersedes": 7}')


def rec(rid: str, actor: str = "u-1", **kw: object) -> MemoryRecord:
    return MemoryRecord.model_validate({
        "id": rid, "actor_id": actor, "namespace": f"/users/{actor}/episodes",
        "memory_type": "episodic", "content": f"Asked about the invoice {rid}.",
        "owner": "team-a", "created_at": NOW - timedelta(days=40), **kw,
    })  # fmt: skip


def store_with(db: Path, damaged: str | None) -> None:
    gone, later = NOW - timedelta(days=1), NOW + timedelta(days=30)
    with SqliteStore(db) as store:
        store.put_many([
            rec("m-1", expires_at=gone), rec("m-2", "u-2", expires_at=gone),
            rec("R", expires_at=later),
            rec("S", status="superseded", provenance={"replaced_by": "R"},
                status_changed_at=NOW - timedelta(days=2)),
        ])  # fmt: skip
        if damaged is not None:
            store.connection.execute("UPDATE records SET provenance=? WHERE id='S'", (damaged,))


def test_a_damaged_provenance_stops_its_shard_and_the_night_goes_on(home: Path) -> None:
    home.mkdir(parents=True)
    db = home / "memlife.db"
    store_with(db, "{not json")

    summary = run_local(RunConfig(dry_run=False, now=NOW))

    assert summary.status == "partial_failure"
    (failed,) = summary.failed_shards
    assert (failed["code"], failed["record_id"], failed["field"]) == (
        "CORRUPT_RECORD", "S", "provenance",
    ), failed  # fmt: skip
    with SqliteStore(db) as store:
        assert store.get("m-2") is None  # the other tenant's hard expiry went ahead


def test_control_the_same_night_undamaged_deletes_every_expired_record(home: Path) -> None:
    home.mkdir(parents=True)
    db = home / "memlife.db"
    store_with(db, None)
    summary = run_local(RunConfig(dry_run=False, now=NOW))
    assert summary.status == "success" and not summary.failed_shards
    with SqliteStore(db) as store:
        assert store.get("m-1") is None and store.get("m-2") is None


@pytest.mark.parametrize("damaged", DAMAGED)
def test_the_link_lookups_name_the_damaged_record_and_field(tmp_path: Path, damaged: str) -> None:
    db = tmp_path / "m.db"
    store_with(db, damaged)
    with SqliteStore(db) as store:
        with pytest.raises(CorruptRecordError) as caught:
            store.links_many(["R", "S"])
        assert (caught.value.record_id, caught.value.field) == ("S", "provenance")
        if damaged == "{not json":  # json_extract reads JSON of any shape
            with pytest.raises(CorruptRecordError) as caught:
                store.superseded_pointing_to("u-1", ["R"])
            assert (caught.value.record_id, caught.value.field) == ("S", "provenance")
        assert damaged not in str(caught.value)


def test_control_the_link_lookups_read_an_undamaged_store(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    store_with(db, None)
    with SqliteStore(db) as store:
        links = store.links_many(["R", "S"])
        assert links["S"].replaced_by == "R" and links["R"].replaced_by is None
        assert store.superseded_pointing_to("u-1", ["R"]) == {"S": "R"}
