"""Session 36a mutation audit of "two writers at once" on the embedded SQLite files: the
BEGIN IMMEDIATE write transactions (journal column upgrade, lifecycle lease), the store's
version upgrade (the re-check of user_version under the write lock, the version set last)
and the busy timeouts (connect_wal, the import worker's ADBC connection). Each test attacks
one guard a mutant showed untested.

Real SQLite files in tmp_path, a second connection (a thread with its own connection, or a
subprocess) as the other writer. Where the order matters the other writer holds the write
lock first and lets go only once the thread under test is parked on its BEGIN (read from
the thread's frame), so the interleaving is fixed, not left to sleeps. No mocks of memlife
logic; the one crash is a real SIGKILL of a subprocess at a statement boundary.
"""

from __future__ import annotations

import json
import linecache
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memlife.journal.sqlite import _ADDED, SqliteJournal
from memlife.journal.sqlite import SCHEMA as JOURNAL_SCHEMA
from memlife.model import MemoryRecord, Status, parse_record_line
from memlife.sqlite_open import connect_wal
from memlife.stores.sqlite import _REFOLD_BATCH, STORE_VERSION, SqliteStore
from memlife.text import norm_sha256

_REPO = Path(__file__).resolve().parents[2]
NS = "/users/u1/facts"
T0 = "2026-11-01T12:00:00+00:00"


def rec(rid: str, content: str) -> MemoryRecord:
    line = {"id": rid, "actor_id": "u1", "namespace": NS, "memory_type": "semantic",
            "content": content, "created_at": "2026-01-02T10:00:00Z"}  # fmt: skip
    return parse_record_line(json.dumps(line))


def _raw(path: Path) -> sqlite3.Connection:
    """Another process's connection: autocommit, its own busy wait."""
    return sqlite3.connect(path, isolation_level=None, timeout=30, check_same_thread=False)


def _version(path: Path) -> int:
    con = sqlite3.connect(path)
    try:
        return int(con.execute("PRAGMA user_version").fetchone()[0])
    finally:
        con.close()


def _keys(path: Path) -> dict[str, str]:
    con = sqlite3.connect(path)
    try:
        return dict(con.execute("SELECT id, norm_sha256 FROM records").fetchall())
    finally:
        con.close()


class _Run(threading.Thread):
    """``fn`` in a thread; its result or its exception kept for the test."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.fn, self.result, self.error = fn, None, None  # type: Any, Any, BaseException | None

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


def _parked_on_begin(t: _Run, function: str, deadline_s: float = 10.0) -> bool:
    """Wait until thread ``t`` stands on a ``BEGIN`` line of ``function`` (there it waits
    for the write lock another connection holds); False if it finished first."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if not t.is_alive():
            return False
        frame = sys._current_frames().get(t.ident or -1)
        while frame is not None:
            if frame.f_code.co_name == function:
                line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
                if "BEGIN" in line:
                    return True
                break
            frame = frame.f_back
        time.sleep(0.002)
    raise AssertionError(f"the thread never reached the BEGIN of {function}")


# -- the store's version upgrade ----------------------------------------------------------------
def _old_store(path: Path, n: int, version: int = 3) -> dict[str, str]:
    """A store file an older memlife left: non-ASCII rows under stale keys, at ``version``.
    Returns the keys the current fold gives."""
    texts = {f"m-{i:05d}": f"Факт номер {i}." for i in range(n)}
    with SqliteStore(path) as s:
        s.put_many([rec(rid, text) for rid, text in texts.items()])
        s.connection.execute("UPDATE records SET norm_sha256 = 'stale-' || id")
        s.connection.execute(f"PRAGMA user_version={version}")
    return {rid: norm_sha256(text) for rid, text in texts.items()}


def _newer_memlife_finishes_while_we_wait(path: Path) -> _Run:
    """This memlife opens an old file (version 3); while its upgrade waits for the write
    lock, a newer memlife (version STORE_VERSION + 1, its own fold) upgrades the file and
    commits. Returns the finished opener."""
    _old_store(path, 20)
    newer = _raw(path)
    newer.execute("BEGIN IMMEDIATE")
    opener = _Run(lambda: SqliteStore(path).close())
    opener.start()
    try:
        assert _parked_on_begin(opener, "__enter__"), opener.error
        newer.execute("UPDATE records SET norm_sha256 = 'newer-' || id")
        newer.execute(f"PRAGMA user_version={STORE_VERSION + 1}")
    finally:
        newer.execute("COMMIT")
        newer.close()
    opener.join(20)
    assert not opener.is_alive()
    return opener


