"""Results of pure functions over one shard, kept by a digest of everything they read.

A night on an unchanged shard asks the same questions again: which subjects its records
without one get (group.infer_subjects), and what staging a consolidation group comes to in
a dry run (apply/groups.py). Both are pure functions of what the store holds (ids, content
hashes, times, polarity), the policy, the embedding model and this code; the answer is
kept here under a sha256 digest of exactly those inputs, one row per shard and kind. A
changed record, a new record, another policy, model or code version changes the digest:
the row simply misses and is recomputed and replaced. Nothing here is a memory change: a
dry run writes it too, like the embedding cache, in the same SQLite file as the run's
embedding cache (the store's file for apply runs, ``$MEMLIFE_HOME/embeddings.db`` for a
dry run, so a dry run leaves the store file byte-identical).

No content is kept, only ids, keys and counts. An inferred subject key does hold a few
content words (memlife/inferred), so erasure drops every row of an erased record's shard
(:meth:`DerivedCache.forget_shards`, called wherever the embedding cache forgets vectors).
Time-dependent decisions (the cutoff, expiry, scores) are never kept here.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import struct
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import memlife
from memlife.embed_cache import write_many

SCHEMA = """
CREATE TABLE IF NOT EXISTS derived (
    actor_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    kind TEXT NOT NULL,          -- 'inference' or 'staging'
    digest TEXT NOT NULL,        -- sha256 of every input the function reads
    value TEXT NOT NULL,         -- JSON: ids, keys and counts only
    PRIMARY KEY (actor_id, namespace, kind)
) WITHOUT ROWID;
"""
# Bumped whenever what a kept function computes changes (with the package version).
# 3: statement keys (text.norm_sha256) by the Unicode-aware fold; a value computed with
# the old keys (two different non-ASCII statements as one) is never read again.
# 4: that fold drops every default-ignorable code point, makes digits of every script
# ASCII and Turkish i 'i', and keeps superscripts and fractions apart (store version 2).
# 5: signs, percents and currencies are words of the statement, and more negations are
# read (store version 3).
# 6: a sign after a letter or standing alone is a word ("A+" is not "A-", "<7" not ">7"),
# and a regular past is not its present in `restates` ("worked" / "works"; store version 4).
# 7: `restates` keeps the side of each word in a negation or a comparison ("peanuts, not
# shellfish" is not "shellfish, not peanuts"); symbols (category So), arrows and "&" are
# words of the statement key, markup at a line's start is not (store version 4).
# 8: `restates` scopes more negations ("none", "nobody", "nothing", "dont", "rarely",
# "except", "quit"...) and reads "vs" / "versus" / "as opposed to" / "compared to" as a
# comparison ("tea vs coffee" is not "coffee vs tea"); statement keys are unchanged.
# 9: `restates` keeps a verb with its object: each clause's words ("likes tea, hates
# coffee" is not "likes coffee, hates tea"; clauses also end at after, because, who...).
# 10: `restates` compares the clauses of a text holding a list too ("likes tea and cake,
# but hates coffee" is not "likes coffee and cake, but hates tea"); a list keeps any order.
# 11: a probable update (group.infer_subjects) pairs only records stated at different times:
# two records with the same created_at are never each other's update (the id decided).
# 12: a polarity flip is an update cue only where the negated clause holds a word the
# other text uses (session 44, its clause read from both sides in 45); restatement rules
# for "I" (session 44) changed what a subject gathers; a point between digits is a word
# in the statement key (store version 6).
# 13: a row is checked for a restatement against its 8 closest statements at most (it
# stays apart past them: the check was quadratic in near-duplicates; session 46).
# 14: an update verb a negation governs ("not give up", "never quit") is no update cue, and
# "no matter" / "no doubt" / "no wonder" / "not only" deny nothing (audit 49v).
# 15: `restates` refuses two runs of words traded across words no list joins, in any
# language ("préfère le thé au café" / "le café au thé", audit 49x5): statements split.
# 16: nor runs traded across a joiner and another subject's pronoun ("Ella bebe té y él
# bebe café", audit 49r2): statements split.
# 17: `restates` keeps a derived word apart from its stem ("experiment" / "experience",
# "classical" / "classic": audit 50l): statements split.
# 18: `restates` keeps "only" with the phrase a link or time word opens ("eats meat only
# on Sundays" is not "eats only meat on Sundays": audit 51x5): statements split.
# 19: a probable update never pairs two texts that open with other people's names ("Jolene
# spends ..." / "Deborah used to ...": audit 52a): updates dropped.
# 20: `restates` holds a wordless text (emoji: one [UNK] to MiniLM) a restatement only of
# its own statement key ("👍" / "👎": audit 52c): statements split.
# 21: the rule of 19 reads no names in a text that speaks of the user ("Bob is the user's
# manager" / "Alice is now the user's manager": audit 52r): updates paired again.
# 22: `restates` keeps a clause-opening "only" with the subject it restricts ("Only she
# knows the password" / "She knows only the password"), "only" past "and" or after a link
# with its phrase, and a word moved past a joiner into another clause ("isst kein Fleisch
# und trinkt Wein" / "isst Fleisch und trinkt kein Wein": audit 53x5): statements split.
VERSION = f"derived-22:{memlife.__version__}"
FLUSH_ROWS = 256
READ_AHEAD = 128  # shards whose rows one query reads
KINDS = ("inference", "staging", "staging_total")  # the kinds kept (rows per shard)
_END = (
    "\U0010ffff",
    "",
)  # after every shard  # rows written per transaction (one commit, not one per shard)

Shard = tuple[str, str]


@dataclass
class DerivedStats:
    hits: int = 0
    misses: int = 0
    written: int = 0


class DerivedCache:
    """One table beside the embedding cache (same connection and lock)."""

    def __init__(self, connection: sqlite3.Connection, lock: AbstractContextManager[Any]) -> None:
        self.connection, self.lock = connection, lock
        with lock:
            connection.executescript(SCHEMA)
        self.stats = DerivedStats()
        self._pending: dict[tuple[str, str, str], tuple[str, str]] = {}
        # rows read ahead, in shard order (a run plans its shards in that order): one query
        # per READ_AHEAD shards, not one per shard; ``_span`` is the (first, last) shard
        # they cover completely (a shard in it without rows has none)
        self._ahead: dict[Shard, dict[str, tuple[str, str]]] = {}
        self._span: tuple[Shard, Shard | None] | None = None  # None: to the end

    def _rows(self, shard: Shard) -> dict[str, tuple[str, str]]:
        """kind -> (digest, value) of one shard."""
        found = self._ahead.get(shard)
        if found is not None:
            return found
        span = self._span
        if span is not None and span[0] <= shard and (span[1] is None or shard <= span[1]):
            return self._ahead.setdefault(shard, {})
        q = (
            "SELECT actor_id, namespace, kind, digest, value FROM derived "
            "WHERE (actor_id, namespace) >= (?, ?) ORDER BY actor_id, namespace, kind LIMIT ?"
        )
        limit = READ_AHEAD * len(KINDS)
        with self.lock:
            rows = self.connection.execute(q, (*shard, limit)).fetchall()
        ahead: dict[Shard, dict[str, tuple[str, str]]] = {}
        for a, n, k, d, v in rows:
            ahead.setdefault((a, n), {})[k] = (d, v)
        end: Shard | None = None  # fewer rows than asked: every shard after is covered
        if len(rows) == limit:
            cut = (rows[-1][0], rows[-1][1])
            if cut != shard:
                ahead.pop(cut, None)  # perhaps cut short by the limit: read again when asked
            end = max(ahead) if ahead else shard
        self._ahead, self._span = ahead, (shard, end)
        return self._ahead.setdefault(shard, {})

    def get(self, shard: Shard, kind: str, digest: str) -> Any | None:
        """The kept value (decoded JSON) when the digest matches, else None."""
        found = self._pending.get((*shard, kind)) or self._rows(shard).get(kind)
        if found is None or found[0] != digest:
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        return json.loads(found[1])

    def entries(self, shard: Shard, kind: str, digest: str) -> dict[str, Any]:
        """A shard's row that maps many digests (one per group) to values, when the row's
        own digest (what every entry shares: policy, model, version) matches; else {}."""
        found = self._pending.get((*shard, kind)) or self._rows(shard).get(kind)
        if found is None or found[0] != digest:
            return {}
        value = json.loads(found[1])
        return value if isinstance(value, dict) else {}

    def put(self, shard: Shard, kind: str, digest: str, value: Any) -> None:
        """Keep ``value`` (JSON-able: ids, keys, counts) under ``digest``; written in batches."""
        text = json.dumps(value, separators=(",", ":"))
        old = self._pending.get((*shard, kind)) or self._rows(shard).get(kind)
        if old == (digest, text):
            return
        self._pending[(*shard, kind)] = (digest, text)
        if shard in self._ahead:
            self._ahead[shard][kind] = (digest, text)
        if len(self._pending) >= FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        rows = [(a, n, k, d, v) for (a, n, k), (d, v) in self._pending.items()]
        self._pending = {}
        with self.lock:
            write_many(
                self.connection, "INSERT OR REPLACE INTO derived VALUES (?, ?, ?, ?, ?)", rows
            )
        self.stats.written += len(rows)

    def forget_shards(self, shards: Iterable[Shard]) -> int:
        """Drop every row of these shards (erasure: a subject key holds content words)."""
        gone = set(shards)
        self._pending = {k: v for k, v in self._pending.items() if (k[0], k[1]) not in gone}
        self._ahead, self._span = {}, None
        n = 0
        with self.lock:
            for actor_id, namespace in sorted(gone):
                cur = self.connection.execute(
                    "DELETE FROM derived WHERE actor_id=? AND namespace=?", (actor_id, namespace)
                )
                n += cur.rowcount
        return n

    def forget_actors(self, actors: Iterable[str]) -> int:
        """Drop every row of these actors, all namespaces (a dry run racing an erasure:
        memlife/erase_sweep.py; a tombstone names the actor, not the namespace)."""
        gone = set(actors)
        self._pending = {k: v for k, v in self._pending.items() if k[0] not in gone}
        self._ahead, self._span = {}, None  # the read-ahead holds their subject keys too
        n = 0
        with self.lock:
            for actor_id in sorted(gone):
                cur = self.connection.execute("DELETE FROM derived WHERE actor_id=?", (actor_id,))
                n += cur.rowcount
        return n

    def __len__(self) -> int:
        with self.lock:
            return int(self.connection.execute("SELECT COUNT(*) FROM derived").fetchone()[0])


def derived_for(cache: object) -> DerivedCache | None:
    """The derived cache beside an embedding cache (its SQLite file); None when that cache
    keeps no SQLite file (the state backend's), or is None."""
    if cache is None:
        return None
    found = cache.__dict__.get("_derived")
    if found is None:
        conn = getattr(cache, "connection", None)
        if not isinstance(conn, sqlite3.Connection):
            return None
        found = cache.__dict__["_derived"] = DerivedCache(conn, cache.lock)  # type: ignore[attr-defined]  # a SQLite cache (its connection checked above) has a lock; the protocol does not say so
    return found if isinstance(found, DerivedCache) else None


def forget_for(cache: object, shards: Iterable[Shard]) -> int:
    """Erasure: drop the derived rows of these shards in ``cache``'s SQLite file, and the
    model answers a dry run kept there (consolidate/answers.py: they hold words), creating
    nothing where no such table exists; returns how many rows went."""
    from memlife.consolidate import answers

    gone = set(shards)
    conn = getattr(cache, "connection", None)
    if not isinstance(conn, sqlite3.Connection):
        return 0
    lock = getattr(cache, "lock", None) or nullcontext()
    n = answers.forget_shards(conn, lock, gone)
    found = cache.__dict__.get("_derived")
    if isinstance(found, DerivedCache):
        return n + found.forget_shards(gone)
    with lock:
        q = "SELECT 1 FROM sqlite_master WHERE type='table' AND name='derived'"
        if conn.execute(q).fetchone() is None:
            return n
    return n + DerivedCache(conn, lock).forget_shards(gone)


def flush_for(cache: object) -> None:
    """Write what the derived cache beside ``cache`` holds back (end of a batch of shards)."""
    derived = derived_for(cache)
    if derived is not None:
        derived.flush()


def digest(*parts: str) -> str:
    """sha256 over the version and the parts, joined by \\x1d (callers join their fields
    with \\x1f and \\x1e: ids, keys and namespaces are printable text)."""
    return hashlib.sha256("\x1d".join((VERSION, *parts)).encode()).hexdigest()


_NAN = float("nan")  # a missing time (no timestamp is NaN)


def digest_rows(parts: Sequence[str], rows: Sequence[str], times: Sequence[float | None]) -> str:
    """sha256 over the version, ``parts``, one text row per record and the records' times
    as float64 bytes: exact, and about 4x cheaper per record than formatting them."""
    text = "\x1d".join((VERSION, *parts, str(len(times)), "\x1e".join(rows)))
    h = hashlib.sha256(text.encode())
    h.update(struct.pack(f"<{len(times)}d", *[_NAN if t is None else t for t in times]))
    return h.hexdigest()


_policies: dict[int, tuple[Any, str]] = {}


def policy_digest(policy: Any) -> str:
    """The whole policy (every threshold, weight and version): any change misses. Computed
    once per policy object (a run loads its policy once and never changes it)."""
    found = _policies.get(id(policy))
    if found is None or found[0] is not policy:
        if len(_policies) > 64:
            _policies.clear()
        found = _policies[id(policy)] = (policy, policy.fingerprint())
    return found[1]
