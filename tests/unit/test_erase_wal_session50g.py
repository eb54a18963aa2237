"""Audit 50g (session 50): docs/evaluation.md's remedy for a busy WAL, followed as written.

"If another connection holds the WAL open, `compaction.wal_busy` is non-zero: run `memlife
erase --pending --yes` again once it is closed." That call compacted only when it erased,
rebuilt or resumed something: after a finished erasure it found nothing to do, ran no
VACUUM and no truncating checkpoint, and with the agent's idle connection still open the
erased text stayed in `memlife.db` (README: "neither `memlife.db` nor `memlife.db-wal` ...
holds the erased bytes").
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.support.cli import invoke

CANARY = "Card on file ends in 4821, canary QZX-50g."


def _store(home: Path, tmp_path: Path) -> Path:
    rows = [("m-1", CANARY), ("m-2", "Likes green tea.")]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(
        json.dumps({"id": rid, "actor_id": "u1", "namespace": "/users/u1/facts", "content": text,
                    "memory_type": "semantic", "created_at": "2026-01-02T10:00:00Z"}) + "\n"
        for rid, text in rows
    ))  # fmt: skip
    code, _, err = invoke("import", str(path))
    assert code == 0, err
    return home / "memlife.db"


def _holds_canary(db: Path) -> list[str]:
    files = [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]
    return [f.name for f in files if f.exists() and CANARY.encode() in f.read_bytes()]


def _erase(*args: str) -> dict[str, object]:
    code, out, err = invoke("erase", *args, "--yes", "--json")
    assert code == 0, err
    result: dict[str, object] = json.loads(out)
    return result


def test_the_documented_rerun_clears_what_a_busy_wal_kept(home: Path, tmp_path: Path) -> None:
    db = _store(home, tmp_path)
    agent = sqlite3.connect(db)  # an agent's process: its connection stays open, idle
    agent.execute("SELECT count(*) FROM records").fetchone()
    reader = sqlite3.connect(db)  # a read in progress while the erasure compacts
    reader.execute("BEGIN")
    reader.execute("SELECT content FROM records").fetchall()
    try:
        first = _erase("--actor", "u1", "--id", "m-1")
        assert first["compaction"] == {"vacuumed": True, "wal_busy": 1}
        reader.rollback()
        reader.close()  # "once it is closed"
        again = _erase("--pending")  # the documented remedy
        assert again.get("compaction") == {"vacuumed": True, "wal_busy": 0}
        assert _holds_canary(db) == []
    finally:
        agent.close()


def test_an_erase_no_other_connection_reads_during_leaves_no_byte(
    home: Path, tmp_path: Path
) -> None:
    """Control: the erasure's own compaction, with only an idle connection open."""
    db = _store(home, tmp_path)
    agent = sqlite3.connect(db)
    agent.execute("SELECT count(*) FROM records").fetchone()
    try:
        result = _erase("--actor", "u1", "--id", "m-1")
        assert result["compaction"] == {"vacuumed": True, "wal_busy": 0}
        assert _holds_canary(db) == []
    finally:
        agent.close()