def test_an_upgrade_finished_by_another_process_meanwhile_is_not_redone(tmp_path: Path) -> None:
    """_upgrade's re-check of ``user_version`` inside the write transaction (mutant: the
    ``>= STORE_VERSION: break`` dropped, so only the read before the lock decides). Another
    process upgraded the file while this one waited for the lock: this one must not run its
    own pass over the rows, which here would write this version's keys over the newer
    memlife's. Also holds ``BEGIN IMMEDIATE`` -> ``BEGIN`` in _Transaction: the deferred
    pass reads, then its first write is refused at once ("database is locked")."""
    path = tmp_path / "m.db"
    opener = _newer_memlife_finishes_while_we_wait(path)
    assert opener.error is None
    assert set(_keys(path).values()) == {f"newer-m-{i:05d}" for i in range(20)}


def test_an_upgrade_never_lowers_a_version_another_process_set_meanwhile(tmp_path: Path) -> None:
    """_upgrade's final ``if user_version < STORE_VERSION`` (mutant: the version written
    unconditionally). A newer memlife set a later version while this one waited for the
    lock; writing this one's version over it would make the newer memlife take the file for
    an older one and rewrite it on its next open."""
    path = tmp_path / "m.db"
    opener = _newer_memlife_finishes_while_we_wait(path)
    assert opener.error is None
    assert _version(path) == STORE_VERSION + 1


_KILL_IN_SECOND_BATCH = """
import os, signal, sys
import memlife.stores.sqlite as m

real, batches = m.connect_wal, []

def traced(path, **kw):
    conn = real(path, **kw)
    def trace(sql):
        if sql.startswith("SELECT rowid, content, norm_sha256, negated FROM records"):
            batches.append(sql)
            if len(batches) == 2:  # the first batch is committed, the second not begun
                os.kill(os.getpid(), signal.SIGKILL)
    conn.set_trace_callback(trace)
    return conn

m.connect_wal = traced  # a trace on the real connection: the upgrade itself is untouched
m.SqliteStore(sys.argv[1])
"""


def test_an_upgrade_killed_between_batches_is_finished_by_the_next_open(tmp_path: Path) -> None:
    """_upgrade sets the version last, after every batch (mutant: the version written before
    the batches, the re-check in the loop dropped so the pass still runs). A process killed
    between two batches leaves the file below the version, so the next open finishes the
    pass; a version written first would mark it done with the second batch's rows still
    under their old keys, for good."""
    path = tmp_path / "m.db"
    want = _old_store(path, _REFOLD_BATCH + 500)
    done = subprocess.run([sys.executable, "-c", _KILL_IN_SECOND_BATCH, str(path)], cwd=_REPO,
                          env={**os.environ, "PYTHONPATH": str(_REPO)}, timeout=60)  # fmt: skip
    assert done.returncode == -9, "the upgrade was not killed in its second batch"
    after_kill = _keys(path)
    assert sum(after_kill[r] == want[r] for r in want) == _REFOLD_BATCH  # the first batch committed
    assert _version(path) < STORE_VERSION
    with SqliteStore(path):
        pass
    assert _keys(path) == want
    assert _version(path) == STORE_VERSION


# -- the journal ---------------------------------------------------------------------------------
def _old_journal(path: Path) -> None:
    """A journal file from before the _ADDED columns (SCHEMA alone creates them without)."""
    con = connect_wal(path)
    con.executescript(JOURNAL_SCHEMA)
    con.close()


def test_journal_columns_added_by_another_process_meanwhile_are_not_added_twice(
    tmp_path: Path,
) -> None:
    """_add_columns re-reads the columns inside its write transaction (mutant: the columns
    read before the lock taken as current, ``have = set()`` inside). Another process added
    them while this one waited for the lock: adding them again is "duplicate column name"
    and the journal cannot be opened. Also holds ``BEGIN IMMEDIATE`` -> ``BEGIN`` there: the
    deferred transaction reads the old columns, then its ALTER is refused at once."""
    path = tmp_path / "journal.db"
    _old_journal(path)
    other = _raw(path)
    other.execute("BEGIN IMMEDIATE")
    opener = _Run(lambda: SqliteJournal.at(path).connection.close())
    opener.start()
    try:
        assert _parked_on_begin(opener, "_add_columns"), opener.error
        for name, sql_type in _ADDED:
            other.execute(f"ALTER TABLE operations ADD COLUMN {name} {sql_type}")
    finally:
        other.execute("COMMIT")
        other.close()
    opener.join(20)
    assert opener.error is None
    con = sqlite3.connect(path)
    cols = [r[1] for r in con.execute("PRAGMA table_info(operations)")]
    con.close()
    assert sorted(c for c in cols if c in dict(_ADDED)) == sorted(dict(_ADDED))


