"""Several processes opening one new SQLite file at once (workers starting together)."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from memlife.embed_cache import EmbeddingCache
from memlife.journal.sqlite import SqliteJournal
from memlife.sqlite_open import connect_wal
from memlife.stores.sqlite import SqliteStore

TRIALS, RACERS = 12, 4


def _open_all(folder: str, start: Any, done: mp.Queue) -> None:  # type: ignore[type-arg]
    start.wait()  # all racers leave together
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
        folder = tmp_path / str(trial)
        folder.mkdir()
        done, start = ctx.Queue(), ctx.Barrier(RACERS)
        racers = [
            ctx.Process(target=_open_all, args=(str(folder), start, done)) for _ in range(RACERS)
        ]
        for p in racers:
            p.start()
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


class _Busy:
    """A connection whose first ``fails`` switches to WAL are refused as SQLite refuses them."""

    def __init__(self, fails: int, code: int = 5) -> None:
        self.fails, self.code, self.sql, self.closed = fails, code, [], False

    def execute(self, sql: str) -> None:
        self.sql.append(sql)
        if sql == "PRAGMA journal_mode=WAL" and self.fails:
            self.fails -= 1
            e = sqlite3.OperationalError("database is locked")
            e.sqlite_errorcode = self.code  # type: ignore[attr-defined]
            raise e

    def close(self) -> None:
        self.closed = True


def test_the_switch_is_retried_within_the_time_left(monkeypatch: pytest.MonkeyPatch) -> None:
    busy = _Busy(fails=3)
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: busy)
    assert connect_wal("x.db", timeout=5.0) is busy and not busy.closed
    switches = [q for q in busy.sql if q == "PRAGMA journal_mode=WAL"]
    waits = [int(q.split("=")[1]) for q in busy.sql if q.startswith("PRAGMA busy_timeout")]
    assert len(switches) == 4  # three refusals, then the switch
    assert all(w <= 5000 for w in waits[:-1]) and waits[-1] == 5000  # then the full timeout


@pytest.mark.parametrize("code", [26, 8])  # not a database; read-only
def test_any_other_error_is_raised_at_once_and_the_connection_closed(
    monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    busy = _Busy(fails=1, code=code)
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: busy)
    with pytest.raises(sqlite3.OperationalError):
        connect_wal("x.db", timeout=5.0)
    assert busy.closed and busy.sql == ["PRAGMA journal_mode=WAL"]


def test_a_lock_never_released_is_raised_after_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    busy = _Busy(fails=10**9)
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: busy)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        connect_wal("x.db", timeout=0.2)
    assert busy.closed and 3 < len(busy.sql) < 200
