"""Long-term memory for an agent: remember (with duplicate refresh) and recall (hybrid).

Per actor + namespace a :class:`_Shard` holds the ACTIVE records' ids, a contiguous
float32 matrix of their embeddings and an appendable BM25 index over their content. A
shard is loaded lazily from the store (vectors from the embedding cache) on first use and
then kept in step with writes made through this object: ``remember`` appends a row,
``set_status`` (and a recall that meets a record no longer active) drops one. Nothing is
rebuilt per query; ranking is :func:`memlife.retrieval.rank`, the same hybrid ranking as
the offline gate and benchmarks.

Staleness (the nightly job or another process changed the store): for a SQLite store one
``PRAGMA data_version`` plus the connection's ``total_changes`` per call tells whether
anyone else wrote to the file since we last looked; only then is the shard's fingerprint
(count, rowid sum and content length of its active rows, one indexed
query) compared and the shard reloaded if it moved. Other stores have no cheap
change signal: their shards are reloaded after ``refresh_seconds``. Independently, each
recall re-reads its hits from the store and drops any that is no longer active, so a
stale shard can rank a record but can never return it.

Recall without a namespace ranks each of the actor's namespaces separately and merges by
fused score (BM25 is max-normalised per namespace, a slight approximation).
"""

from __future__ import annotations

import hashlib
import math
import secrets
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from memlife.embed import Embedder
from memlife.embed_cache import EmbeddingCache
from memlife.errors import InputError
from memlife.group import subject_keywords
from memlife.inferred import InferredSubjects
from memlife.ledger import AccessLedger, open_ledger, query_sha256
from memlife.model import (
    MemoryRecord,
    MemoryType,
    Provenance,
    RetentionClass,
    Source,
    Status,
    content_sha256,
    utcnow,
)
from memlife.namespaces import check_namespace
from memlife.policy import Policy, load_policy
from memlife.retrieval import BM25_B, BM25_K1, rank, tokenize
from memlife.settings import settings
from memlife.stores.base import MemoryStore, iter_shard
from memlife.text import negates, norm_sha256
from memlife.timeref import epoch_seconds
from memlife.tombstones import ERASED_CONTENT, ERASED_SOURCE, insert_new

DEFAULT_THRESHOLD = 0.25  # MiniLM cosine below which a memory is "not about the query"
DEFAULT_NEAR_DUPLICATE = 0.9
_ACTIVE = (Status.active,)