def test_a_lease_acquire_waits_for_another_writer_and_then_decides(tmp_path: Path) -> None:
    """lease_acquire's ``BEGIN IMMEDIATE`` (mutant: ``BEGIN``). Another process holds the
    write lock while taking the lease itself: this acquire waits, then sees that holder and
    is refused. A deferred transaction reads the lease table first, so its write is refused
    at once ("database is locked", no busy wait): the acquire raises instead of deciding."""
    from datetime import datetime, timedelta

    path = tmp_path / "journal.db"
    SqliteJournal.at(path).connection.close()
    now = datetime.fromisoformat(T0)
    later = now + timedelta(minutes=10)
    mine = SqliteJournal.at(path)
    other = _raw(path)
    other.execute("BEGIN IMMEDIATE")
    acquire = _Run(lambda: mine.lease_acquire("store", "me", "run-me", "nightly", now, later))
    acquire.start()
    try:
        assert _parked_on_begin(acquire, "lease_acquire"), acquire.error
        other.execute(
            "INSERT INTO leases VALUES ('store', 'other', 'run-o', 'nightly', ?, ?, ?)",
            (now.isoformat(), now.isoformat(), later.isoformat()),
        )
    finally:
        other.execute("COMMIT")
        other.close()
    acquire.join(20)
    mine.connection.close()
    assert acquire.error is None
    ok, holder = acquire.result
    assert ok is False and holder is not None and holder["owner"] == "other"


# -- busy timeouts -------------------------------------------------------------------------------
def test_connect_wal_gives_up_within_its_timeout_when_a_lock_is_held(tmp_path: Path) -> None:
    """connect_wal's ``timeout=timeout`` on sqlite3.connect (mutant: dropped, so the first
    switch to WAL waits SQLite's default 5 s). A rollback-journal file locked EXCLUSIVE by
    another process: the shared lock the switch needs goes through the busy handler, and the
    caller's 0.3 s bound must hold for that first wait too."""
    path = tmp_path / "held.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("CREATE TABLE t (a)")
    try:
        start = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            connect_wal(path, timeout=0.3)
        assert time.monotonic() - start < 2.5
    finally:
        holder.rollback()
        holder.close()


_INGEST_ONE = """
import sys
from memlife.import_ingest import IngestWriter
from memlife.import_table import rows_table
from memlife.stores.sqlite import record_to_row
from tests.unit.test_guards_session36a import rec

writer = IngestWriter(sys.argv[1])
print("ready", flush=True)
flushed = writer.write(rows_table([(1, record_to_row(rec("m-new", sys.argv[2])), False)]))
writer.close()
print("imported", flushed.imported, [c["code"] for c in flushed.conflicts], flush=True)
"""


