"""Several processes opening one new SQLite file at once (workers starting together)."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
from pathlib import Path

import pytest

from memlife.embed_cache import EmbeddingCache
from memlife.journal.sqlite import SqliteJournal
from memlife.sqlite_open import connect_wal
from memlife.stores.sqlite import SqliteStore

TRIALS, RACERS = 12, 4


def _open_all(folder: str, go: str, done: mp.Queue) -> None:  # type: ignore[type-arg]
    start = Path(go)
    while not start.exists():
        pass
    try:
        for opened in (
            SqliteStore(Path(folder) / "store.db"),
            EmbeddingCache(path=Path(folder) / "embeddings.db"),
            SqliteJournal.at(Path(folder) / "journal.db"),
        ):
            opened.connection.close()  # type: ignore[union-attr]
        done.put("ok")
    except Exception as e:  # reported to the test, not lost in the child
        done.put(repr(e))


def test_processes_opening_one_new_file_together_all_open_it(tmp_path: Path) -> None:
    """SQLite answers "database is locked" at once, without its busy handler, when two
    connections switch a new file to WAL together: before connect_wal most trials lost a
    racer. Every racer of every trial now opens the store, the cache and the journal."""
    ctx = mp.get_context("fork")
    failures = []
    for trial in range(TRIALS):
        folder, go = tmp_path / str(trial), tmp_path / f"go{trial}"
        folder.mkdir()
        done = ctx.Queue()
        racers = [
            ctx.Process(target=_open_all, args=(str(folder), str(go), done)) for _ in range(RACERS)
        ]
        for p in racers:
            p.start()
        go.touch()
        failures += [r for r in (done.get(timeout=120) for _ in racers) if r != "ok"]
        for p in racers:
            p.join(timeout=60)
    assert failures == []
    for name in ("store.db", "embeddings.db", "journal.db"):
        mode = sqlite3.connect(tmp_path / "0" / name).execute("PRAGMA journal_mode").fetchone()
        assert mode == ("wal",)


def test_a_lock_held_past_the_timeout_is_raised(tmp_path: Path) -> None:
    """The retry is bounded: a writer that never lets go is reported, not waited on forever."""
    path = tmp_path / "held.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("CREATE TABLE t (a)")
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        connect_wal(path, timeout=0.3)
    holder.rollback()
    holder.close()