def new_memory_id() -> str:
    """``m-`` + a UUIDv7-layout hex (48-bit ms time, then 74 random bits): unique, time-sorted."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(secrets.token_bytes(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | (rand >> 68 & 0xFFF) << 64
    value |= 0b10 << 62 | (rand & ((1 << 62) - 1))
    return f"m-{value:032x}"


@dataclass(frozen=True)
class RememberResult:
    record_id: str  # the record now holding the fact (the refreshed one for a duplicate)
    created: bool
    refreshed_duplicate_of: str | None = None  # set when an existing record was refreshed
    similarity: float | None = None  # cosine to that record (1.0 for an exact duplicate)


@dataclass(frozen=True)
class Hit:
    record: MemoryRecord
    score: float  # fused ranking score (retrieval.rank: cosine, lexical, time terms)
    rank: int  # 1 = best
    similarity: float  # cosine, what the threshold tests


class AppendableLexicalIndex:
    """BM25 with :class:`memlife.retrieval.LexicalIndex`'s formula, tokens and constants,
    over rows that can be appended and swap-removed.

    ``LexicalIndex`` bakes idf and length norms into its postings, so one added text would
    mean a rebuild (O(all tokens): ~0.5 s at 10k memories). Here postings keep raw term
    frequencies and the weights are computed per query term from the current n, df and
    average length, which gives the same scores (tested against ``LexicalIndex``).
    """

    def __init__(self, texts: Sequence[str] = (), *, k1: float = BM25_K1, b: float = BM25_B):
        self.k1, self.b = k1, b
        self.n = 0
        self._docs: list[dict[str, int]] = []
        self._lengths = np.zeros(max(16, len(texts)), dtype=np.float64)
        self._postings: dict[str, dict[int, int]] = {}
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for t in texts:
            self.append(t)

    def __len__(self) -> int:
        return self.n

    def append(self, text: str) -> int:
        counts: dict[str, int] = {}
        for term in tokenize(text):
            counts[term] = counts.get(term, 0) + 1
        row = self.n
        if row == len(self._lengths):
            self._lengths = np.concatenate([self._lengths, np.zeros_like(self._lengths)])
        self._lengths[row] = sum(counts.values())
        self._docs.append(counts)
        for term, tf in counts.items():
            self._postings.setdefault(term, {})[row] = tf
            self._arrays.pop(term, None)
        self.n += 1
        return row

    def remove(self, row: int) -> None:
        """Remove ``row``; the last row moves into its place (as in :class:`_Shard`)."""
        last = self.n - 1
        for term in self._docs[row]:
            post = self._postings[term]
            del post[row]
            if not post:
                del self._postings[term]
            self._arrays.pop(term, None)
        if row != last:
            moved = self._docs[last]
            for term, tf in moved.items():
                post = self._postings[term]
                del post[last]
                post[row] = tf
                self._arrays.pop(term, None)
            self._docs[row] = moved
            self._lengths[row] = self._lengths[last]
        self._docs.pop()
        self._lengths[last] = 0.0
        self.n -= 1

    def _posting(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        got = self._arrays.get(term)
        if got is None:
            row = self._postings.get(term)
            if not row:
                return None
            ids = np.fromiter(row.keys(), dtype=np.int64, count=len(row))
            tf = np.fromiter(row.values(), dtype=np.float64, count=len(row))
            got = self._arrays[term] = (ids, tf)
        return got

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(self.n, dtype=np.float32)
        if not self.n:
            return out
        lengths = self._lengths[: self.n]
        total = float(lengths.sum())
        avg = total / self.n if total else 1.0
        k1, b = self.k1, self.b
        for term in set(tokenize(query)):
            hit = self._posting(term)
            if hit is None:
                continue
            ids, tf = hit
            df = len(ids)
            idf = math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))
            norm = k1 * (1.0 - b + b * lengths[ids] / avg)
            out[ids] += (idf * tf * (k1 + 1.0) / (tf + norm)).astype(np.float32)
        return out


@dataclass
class _Shard:
    """One actor + namespace: the active records' ids, vectors and lexical index, row-aligned.

    Removal swaps the last row into the freed one, so every structure stays dense.
    """

    actor_id: str
    namespace: str
    dim: int
    ids: list[str] = field(default_factory=list)
    negated: list[bool] = field(default_factory=list)
    lexical: AppendableLexicalIndex = field(default_factory=AppendableLexicalIndex)
    row_of: dict[str, int] = field(default_factory=dict)
    by_norm: dict[str, list[str]] = field(default_factory=dict)  # normalised text sha -> ids
    norm_of: dict[str, str] = field(default_factory=dict)  # id -> normalised text sha
    fingerprint: Any = None
    checked_epoch: int = -1
    loaded_at: float = 0.0

    def __post_init__(self) -> None:
        self._buf = np.zeros((16, self.dim), dtype=np.float32)
        self._created = np.zeros(16, dtype=np.float64)  # POSIX seconds, row-aligned
        self._sum = np.zeros(self.dim, dtype=np.float64)  # running sum of the rows (centroid)

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def vectors(self) -> np.ndarray:
        return self._buf[: self.n]  # C-contiguous float32: rank() uses it without a copy

    @property
    def created(self) -> np.ndarray:
        return self._created[: self.n]

    @property
    def centroid(self) -> np.ndarray:
        """Mean of the rows, kept as a running sum: rank() need not recompute it per query."""
        return (self._sum / max(self.n, 1)).astype(np.float32)

    def exact(self, content: str) -> int | None:
        ids = self.by_norm.get(_norm_key(content))
        return self.row_of[ids[0]] if ids else None

    def append(
        self, rid: str, content: str, vector: np.ndarray, created: datetime | None = None
    ) -> None:
        if rid in self.row_of:
            self.remove(rid)
        row = self.n
        if row == len(self._buf):
            grown = np.zeros((2 * len(self._buf), self.dim), dtype=np.float32)
            grown[:row] = self._buf[:row]
            self._buf = grown
            self._created = np.concatenate([self._created, np.zeros_like(self._created)])
        self._buf[row] = vector
        self._created[row] = epoch_seconds(created) if created is not None else time.time()
        self._sum += self._buf[row]
        nsha = _norm_key(content)
        head = content[:ANALYSIS_WINDOW]  # bounded work per record, however large it is
        self.ids.append(rid)
        self.negated.append(negates(head))
        self.row_of[rid] = row
        self.by_norm.setdefault(nsha, []).append(rid)
        self.norm_of[rid] = nsha
        self.lexical.append(head)

    def remove(self, rid: str) -> bool:
        row = self.row_of.pop(rid, None)
        if row is None:
            return False
        last = self.n - 1
        self._sum -= self._buf[row]
        if last == 0:
            self._sum[:] = 0.0  # empty shard: no float drift carried over
        if row != last:
            self._buf[row] = self._buf[last]
            self._created[row] = self._created[last]
            self.ids[row] = self.ids[last]
            self.negated[row] = self.negated[last]
            self.row_of[self.ids[row]] = row
        self.ids.pop()
        self.negated.pop()
        self.lexical.remove(row)
        nsha = self.norm_of.pop(rid)
        same = self.by_norm[nsha]
        same.remove(rid)
        if not same:
            del self.by_norm[nsha]
        return True


# Text analysed per record in the online index (negation, BM25 terms): a record larger
# than this (imported before the content bound, or from a remote store) costs no more.
ANALYSIS_WINDOW = 64 * 1024


def _norm_key(content: str) -> str:
    """The exact-duplicate key: folded text, or the plain hash of an oversized text."""
    if len(content) > ANALYSIS_WINDOW:
        return "sha:" + content_sha256(content)
    return norm_sha256(content)


class RememberRefused(InputError):
    """``remember`` would store what it must not: ``code`` says why (ERASED_CONTENT,
    CONTENT_TOO_LARGE); the message never carries the content."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class LongTermMemory:
    """Remember and recall one store's memories, per actor (and namespace)."""

    def __init__(
        self,
        store: MemoryStore,
        *,
        embedder: Embedder | None = None,
        ledger: AccessLedger | None = None,
        cache: EmbeddingCache | None = None,
        near_duplicate: float = DEFAULT_NEAR_DUPLICATE,
        threshold: float = DEFAULT_THRESHOLD,
        refresh_seconds: float = 300.0,
        page_size: int = 1000,
        content_max_bytes: int = 64 * 1024,  # the policy's limits.content_max_bytes
        policy: Policy | None = None,
    ) -> None:
        self.store = store
        self.content_max_bytes = content_max_bytes
        # verification by source, subject inference, expiry (default policy when None)
        self.policy = policy if policy is not None else load_policy()
        self._embedder = embedder
        self.cache = cache or EmbeddingCache.for_store(store, embedder)
        self.ledger = ledger if ledger is not None else open_ledger(store=store)
        self.near_duplicate = near_duplicate
        self.threshold = threshold
        self.refresh_seconds = refresh_seconds
        self.page_size = page_size
        self.load_count = 0  # shard loads from the store (tests and metrics)
        self._shards: dict[tuple[str, str], _Shard] = {}
        self._namespaces: dict[str, tuple[int, set[str]]] = {}  # actor -> (epoch, names)
        self._lock = threading.RLock()
        self._epoch = 0
        self._seen_marker: Any = self._marker()

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = self.cache.embedder
        return self._embedder

    # -- staleness -------------------------------------------------------------------------
    def _sqlite(self) -> tuple[sqlite3.Connection, Any] | None:
        conn = getattr(self.store, "connection", None)
        if isinstance(conn, sqlite3.Connection):
            return conn, getattr(self.store, "lock", threading.RLock())
        return None

    def _marker(self) -> Any:
        """Changes whenever anything writes to the store's file (None: no cheap signal)."""
        sq = self._sqlite()
        if sq is None:
            return None
        conn, lock = sq
        with lock:
            return conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes

    def _check_marker(self) -> None:
        marker = self._marker()
        if marker != self._seen_marker:
            self._seen_marker = marker
            self._epoch += 1  # every shard re-checks its fingerprint on next use

    def _fingerprint(self, actor: str, namespace: str) -> Any:
        sq = self._sqlite()
        if sq is None:
            return None
        conn, lock = sq
        with lock:
            return conn.execute(
                "SELECT count(*), total(rowid), total(length(content)) "
                "FROM records WHERE actor_id=? AND status=? AND namespace=?",
                (actor, Status.active.value, namespace),
            ).fetchone()

    def _own_write(
        self, before: Any, shard: _Shard, added: MemoryRecord | None = None, same: bool = False
    ) -> None:
        """After our write: absorb it, unless someone else also wrote since we last looked.

        The shard's fingerprint is updated in place for the common writes (``same``: a
        refresh that changed no content or status; ``added``: one new active record) and
        recomputed otherwise.
        """
        if before != self._seen_marker or self._sqlite() is None:
            self._epoch += 1  # a foreign write slipped in: every shard re-checks
            return
        self._seen_marker = self._marker()
        fp = shard.fingerprint
        if same and fp is not None:
            pass
        elif added is not None and fp is not None:
            conn, lock = self._sqlite()  # type: ignore[misc]
            with lock:
                row = conn.execute("SELECT rowid FROM records WHERE id=?", (added.id,)).fetchone()
            shard.fingerprint = (fp[0] + 1, fp[1] + row[0], fp[2] + len(added.content))
        else:
            shard.fingerprint = self._fingerprint(shard.actor_id, shard.namespace)
        shard.checked_epoch = self._epoch

    # -- shards ----------------------------------------------------------------------------
    def _load(self, actor: str, namespace: str) -> _Shard:
        fingerprint = self._fingerprint(actor, namespace)
        records: list[MemoryRecord] = []
        for page in iter_shard(
            self.store, actor, namespace, page_size=self.page_size, statuses=_ACTIVE
        ):
            records += [r for r in page.records if r.status is Status.active]
        vectors = self.cache.get_or_embed(records) if records else None
        shard = _Shard(actor, namespace, self.embedder.dim)
        for i, r in enumerate(records):
            shard.append(r.id, r.content, vectors[i], r.created_at)  # type: ignore[index]
        shard.fingerprint = fingerprint
        shard.checked_epoch = self._epoch
        shard.loaded_at = time.monotonic()
        self.load_count += 1
        return shard

    def _shard(self, actor: str, namespace: str) -> _Shard:
        key = (actor, namespace)
        shard = self._shards.get(key)
        if shard is not None:
            if self._sqlite() is None:
                if time.monotonic() - shard.loaded_at < self.refresh_seconds:
                    return shard
            elif shard.checked_epoch == self._epoch:
                return shard
            elif self._fingerprint(actor, namespace) == shard.fingerprint:
                shard.checked_epoch = self._epoch
                return shard
        before = self._marker()
        shard = self._shards[key] = self._load(actor, namespace)
        if before == self._seen_marker:  # absorb the embedding cache's own writes
            self._seen_marker = self._marker()
        return shard

    def _actor_namespaces(self, actor: str) -> set[str]:
        got = self._namespaces.get(actor)
        if got is None or got[0] != self._epoch:
            got = (self._epoch, set(self.store.list_namespaces(actor)))
            self._namespaces[actor] = got
        return got[1]

    def invalidate(self, actor: str | None = None) -> None:
        """Forget the in-memory index of ``actor`` (every actor when None); reloaded on use."""
        with self._lock:
            for key in [k for k in self._shards if actor is None or k[0] == actor]:
                del self._shards[key]
            if actor is None:
                self._namespaces.clear()
            else:
                self._namespaces.pop(actor, None)

    # -- remember --------------------------------------------------------------------------
    def remember(
        self,
        actor: str,
        namespace: str,
        subject: str | None,
        fact: str,
        source: Source | str = Source.user_stated,
        memory_type: MemoryType | str = MemoryType.semantic,
        owner: str | None = None,
        *,
        confidence: float = 1.0,
        at: datetime | None = None,
    ) -> RememberResult:
        """Save ``fact`` for ``actor`` unless an active memory already says it.

        An exact duplicate (same normalised text) or a near duplicate (cosine >=
        ``near_duplicate`` and the same polarity: "drinks coffee" never refreshes "never
        drinks coffee") is refreshed instead: ``last_verified_at`` set, access count
        bumped, confidence raised to ``confidence`` if lower, a missing subject filled in.
        """
        fact = fact.strip()
        if not fact:
            raise ValueError("fact is blank")
        check_namespace(namespace)  # no '.', '..' or empty segments (globs must not be fooled)
        size = len(fact.encode("utf-8"))
        if size > self.content_max_bytes:
            raise RememberRefused(
                "CONTENT_TOO_LARGE",
                f"fact is {size} bytes, over the limit of {self.content_max_bytes}",
            )
        source, memory_type = Source(source), MemoryType(memory_type)
        now = at or utcnow()
        with self._lock:
            self._check_marker()
            shard = self._shard(actor, namespace)
            before = self._marker()
            while True:
                row = shard.exact(fact)
                if row is not None:
                    sim: float = 1.0
                    vector = None
                else:
                    vector = self.cache.get_or_embed_texts([fact])[0]
                    row, sim = self._nearest(shard, vector, negates(fact))
                    if sim < self.near_duplicate:
                        row = None
                if row is None:
                    break
                existing_id = shard.ids[row]
                refreshed = self._refresh(existing_id, subject, confidence, now, source)
                if refreshed:
                    if vector is not None:  # a vector of text we did not store: do not keep
                        self.cache.delete_for([content_sha256(fact)])
                    self._own_write(before, shard, same=True)
                    return RememberResult(existing_id, False, existing_id, sim)
                shard.remove(existing_id)  # no longer active in the store: look again

            record = MemoryRecord(
                id=new_memory_id(),
                actor_id=actor,
                namespace=namespace,
                memory_type=memory_type,
                content=fact,
                created_at=now,
                subject=subject,
                owner=owner,
                confidence=confidence,
                source=source,
                # verified at write only for sources the policy trusts (never agent inference)
                last_verified_at=now
                if source in self.policy.verification.verified_at_write
                else None,
                provenance=Provenance(
                    content_sha256=content_sha256(fact), source_event="memlife.online.remember"
                ),
            )
            if vector is None:
                vector = self.cache.get_or_embed_texts([fact])[0]
            inferred = (
                None if subject and subject.strip() else self._infer_subject(shard, fact, vector)
            )
            # insert-only, tombstones checked in the same transaction: erased text stays erased
            result = insert_new(self.store, [record])
            erased = [f for f in result.failed if f.code in (ERASED_CONTENT, ERASED_SOURCE)]
            if erased:
                if vector is not None:  # a vector of erased text: never kept
                    self.cache.delete_for([content_sha256(fact)])
                raise RememberRefused(erased[0].code, "this content was erased for the actor")
            if record.id not in result.succeeded:
                why = "; ".join(f"{f.code}: {f.message}" for f in result.failed) or "not stored"
                raise RuntimeError(f"remember: store refused record {record.id}: {why}")
            if inferred is not None:
                self.subjects.put(actor, namespace, {record.id: inferred}, "remember")
            shard.append(record.id, fact, vector, record.created_at)
            names = self._namespaces.get(actor)
            if names is not None:
                names[1].add(namespace)
            self._own_write(before, shard, added=record)
            return RememberResult(record.id, True, None, None)

    @property
    def subjects(self) -> InferredSubjects:
        got = self.__dict__.get("_subjects")
        if got is None:
            got = self.__dict__["_subjects"] = InferredSubjects.for_store(self.store)
        return got

    def _infer_subject(self, shard: _Shard, fact: str, vector: np.ndarray) -> str | None:
        """The inferred subject of the closest memory on the same topic, or a new key (the
        nightly run uses the same leader rule: group.infer_subjects). None: inference off."""
        cfg = self.policy.inference
        if not cfg.enabled:
            return None
        if shard.n:
            sims = shard.vectors @ vector.astype(np.float32)
            order = np.argsort(-sims)[:8]
            close = [shard.ids[int(i)] for i in order if sims[int(i)] >= cfg.topic_cosine]
            known = self.subjects.get(close) if close else {}
            for rid in close:  # closest first
                if rid in known:
                    return known[rid]
        tag = hashlib.sha256(f"{fact}\x1f{shard.n}\x1f{time.time_ns()}".encode()).hexdigest()[:6]
        return f"{subject_keywords(fact)} ~{tag}"

    @staticmethod
    def _nearest(shard: _Shard, vector: np.ndarray, negated: bool) -> tuple[int | None, float]:
        if shard.n == 0:
            return None, -1.0
        sims = shard.vectors @ vector.astype(np.float32)
        same = np.fromiter(shard.negated, dtype=bool, count=shard.n) == negated
        sims = np.where(same, sims, -np.inf)
        row = int(np.argmax(sims))
        return (row, float(sims[row])) if np.isfinite(sims[row]) else (None, -1.0)

    def _refresh(
        self, record_id: str, subject: str | None, confidence: float, now: datetime,
        source: Source = Source.user_stated,
    ) -> bool:  # fmt: skip
        rec = self.store.get(record_id)
        if rec is None or rec.status is not Status.active:
            return False
        if rec.retention_class is RetentionClass.legal_hold:
            # a held record is never rewritten (invariant 1): the access goes to the ledger
            self.ledger.append(rec.actor_id, rec.namespace, rec.id, at=now)
            return True
        update: dict[str, Any] = {
            "last_accessed_at": now,
            "access_count": rec.access_count + 1,
            "confidence": max(rec.confidence, confidence),
        }
        if source in self.policy.verification.verified_on_restatement:
            update["last_verified_at"] = now  # the user said it again: that verifies it
        if rec.subject is None and subject:
            update["subject"] = subject
        result = self.store.put_many([rec.model_copy(update=update)])
        return record_id in result.succeeded

    # -- status changes --------------------------------------------------------------------
    def set_status(
        self, record_ids: Sequence[str], status: Status | str, *, replaced_by: str | None = None
    ) -> list[str]:
        """Change status through the store and keep the index in step; returns ids changed."""
        status = Status(status)
        with self._lock:
            self._check_marker()
            before = self._marker()
            records = self._get_many(record_ids)
            result = self.store.set_status(list(record_ids), status, replaced_by=replaced_by)
            touched: set[tuple[str, str]] = set()
            for rid in result.succeeded:
                rec = records.get(rid)
                if rec is None:
                    continue
                key = (rec.actor_id, rec.namespace)
                shard = self._shards.get(key)
                if shard is None:
                    continue
                if status is Status.active and rid not in shard.row_of:
                    vec = self.cache.get_or_embed([rec])[0]
                    shard.append(rid, rec.content, vec, rec.created_at)
                elif status is not Status.active:
                    shard.remove(rid)
                touched.add(key)
            for key in touched:
                self._own_write(before, self._shards[key])
                before = self._seen_marker
            return list(result.succeeded)

    def forget(self, record_ids: Sequence[str]) -> list[str]:
        """Mark records ``pending_delete`` (the nightly job deletes them after the grace)."""
        return self.set_status(record_ids, Status.pending_delete)

    def _get_many(self, ids: Sequence[str]) -> dict[str, MemoryRecord]:
        get_many = getattr(self.store, "get_many", None)
        if get_many is not None:
            return dict(get_many(list(ids)))
        out = {}
        for rid in ids:
            rec = self.store.get(rid)
            if rec is not None:
                out[rid] = rec
        return out

    # -- recall ----------------------------------------------------------------------------
    def recall(
        self,
        actor: str,
        query: str,
        k: int = 5,
        namespace: str | None = None,
        threshold: float | None = None,
    ) -> list[Hit]:
        """Top ``k`` of ``actor``'s ACTIVE memories for ``query`` (all namespaces when None).

        Hits whose cosine is below ``threshold`` (default: the instance's) are never
        returned. Each returned hit is appended to the access ledger.
        """
        if k <= 0:
            raise ValueError("k must be positive")
        thr = self.threshold if threshold is None else threshold
        qv = self.embedder.embed([query])[0]
        with self._lock:
            self._check_marker()
            names = [namespace] if namespace is not None else sorted(self._actor_namespaces(actor))
            cands: list[tuple[float, float, str, str]] = []  # (score, sim, id, namespace)
            for ns in names:
                shard = self._shard(actor, ns)
                if shard.n == 0:
                    continue
                hits = rank(
                    qv,
                    shard.vectors,
                    k=k + 2,
                    threshold=thr,
                    query_text=query,
                    lexical=shard.lexical,  # type: ignore[arg-type]
                    centroid=shard.centroid,
                    created=shard.created,
                )
                cands += [
                    (float(s), float(c), shard.ids[int(i)], ns)
                    for i, s, c in zip(hits.indices, hits.scores, hits.similarities, strict=True)
                ]
            cands.sort(key=lambda c: -c[0])
            records = self._get_many([c[2] for c in cands])
            out: list[Hit] = []
            now = utcnow()
            for score, sim, rid, ns in cands:
                rec = records.get(rid)
                if rec is not None and self._expired(rec, now):
                    continue  # past its deadline: never returned, even before a run deletes it
                if rec is None or rec.status is not Status.active or rec.actor_id != actor:
                    shard = self._shards.get((actor, ns))
                    if shard is not None:
                        shard.remove(rid)  # changed behind our back: never returned
                    continue
                out.append(Hit(rec, score, len(out) + 1, sim))
                if len(out) == k:
                    break
        if out:
            qsha = query_sha256(query)
            now = utcnow()
            for h in out:
                self.ledger.append(
                    actor, h.record.namespace, h.record.id, rank=h.rank, query_sha256=qsha, at=now
                )
        return out

    def _expired(self, rec: MemoryRecord, now: datetime) -> bool:
        if rec.expires_at is not None:
            return rec.expires_at <= now
        ttl = self.policy.memory_types[rec.memory_type].default_ttl_days
        return ttl is not None and (now - rec.created_at).total_seconds() >= ttl * 86400

    def close(self) -> None:
        self.ledger.flush()

    def __enter__(self) -> LongTermMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def default_namespace(actor: str) -> str:
    """Where the CLI and the example agent put memories without an explicit namespace."""
    return settings().namespace.replace("{actor}", actor)
