"""A dry run's model answers, kept for the apply run that follows it.

`memlife run --dry-run --with-model` pays for one answer per group; the apply run after it
used to ask again: paid twice, and free to answer otherwise (the dry run showed a merge,
the apply run kept the records apart). A dry run now keeps each answer it parsed (the
tool call's input, validated: ConsolidationOutput, and the model that gave it) under the
sha256 of the whole request: model, max_tokens, system prompt, messages and tool, so every
member's id and text, the prompt's version and the delimiter. Any member changed, added or
gone, another prompt or model: another request, a miss. The apply run uses the answer in
place of a call and checks it like a fresh one (schema, grounding, coverage,
instructions): nothing is trusted for having been kept. An answer those checks refuse is
dropped by the apply run that refused it, so the group's retry after its back-off asks
afresh; any other stays until ``KEEP_DAYS`` (an apply run that crashed finds it again on
its rerun; a second store copied from the first finds it too: the same request). Every
run opening a file clears what is past ``KEEP_DAYS`` in it. A locked file (another
writer) is a miss, never a stalled or failed run: the model is asked.

Kept in the SQLite file of the dry run's embedding cache ($MEMLIFE_HOME/embeddings.db on
the embedded store; the state's local file beside another store); the apply run looks in
its own cache file and in that one. Where a cache keeps no SQLite file (state in
DynamoDB) nothing is kept and every run asks the model.

An answer holds a memory's words, so it leaves wherever the records' words leave:
``forget_shards`` is called by derived.forget_for (erasure, nightly deletes, a deleted
replacement's clean-up), every answer of the shard; ``forget_actors`` by a dry run that
finds a recent erasure after its batch's writes, answers included (erase_sweep: a dry
run takes no lease, so an erasure may run while the model answers; it drops the actor's
answers in every namespace). secure_delete is on in those files, erasure vacuums them
(erase.compact) and its applier folds the dry runs' file's WAL (apply/appliers/erase.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlife.sqlite_open import is_lock_error

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS model_answers (
    digest TEXT PRIMARY KEY,     -- sha256 of the request (request_digest)
    actor_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    answered_at REAL NOT NULL,   -- wall clock, unix seconds
    model TEXT NOT NULL,         -- the model that answered
    output TEXT NOT NULL         -- JSON: the tool call's input, as parsed
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS model_answers_shard ON model_answers (actor_id, namespace);
"""
KEEP_DAYS = 7  # a week: a dry run reviewed on Friday still serves Monday's apply run
_TABLE = "SELECT 1 FROM sqlite_master WHERE type='table' AND name='model_answers'"


@dataclass(frozen=True)
class KeptAnswer:
    output: dict[str, Any]
    model: str


def request_digest(request: dict[str, Any]) -> str:
    """sha256 over the request's JSON, keys sorted (the messages carry the group)."""
    text = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