def _worker(path: Path, content: str) -> subprocess.Popen[str]:
    """An import worker process writing one row of ``content``; it prints "ready" right
    before its write."""
    return subprocess.Popen([sys.executable, "-c", _INGEST_ONE, str(path), content], cwd=_REPO,
                            env={**os.environ, "PYTHONPATH": str(_REPO)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def _hold_until_blocked_or_gone(worker: subprocess.Popen[str], seconds: float = 1.0) -> None:
    """Once the worker said "ready" its BEGIN is milliseconds away: keep the lock well past
    that, unless the worker already gave up."""
    assert worker.stdout is not None
    assert worker.stdout.readline().strip() == "ready"
    end = time.monotonic() + seconds
    while time.monotonic() < end and worker.poll() is None:
        time.sleep(0.01)


def test_an_import_worker_waits_for_another_writer_instead_of_failing(tmp_path: Path) -> None:
    """IngestWriter's ``busy_timeout`` pragma on its ADBC connection (mutant: dropped; the
    driver then waits 0 ms). Another process holds the write lock when the worker's batch
    begins: the worker waits for it and stores the batch, its BEGIN IMMEDIATE is not
    refused at once (which fails the import: that BEGIN is outside the fallback). The
    worker runs in a subprocess: the driver has its own SQLite library, and two libraries
    in one process release each other's file locks."""
    path = tmp_path / "s.db"
    SqliteStore(path).close()
    other = _raw(path)
    other.execute("BEGIN IMMEDIATE")
    worker = _worker(path, "Lives in Lisbon.")
    try:
        _hold_until_blocked_or_gone(worker)
    finally:
        other.execute("COMMIT")
        other.close()
    out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    assert out.strip() == "imported 1 []"
    assert "m-new" in _keys(path)


def test_an_erasure_committed_while_an_import_worker_waits_refuses_its_row(
    tmp_path: Path,
) -> None:
    """IngestWriter.write reads the tombstones (``_plain``) inside its BEGIN IMMEDIATE
    (mutant: the plain-or-not decision taken before the BEGIN). An erasure holds the write
    lock while the worker's batch begins and commits its tombstone meanwhile: the worker,
    once it has the lock, must see that tombstone and send the row through the store's
    check, which refuses the erased text. Decided before the lock, the batch would be bound
    as plain and the erased text written back."""
    from memlife.model import content_sha256

    path = tmp_path / "s.db"
    secret = "My PIN is 4411."
    eraser = SqliteStore(path)
    try:
        eraser.connection.execute("BEGIN IMMEDIATE")
        worker = _worker(path, secret)
        try:
            eraser.add_tombstones([("u1", "m-gone", content_sha256(secret), norm_sha256(secret))])
            _hold_until_blocked_or_gone(worker)
        finally:
            eraser.connection.execute("COMMIT")
    finally:
        eraser.close()
    out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    assert out.strip() == "imported 0 ['ERASED_CONTENT']"
    assert "m-new" not in _keys(path)


# -- the store's transaction helper -----------------------------------------------------------
def test_a_status_batch_that_fails_part_way_changes_no_record(tmp_path: Path) -> None:
    """_Transaction.__exit__ rolls back on an exception (mutant: ``COMMIT`` always). The
    second record of a set_status batch has a damaged provenance (a row written by hand):
    the batch raises, and the first record, already updated inside the transaction, must
    not be left superseded by a call that failed."""
    path = tmp_path / "m.db"
    with SqliteStore(path) as store:
        store.put_many([rec("m-a", "Lives in Lisbon."), rec("m-b", "Likes tea.")])
        store.connection.execute("UPDATE records SET provenance='{damaged' WHERE id='m-b'")
        with pytest.raises(ValueError):
            store.set_status(["m-a", "m-b"], Status.superseded, replaced_by="m-c")
        assert not store.connection.in_transaction
        got = store.get("m-a")
    assert got is not None and got.status is Status.active
    assert got.provenance.replaced_by is None


# -- the embedding cache's write that does not wait ---------------------------------------------
class _Embedder:
    model_id, dim = "fake-36a", 4

    def embed(self, texts: Any) -> Any:
        import numpy as np

        rows = [np.ones(self.dim, np.float32) / 2 for _ in texts]
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)


def test_an_embedding_write_that_must_not_wait_gives_up_at_once(tmp_path: Path) -> None:
    """EmbeddingCache._store's ``busy_timeout=0`` for ``wait=False`` (mutant: dropped, so
    the write waits the connection's 30 s busy timeout). Another connection holds the write
    lock (it lets go after 3 s): an online load embeds, serves from memory and leaves the
    vector unstored at once, instead of stalling behind the writer and storing it late."""
    from memlife.embed_cache import EmbeddingCache

    path = tmp_path / "embeddings.db"
    cache = EmbeddingCache(_Embedder(), path=path)
    other = _raw(path)
    other.execute("BEGIN IMMEDIATE")
    release = threading.Timer(3.0, lambda: other.execute("ROLLBACK"))
    release.start()
    try:
        start = time.monotonic()
        vectors = cache.get_or_embed_texts(["Lives in Lisbon."], wait=False)
        took = time.monotonic() - start
    finally:
        release.join()
        other.close()
    try:
        assert vectors.shape == (1, 4)
        assert cache.stats.unstored == 1 and took < 2.0
        assert cache.connection is not None
        assert cache.connection.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0] == 0
        assert cache.connection.execute("PRAGMA busy_timeout").fetchone()[0] == 30000
    finally:
        cache.close()


# -- the review queue's night ---------------------------------------------------------------------
def test_a_review_night_whose_later_write_fails_leaves_no_earlier_one(tmp_path: Path) -> None:
    """SqliteReviews.write_night's own ``BEGIN IMMEDIATE`` when no transaction is open
    (mutant: ``own = False``, each statement then commits by itself). The night's carried
    items are counted first; a later write of the same night fails (a moved item the table
    refuses: NOT NULL priority). The failed night must leave the count as it was, or a
    rerun of the night counts the item twice."""
    from dataclasses import replace

    from memlife.review_queue.base import ReviewItem
    from memlife.review_queue.sqlite import SCHEMA, SqliteReviews

    conn = connect_wal(tmp_path / "reviews.db")
    try:
        conn.executescript(SCHEMA)  # as review_queue.queue opens its file
        queue = SqliteReviews(conn)
        item = ReviewItem("rv-1", "r1", "MISSING_OWNER", None, "u1", NS, None, None, 1.0,
                          "open", None, None, 1, "n1", "t1", "n1", "t1", None, None, "v1")  # fmt: skip
        waiting = replace(item, item_id="rv-2", record_id="r2", state="waiting")
        queue.write_night([], [item, waiting], "n1", "t1")
        bad = replace(waiting, priority=None)
        with pytest.raises(sqlite3.IntegrityError):
            queue.write_night([("rv-1", "v1")], [], "n2", "t2", moved=[bad])
        assert not conn.in_transaction
        got = queue.get_many(["rv-1", "rv-2"])
    finally:
        conn.close()
    assert (got["rv-1"].nights, got["rv-1"].last_seen_run) == (1, "n1")
    assert got["rv-2"].priority == 1.0
