"""Audit 53h: a store file damaged past the pages its opening reads (a copy torn by a
checkpoint running while it was taken, a bad disk block) is refused naming the file, and
only the shard whose rows sit on the damaged page stops.

Audit 51h names a file SQLite cannot read when the damage is met at the open (the probe,
the WAL switch, the schema, the upgrade). Damage further in is met by the first read that
reaches it: paging one actor's shard raised SQLite's bare "database disk image is
malformed", a DatabaseError that is neither a StoreError nor an OSError, so it ended the
night for every tenant (the other actors' hard expiries owed included) and `export`
exited 1 naming no file. A damaged page is simulated by zeroing one page that holds only
the second actor's rows (what a torn copy holds where a page was being written).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from memlife.model import MemoryRecord
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke

T0 = datetime(2026, 11, 1, tzinfo=UTC)
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _rec(actor: str, i: int) -> MemoryRecord:
    return MemoryRecord(id=f"{actor}-m{i}", actor_id=actor, namespace=f"/users/{actor}/facts",
                        memory_type="semantic", content=f"{actor.upper()}-MARK fact {i} " +
                        "x" * 1500, created_at=T0)  # fmt: skip


def _store(db: Path, damaged: bool) -> None:
    """u-a's 20 records, then u-b's 20 (later rowids: pages of their own); with ``damaged``,
    one page holding u-b's rows only is zeroed, the WAL folded first."""
    with SqliteStore(db) as store:
        store.put_many([_rec("u-a", i) for i in range(20)])
        store.put_many([_rec("u-b", i) for i in range(20)])
        store.checkpoint()
        size = store.connection.execute("PRAGMA page_size").fetchone()[0]
    if not damaged:
        return
    data = bytearray(db.read_bytes())
    pages = [data[p : p + size] for p in range(0, len(data), size)]
    only_b = [n for n, page in enumerate(pages) if b"U-B-MARK" in page and b"U-A-MARK" not in page]
    n = only_b[len(only_b) // 2]
    data[n * size : (n + 1) * size] = bytes(size)
    db.write_bytes(bytes(data))


def test_a_damaged_page_stops_only_its_shard(home: Path) -> None:
    _store(home / "memlife.db", damaged=True)
    night = run_local(RunConfig(dry_run=False, now=NOW)).as_json()
    assert night["status"] == "partial_failure"
    assert [(f["actor_id"], f["code"]) for f in night["failed_shards"]] == [("u-b", "STORE_ERROR")]
    assert night["records"] == 20 and night["shards"] == 1  # u-a's shard was planned


def test_export_of_a_damaged_store_exits_2_naming_the_file(home: Path, tmp_path: Path) -> None:
    _store(home / "memlife.db", damaged=True)
    out = tmp_path / "backup.jsonl"
    code, _, err = invoke("export", "-o", str(out))
    assert code == 2, err
    assert "memlife.db" in err and "damaged" in err and "u-b" in err, err
    assert not out.exists()  # no half backup left for an import to take as whole


def test_control_the_undamaged_store_plans_both_shards_and_exports(
    home: Path, tmp_path: Path
) -> None:
    _store(home / "memlife.db", damaged=False)
    night = run_local(RunConfig(dry_run=False, now=NOW)).as_json()
    assert night["status"] == "success" and night["records"] == 40 and night["shards"] == 2
    out = tmp_path / "backup.jsonl"
    code, _, err = invoke("export", "-o", str(out))
    assert code == 0, err
    assert len([json.loads(line) for line in out.read_text().splitlines()]) == 40
