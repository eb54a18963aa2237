"""A stored time without a zone is read as UTC, as memlife always meant it.

Audit 49h. A record's times carry a zone (``AwareDatetime``; import refuses a line without
one). A row written by another tool or by hand (``sqlite3``'s ``datetime('now')`` writes
none) was read back as it was: the record held a naive time the model forbids. Then
``memlife export`` wrote lines its own ``import`` refuses (a store moved that way lost
those records, a legal hold among them, with exit 0), and the apply night ended for every
tenant with "TypeError: can't compare offset-naive and offset-aware datetimes", naming
nothing, its hard-expiry obligations not met. Audit 49h first refused such a row as
damaged; but memlife itself wrote naive times before session 26, whose rule is to read them
as UTC (tests/e2e/test_online_session26.py), so the store reads them so: every reader gets
a zoned time, export writes lines import takes, and the night compares like with like.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlife.cli import app
from memlife.model import MemoryRecord
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore

NOW = datetime(2026, 11, 1, tzinfo=UTC)
TIMES = ("created_at", "last_accessed_at", "last_verified_at", "expires_at", "status_changed_at")


def rec(rid: str, actor: str = "u-1", **kw: object) -> MemoryRecord:
    return MemoryRecord.model_validate({
        "id": rid, "actor_id": actor, "namespace": f"/users/{actor}/episodes",
        "memory_type": "episodic", "content": f"Asked about the invoice {rid}.",
        "owner": "team-a", "created_at": NOW - timedelta(days=40), **kw,
    })  # fmt: skip


def strip_zone(db: Path, rid: str, column: str) -> None:
    """What another tool writes: the same instant, its zone left out."""
    con = sqlite3.connect(db)
    con.execute(f"UPDATE records SET {column}=replace({column}, '+00:00', '') WHERE id=?", (rid,))
    con.commit()
    (value,) = con.execute(f"SELECT {column} FROM records WHERE id=?", (rid,)).fetchone()
    con.close()
    assert datetime.fromisoformat(value).tzinfo is None, value


def every_time(rid: str) -> MemoryRecord:
    at = NOW - timedelta(days=3)
    return rec(rid, last_accessed_at=at, last_verified_at=at, expires_at=NOW + timedelta(days=9),
               status_changed_at=at)  # fmt: skip


@pytest.mark.parametrize("column", TIMES)
def test_a_time_without_a_zone_is_read_as_utc(tmp_path: Path, column: str) -> None:
    db = tmp_path / "m.db"
    with SqliteStore(db) as store:
        store.put_many([every_time("m-1"), every_time("m-2")])
        want = getattr(store.get("m-1"), column)
    strip_zone(db, "m-1", column)
    with SqliteStore(db) as store:
        got = getattr(store.get("m-1"), column)
        assert got == want and got.tzinfo is not None
        assert {r.id for r in store.iter_all()} == {"m-1", "m-2"}


def test_control_a_time_with_any_zone_reads(tmp_path: Path) -> None:
    """Control: a zone other than UTC is a zone; it reads as the same instant."""
    db = tmp_path / "m.db"
    with SqliteStore(db) as store:
        store.put_many([every_time("m-1")])
        store.connection.execute(
            "UPDATE records SET created_at=? WHERE id='m-1'",
            ((NOW - timedelta(days=40)).astimezone().isoformat(),),
        )
        got = store.get("m-1")
        assert got is not None and got.created_at == NOW - timedelta(days=40)


def test_export_never_writes_a_line_its_own_import_refuses(home: Path) -> None:
    db = home / "memlife.db"
    home.mkdir(parents=True)
    with SqliteStore(db) as store:
        store.put_many([rec("m-held", retention_class="legal_hold"), rec("m-2")])
    strip_zone(db, "m-held", "created_at")
    out = home.parent / "moved.jsonl"
    res = CliRunner().invoke(app, ["export", "-o", str(out)])
    assert res.exit_code == 0, res.output
    moved = home.parent / "moved.db"
    res = CliRunner().invoke(app, ["import", str(out), "--store", f"sqlite:///{moved}"])
    assert res.exit_code == 0, res.output  # every line taken, the hold among them
    with SqliteStore(moved) as store:
        held = store.get("m-held")
        assert held is not None and held.held and held.created_at == NOW - timedelta(days=40)


def test_a_night_over_a_time_without_a_zone_meets_every_obligation(home: Path) -> None:
    home.mkdir(parents=True)
    db = home / "memlife.db"
    gone = NOW - timedelta(days=1)
    with SqliteStore(db) as store:
        store.put_many([rec("m-1", expires_at=gone), rec("m-2", "u-2", expires_at=gone)])
    strip_zone(db, "m-1", "expires_at")

    summary = run_local(RunConfig(dry_run=False, now=NOW))

    assert summary.status == "success" and not summary.failed_shards
    with SqliteStore(db) as store:
        assert store.count() == 0  # both hard expiries met


def test_control_the_same_night_with_zones_deletes_both(home: Path) -> None:
    home.mkdir(parents=True)
    db = home / "memlife.db"
    gone = NOW - timedelta(days=1)
    with SqliteStore(db) as store:
        store.put_many([rec("m-1", expires_at=gone), rec("m-2", "u-2", expires_at=gone)])
    summary = run_local(RunConfig(dry_run=False, now=NOW))
    assert summary.status == "success" and not summary.failed_shards
    with SqliteStore(db) as store:
        assert store.count() == 0
