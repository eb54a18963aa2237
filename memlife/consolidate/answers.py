"""A dry run's model answers, kept for the apply run that follows it.

`memlife run --dry-run --with-model` pays for one answer per group; the apply run after it
used to ask again: paid twice, and free to answer otherwise (the dry run showed a merge,
the apply run kept the records apart). A dry run now keeps each answer it parsed (the
tool call's input, validated: ConsolidationOutput, and the model that gave it) under the
sha256 of the whole request: model, max_tokens, system prompt, messages and tool, so every
member's id and text, the prompt's version and the delimiter. Any member changed, added or
gone, another prompt or model: another request, a miss. The apply run takes the answer
(reads and deletes it: each answer serves one apply run, so a group refused tonight gets a
fresh answer when its back-off ends) and checks it again like a fresh one (schema,
grounding, coverage, instructions): nothing is trusted for having been kept. A later dry
run reads the answers without taking them. An answer older than ``KEEP_DAYS`` is not read.

Kept in the SQLite file of the dry run's embedding cache ($MEMLIFE_HOME/embeddings.db on
the embedded store; the state's local file beside another store); the apply run looks in
its own cache file and in that one. Where a cache keeps no SQLite file (state in
DynamoDB) nothing is kept and every run asks the model.

An answer holds a memory's words, so it leaves wherever the records' words leave:
``forget_shards`` is called by derived.forget_for (erasure, nightly deletes, a deleted
replacement's clean-up), every answer of the shard; ``forget_actors`` by a dry run that
finds a recent erasure after its batch's writes, answers included (erase_sweep: a dry
run takes no lease, so an erasure may run while the model answers). secure_delete is on in those files and erasure
vacuums them (erase.compact).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from contextlib import AbstractContextManager, closing, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlife.sqlite_open import connect_wal

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
    """The answers one run may use: ``dry_run`` keeps and reads its own file's; an apply
    run takes from its own file, then from the dry runs' file (``other``)."""

    def __init__(
        self,
        connection: sqlite3.Connection,
        lock: AbstractContextManager[Any],
        *,
        dry_run: bool,
        other: Path | None = None,
    ) -> None:
        self.connection, self.lock, self.dry_run, self.other = connection, lock, dry_run, other
        if dry_run:
            with lock:
                connection.executescript(SCHEMA)

    def find(self, digest: str) -> KeptAnswer | None:
        """The kept answer to this request; an apply run takes it (it is deleted)."""
        since = time.time() - KEEP_DAYS * 86400
        with self.lock:
            found = _take(self.connection, digest, since, take=not self.dry_run)
        if found is not None or self.dry_run or self.other is None or not self.other.exists():
            return found
        with closing(connect_wal(self.other)) as other:
            other.execute("PRAGMA secure_delete=ON")
            return _take(other, digest, since, take=True)

    def keep(self, digest: str, shard: tuple[str, str], model: str, output: dict[str, Any]) -> None:
        """A dry run keeps what the model answered (an apply run keeps nothing)."""
        if not self.dry_run:
            return
        row = (digest, *shard, time.time(), model, json.dumps(output, separators=(",", ":")))
        stale = time.time() - KEEP_DAYS * 86400
        with self.lock:  # autocommit connections (sqlite_open.connect_wal), as the caches'
            self.connection.execute(
                "INSERT OR REPLACE INTO model_answers VALUES (?, ?, ?, ?, ?, ?)", row
            )
            self.connection.execute("DELETE FROM model_answers WHERE answered_at < ?", (stale,))


def _take(conn: sqlite3.Connection, digest: str, since: float, *, take: bool) -> KeptAnswer | None:
    if conn.execute(_TABLE).fetchone() is None:
        return None
    row = conn.execute(
        "SELECT model, output FROM model_answers WHERE digest=? AND answered_at >= ?",
        (digest, since),
    ).fetchone()
    if row is None:
        return None
    if take:
        conn.execute("DELETE FROM model_answers WHERE digest=?", (digest,))
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
    n = 0
    with lock:
        if conn.execute(_TABLE).fetchone() is None:
            return 0
        for actor_id, namespace in sorted(shards):
            n += conn.execute(
                "DELETE FROM model_answers WHERE actor_id=? AND namespace=?", (actor_id, namespace)
            ).rowcount
    return n


def forget_actors(
    conn: sqlite3.Connection, lock: AbstractContextManager[Any], actors: set[str]
) -> int:
    """Drop every kept answer of these actors, all namespaces."""
    n = 0
    with lock:
        if conn.execute(_TABLE).fetchone() is None:
            return 0
        for actor_id in sorted(actors):
            n += conn.execute("DELETE FROM model_answers WHERE actor_id=?", (actor_id,)).rowcount
    return n