class AnswerBook:
    """The answers one run may use: a dry run keeps and reads its own file's; an apply run
    reads its own file's, then the dry runs' file's (``other``), and drops what it refused."""

    def __init__(
        self,
        connection: sqlite3.Connection,
        lock: AbstractContextManager[Any],
        *,
        dry_run: bool,
        other: Path | None = None,
    ) -> None:
        self.dry_run, self.other = dry_run, other
        self._files: list[tuple[sqlite3.Connection, AbstractContextManager[Any]]] = []
        self._other_opened = False
        if dry_run:
            try:
                with lock, _briefly(connection):
                    connection.executescript(SCHEMA)
            except sqlite3.OperationalError as exc:  # locked: this run keeps nothing
                if not is_lock_error(exc):
                    raise
        self._add(connection, lock)

    def _add(self, conn: sqlite3.Connection, lock: AbstractContextManager[Any]) -> None:
        """A file to read; its answers past the keeping time go now (a week means a week)."""
        stale = time.time() - KEEP_DAYS * 86400
        _quietly(conn, lock, "DELETE FROM model_answers WHERE answered_at < ?", (stale,))
        self._files.append((conn, lock))

    def _readable(self) -> list[tuple[sqlite3.Connection, AbstractContextManager[Any]]]:
        if not self._other_opened and self.other is not None and self.other.exists():
            self._other_opened = True  # opened once a run (an open costs more than a read)
            conn = sqlite3.connect(
                self.other, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA secure_delete=ON")
            self._add(conn, threading.Lock())
        return self._files

    def find(self, digest: str) -> KeptAnswer | None:
        """The kept answer to this request; None where none is (or its file is locked)."""
        since = time.time() - KEEP_DAYS * 86400
        for conn, lock in self._readable():
            row = _quietly(
                conn, lock, "SELECT model, output FROM model_answers WHERE digest=? AND "
                "answered_at >= ?", (digest, since), read=True,
            )  # fmt: skip
            if row is not None:
                return _answer(row)
        return None

    def drop(self, digest: str) -> None:
        """An apply run refused this answer (grounding, coverage): the group's retry, after
        its back-off, asks the model afresh instead of meeting the same answer."""
        if self.dry_run:
            return
        for conn, lock in self._readable():
            _quietly(conn, lock, "DELETE FROM model_answers WHERE digest=?", (digest,))

    def keep(self, digest: str, shard: tuple[str, str], model: str, output: dict[str, Any]) -> None:
        """A dry run keeps what the model answered (an apply run keeps nothing)."""
        if not self.dry_run:
            return
        row = (digest, *shard, time.time(), model, json.dumps(output, separators=(",", ":")))
        conn, lock = self._files[0]
        sql = "INSERT OR REPLACE INTO model_answers VALUES (?, ?, ?, ?, ?, ?)"
        if _quietly(conn, lock, sql, row) is None:
            log.warning("a model answer was not kept (the cache file is locked): the apply "
                        "run asks the model again")  # fmt: skip


BUSY_SECONDS = 2.0  # an answer is worth a call, not a stalled run: a locked file is a miss


@contextmanager
def _briefly(conn: sqlite3.Connection) -> Iterator[None]:
    """Wait at most BUSY_SECONDS for another connection's lock (the caches wait 30 s)."""
    before = conn.execute("PRAGMA busy_timeout").fetchone()[0]
    conn.execute(f"PRAGMA busy_timeout={int(BUSY_SECONDS * 1000)}")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA busy_timeout={int(before)}")


def _quietly(
    conn: sqlite3.Connection, lock: AbstractContextManager[Any], sql: str,
    args: tuple[Any, ...], *, read: bool = False,
) -> Any:  # fmt: skip
    """Run one statement on a file that may hold no table yet or be locked by another
    writer: None then (a miss; nothing kept or dropped), else the row read or True."""
    try:
        with lock, _briefly(conn):
            if conn.execute(_TABLE).fetchone() is None:
                return None
            cur = conn.execute(sql, args)
            return cur.fetchone() if read else True
    except sqlite3.OperationalError as exc:
        if not is_lock_error(exc):
            raise
        return None


def _answer(row: tuple[Any, ...]) -> KeptAnswer | None:
    try:
        output = json.loads(row[1])
    except ValueError:
        return None  # a damaged row: the model is asked again
    return KeptAnswer(output, str(row[0])) if isinstance(output, dict) else None


def answer_book(cache: object, *, dry_run: bool) -> AnswerBook | None:
    """The book beside a run's embedding cache (its SQLite file); None where it has none."""
    if cache is None:
        return None
    conn = getattr(cache, "connection", None)
    if not isinstance(conn, sqlite3.Connection):
        return None
    from memlife.settings import settings

    home = (settings().home / "embeddings.db").resolve()
    mine = getattr(cache, "path", None)
    other = None if dry_run or (mine is not None and Path(mine).resolve() == home) else home
    lock = getattr(cache, "lock", None) or nullcontext()
    return AnswerBook(conn, lock, dry_run=dry_run, other=other)


def forget_shards(
    conn: sqlite3.Connection, lock: AbstractContextManager[Any], shards: set[tuple[str, str]]
) -> int:
    """Drop every kept answer of these shards (creating nothing); how many went."""
    sql = "DELETE FROM model_answers WHERE actor_id=? AND namespace=?"
    return _delete_each(conn, lock, sql, sorted(shards))


def forget_actors(
    conn: sqlite3.Connection, lock: AbstractContextManager[Any], actors: set[str]
) -> int:
    """Drop every kept answer of these actors, all namespaces."""
    sql = "DELETE FROM model_answers WHERE actor_id=?"
    return _delete_each(conn, lock, sql, [(a,) for a in sorted(actors)])


def _delete_each(
    conn: sqlite3.Connection, lock: AbstractContextManager[Any], sql: str,
    keys: list[tuple[str, ...]],
) -> int:  # fmt: skip
    """Erasure's deletes: never quiet (a lock error propagates, unlike ``_quietly``)."""
    n = 0
    with lock:
        if conn.execute(_TABLE).fetchone() is None:
            return 0
        for key in keys:
            n += conn.execute(sql, key).rowcount
    return n
