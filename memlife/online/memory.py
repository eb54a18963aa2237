"""Long-term memory for an agent: remember (with duplicate refresh) and recall (hybrid).

Per actor + namespace a :class:`memlife.online.index.ShardIndex` holds the ACTIVE
records' ids, vectors and an appendable BM25 index. A shard is loaded lazily from the
store (vectors from the embedding cache) on first use and then kept in step with writes
made through this object: ``remember`` appends a row, ``set_status`` (and a recall that
meets a record no longer active) drops one. Nothing is rebuilt per query; ranking is
:func:`memlife.retrieval.rank_sets`, the function the gate's shadow recall uses too.

Staleness (the nightly job or another process changed the store): a store with a
:class:`memlife.stores.base.ChangeSignal` (SQLite: ``PRAGMA data_version`` plus the
connection's ``total_changes``) says per call whether anyone else wrote since we last
looked; only then is the shard's fingerprint (count, rowid sum, content length and a text
checksum of its active rows, one indexed query) compared and the shard reloaded if it
moved. A row we add or drop moves the shard's fingerprint by that record's share (so a
record made active again elsewhere never matches a fingerprint as loaded); a marker that
moved during our own write by more than it explains is another's write. An exact
duplicate is also re-checked against the record as stored before it is refreshed, and SQLite refuses a second active copy of one text in the insert itself
(two processes remembering one fact at once). Other
stores have no cheap change signal: their shards are reloaded after
``refresh_seconds``. Independently, each recall re-reads its hits from the store and
drops any that is no longer active, so a stale shard can rank a record but can never
return it.

Recall without a namespace ranks the actor's namespaces as one set (``rank_sets``: one
centroid, one BM25, one pool for token alignment and context), each shard scoring its own
rows.

Why one module (over 500 lines): remember, set_status and recall all keep the same shard
indexes in step with the store under one lock; split, each would need the others' locking.
"""

from __future__ import annotations

import hashlib
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import numpy as np

from memlife.backends import embedding_cache, open_ledger
from memlife.embed import Embedder, embed_for_recall
from memlife.embed_cache import EmbeddingCache
from memlife.erase_sweep import sweep_after_write
from memlife.errors import InputError
from memlife.group import subject_keywords
from memlife.inferred import InferredSubjects
from memlife.ledger import AccessLedger, query_sha256
from memlife.model import (
    MemoryRecord,
    MemoryType,
    Provenance,
    RetentionClass,
    Source,
    Status,
    content_sha256,
    days_after,
    new_memory_id,
    utcnow,
)
from memlife.online.index import ShardIndex, norm_key
from memlife.online.inputs import (
    actor_arg,
    at_arg,
    choice_arg,
    cosine_arg,
    ids_arg,
    label_arg,
    namespace_arg,
    namespace_filter_arg,
    number_in,
    record_id_arg,
    shown,
    stored_time,
    text_arg,
)
from memlife.policy import Policy, load_policy
from memlife.restate import restates
from memlife.retrieval import DEFAULT_THRESHOLD, rank_sets
from memlife.settings import settings
from memlife.stores.base import BatchResult, ChangeSignal, MemoryStore, iter_shard
from memlife.stores.sqlite import DUPLICATE_ACTIVE, Refresh, SqliteStore
from memlife.text import invisible, negates
from memlife.token_match import TokenCodes
from memlife.tombstones import ERASED_CONTENT, ERASED_SOURCE, insert_new

DEFAULT_NEAR_DUPLICATE = 0.9
WARM_CHUNK = 1024  # records embedded and stored at a time by warm()
_ACTIVE = (Status.active,)


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
        content_max_bytes: int | None = None,  # None: the policy's limits.content_max_bytes
        policy: Policy | None = None,
        token_alignment: bool | None = None,  # None: settings().token_alignment
    ) -> None:
        _check_options(store, refresh_seconds, page_size, content_max_bytes, token_alignment)
        # cosines: 5 would return nothing, ever, and "x" fail only at the first remember
        near_duplicate = cosine_arg(near_duplicate, "near_duplicate")
        threshold = cosine_arg(threshold, "threshold")
        self.store = store
        self.token_alignment = (
            settings().token_alignment if token_alignment is None else token_alignment
        )
        # verification by source, subject inference, expiry (default policy when None)
        self.policy = policy if policy is not None else load_policy()
        # the bound on a fact (and on a query): what import accepts, the policy's
        self.content_max_bytes = (
            content_max_bytes
            if content_max_bytes is not None
            else self.policy.limits.content_max_bytes
        )
        self._embedder = embedder
        self.cache = cache if cache is not None else embedding_cache(store, embedder)
        self.ledger = ledger if ledger is not None else open_ledger(store=store)
        self.ledger.watch_erasures(store)  # a buffered access outlives no erasure
        self._watching = True  # given back once, at close: another Memory's watch stays
        self.near_duplicate = near_duplicate
        self.threshold = threshold
        self.refresh_seconds = refresh_seconds
        self.page_size = page_size
        self.load_count = 0  # shard loads from the store (tests and metrics)
        self._shards: dict[tuple[str, str], ShardIndex] = {}
        # actor -> (epoch, names, when read): on a store without a change signal the list is
        # read again after refresh_seconds, as a shard is (another writer's new namespace)
        self._namespaces: dict[str, tuple[int, set[str], float]] = {}
        self._lock = _store_lock(store)  # one per store object: see _store_lock
        self._epoch = 0
        self._seen_marker: Any = self._marker()

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = self.cache.embedder
        return self._embedder

    # -- staleness -------------------------------------------------------------------------
    def _signal(self) -> ChangeSignal | None:
        return self.store if isinstance(self.store, ChangeSignal) else None

    def _marker(self) -> Any:
        """Changes whenever anything writes to the store (None: no cheap signal)."""
        sig = self._signal()
        return None if sig is None else sig.change_marker()

    def _check_marker(self) -> None:
        marker = self._marker()
        if marker != self._seen_marker:
            self._seen_marker = marker
            self._epoch += 1  # every shard re-checks its fingerprint on next use

    def _fingerprint(self, actor: str, namespace: str) -> Any:
        sig = self._signal()
        return None if sig is None else sig.shard_fingerprint(actor, namespace)

    def _share(self, record_id: str) -> tuple[float, ...] | None:
        """One record's share of its shard's fingerprint, whatever its status (None: gone)."""
        sig = self._signal()
        return None if sig is None else sig.record_fingerprint(record_id)

    def _foreign(self, before: Any, after: Any) -> bool:
        """Whether the marker moved from ``before`` to ``after`` by more than our own
        writes can explain. SQLite: ``data_version`` moves only for other connections'
        commits (ours move ``total_changes``). Any other store's marker moves for ours too:
        there, any move counts (the shards re-check their fingerprints, no more)."""
        if isinstance(self.store, SqliteStore) and isinstance(before, tuple):
            return bool(before[0] != after[0])  # (data_version, total_changes)
        return bool(before != after)

    def _own_write(self, before: Any) -> None:
        """After our write (``before``: the marker read before it), whose rows the shards
        already hold and whose shares their fingerprints already carry (``shift``,
        ``drop``): take the marker as seen. If anyone else wrote since we last looked,
        before or during our write, every shard re-checks its fingerprint on next use
        (that finds the other's rows: ours alone are in it) and the next insert runs
        SQLite's duplicate scan (its ``seen_version`` is not the store's)."""
        after = self._marker()
        if self._signal() is None or before != self._seen_marker or self._foreign(before, after):
            self._epoch += 1  # a foreign write slipped in: every shard re-checks
        self._seen_marker = after

    # -- shards ----------------------------------------------------------------------------
    def _load(self, actor: str, namespace: str) -> ShardIndex:
        started = utcnow()
        fingerprint = self._fingerprint(actor, namespace)
        records: list[MemoryRecord] = []
        for page in iter_shard(
            self.store, actor, namespace, page_size=self.page_size, statuses=_ACTIVE
        ):
            records += [r for r in page.records if r.status is Status.active]
        shard = ShardIndex(actor, namespace, self.embedder.dim, codes_source=self._token_codes)
        if records:
            vectors = self._embed_loaded(actor, records, started)
            for i, r in enumerate(records):
                shard.append(r.id, r.content, vectors[i], r.created_at)
        shard.coarse()  # a large shard builds its sign codes with the load, not in a query
        shard.fingerprint = fingerprint
        shard.checked_epoch = self._epoch
        shard.loaded_at = time.monotonic()
        self.load_count += 1
        return shard

    def _embed_loaded(
        self, actor: str, records: Sequence[MemoryRecord], started: datetime
    ) -> np.ndarray:
        """Vectors of a loaded shard's records. Records read without vectors are embedded
        and stored (unless another connection holds the write lock: then they are served
        from memory, and a later load or ``memlife warm`` stores them); an erasure
        committed since the read would have its content's vector and codes back in the
        cache, so: write, then look for its tombstone (erase_sweep).
        An expired record (never served, deleted by the next night, which leaves no
        tombstone) is embedded in memory only: stored, it could outlive that delete. Other
        records are looked up again after a write (_forget_if_removed)."""
        now = utcnow()
        expired = [self.expired(r, now) for r in records]
        vectors = np.zeros((len(records), self.embedder.dim), np.float32)
        live = [i for i, e in enumerate(expired) if not e]
        gone = [i for i, e in enumerate(expired) if e]
        misses, unstored = self.cache.stats.misses, self.cache.stats.unstored
        if live:  # never behind a writer: a held write lock leaves them in memory only
            vectors[live] = self.cache.get_or_embed([records[i] for i in live], wait=False)
        stored = (self.cache.stats.misses - misses) - (self.cache.stats.unstored - unstored)
        if stored:  # nothing stored, nothing to clean up: no write that would wait
            sweep_after_write(self.store, self.cache, [actor], started)
            self._forget_if_removed(actor, [records[i] for i in live])
        if gone:
            vectors[gone] = self.cache.get_or_embed([records[i] for i in gone], store=False)
        return vectors

    def warm(self, actor: str, namespace: str) -> tuple[int, int]:
        """Embed and store what this shard's active records lack: their vectors and token
        codes (``memlife warm``, after an upgrade that added codes, a model change or an
        import that did not embed), so neither the first recall nor the next night pays
        for it: recall computes missing codes in memory only, in every process. Returns
        (records read, contents embedded). Expired records are left to the night that
        deletes them. A removal racing the write is handled as a shard load handles it."""
        started = utcnow()
        records = [
            r
            for page in iter_shard(
                self.store, actor, namespace, page_size=self.page_size, statuses=_ACTIVE
            )
            for r in page.records
            if r.status is Status.active and not self.expired(r, started)
        ]
        misses = self.cache.stats.misses
        for i in range(0, len(records), WARM_CHUNK):  # codes of long memories add up
            chunk = records[i : i + WARM_CHUNK]
            self.cache.get_or_embed(chunk)  # missing vectors (their codes come with them)
            self.cache.token_codes([r.content for r in chunk])  # codes missing beside a vector
        embedded = self.cache.stats.misses - misses
        if embedded:
            sweep_after_write(self.store, self.cache, [actor], started)
            self._forget_if_removed(actor, records)
        return len(records), embedded

    def _forget_if_removed(self, actor: str, records: Sequence[MemoryRecord]) -> None:
        """A delete committed since the load's read (a person's, the nightly run's) leaves
        no tombstone for the sweep: after the write, look again, and drop the vectors of
        records no longer there as read, unless another record of the actor holds the text."""
        now = self._get_many([r.id for r in records])
        left = {
            content_sha256(r.content)
            for r in records
            if (c := now.get(r.id)) is None or (c.actor_id, c.content) != (actor, r.content)
        }
        held = getattr(self.store, "contents_held", None)
        if left and held is not None:
            left -= held(actor, left)
        if left:
            self.cache.delete_for(left)

    def _token_codes(self, ids: Sequence[str]) -> list[TokenCodes | None] | None:
        """Token codes of these records (stored with their vectors; a record embedded before
        codes existed gets them computed here, in memory, never written: recall does not
        write), what recall's token alignment reads for the candidates it reorders."""
        records = self._get_many(ids)
        texts = [records[i].content if i in records else None for i in ids]
        known = [t for t in texts if t is not None]
        codes = self.cache.token_codes(known, store=False) if known else []
        if codes is None:
            return None
        it = iter(codes)
        return [next(it) if t is not None else None for t in texts]

    def _shard(self, actor: str, namespace: str) -> ShardIndex:
        key = (actor, namespace)
        shard = self._shards.get(key)
        if shard is not None:
            if self._signal() is None:
                if time.monotonic() - shard.loaded_at < self.refresh_seconds:
                    return shard
            elif shard.checked_epoch == self._epoch:
                return shard
            elif self._fingerprint(actor, namespace) == shard.fingerprint:
                shard.checked_epoch = self._epoch
                return shard
        before = self._marker()
        shard = self._shards[key] = self._load(actor, namespace)
        self._absorb(before)  # the embedding cache's own writes, never another's
        return shard

    def _absorb(self, before: Any) -> bool:
        """Take the marker as seen after a write of ours that changed no record (the
        embedding cache's), if nobody had written before it: under the store's lock no
        other Memory of this process writes meanwhile, and another process moves
        ``data_version`` (``_foreign``). True: absorbed."""
        after = self._marker()
        if before == self._seen_marker and not self._foreign(before, after):
            self._seen_marker = after
            return True
        return False

    def _embed_own(self, fact: str, before: Any) -> tuple[np.ndarray, Any]:
        """The fact's vector (the cache may store it), and the marker ``remember`` goes on
        from: the cache's write absorbed, so the insert's duplicate scan is still skipped."""
        mark = self._marker()
        vector = self.cache.get_or_embed_texts([fact])[0]
        return vector, (self._seen_marker if self._absorb(mark) else before)

    def _actor_namespaces(self, actor: str) -> set[str]:
        got = self._namespaces.get(actor)
        if (
            got is None
            or got[0] != self._epoch
            or (self._signal() is None and time.monotonic() - got[2] >= self.refresh_seconds)
        ):
            got = (self._epoch, set(self.store.list_namespaces(actor)), time.monotonic())
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
        The refreshed record keeps the longer of two lifetimes: its own, and the one a new
        record of ``memory_type`` would have (that type's TTL from ``at``; none: never
        expires). An episodic record restated as semantic becomes semantic and loses its
        expiry; one restated as episodic expires no sooner than a new episodic record would.
        """
        fact = text_arg(fact, "fact").strip()
        if not fact or all(invisible(ch) for ch in fact):  # a zero-width space, a NUL: blank
            raise InputError("fact is blank")
        actor_arg(actor)
        # at most LABEL_MAX_CHARS; one nobody can see (blank, zero-width) is None
        subject = label_arg(subject, "subject")
        owner = label_arg(owner, "owner")
        # checked here, not only by the model: a duplicate is refreshed without building one
        if not number_in(confidence, 0, 1):
            raise InputError(f"confidence must be a number from 0 to 1, not {shown(confidence)}")
        namespace_arg(namespace)  # no '.', '..' or empty segments (globs must not be fooled)
        size = len(fact.encode("utf-8"))
        if size > self.content_max_bytes:
            raise RememberRefused(
                "CONTENT_TOO_LARGE",
                f"fact is {size} bytes, over the limit of {self.content_max_bytes}",
            )
        source = choice_arg(Source, source, "source")
        memory_type = choice_arg(MemoryType, memory_type, "memory_type")
        # aware, in UTC: the refresh writes it unvalidated (model_copy), so a naive time
        # would be stored and every later comparison with it would fail
        now = at_arg(at) or utcnow()
        with self._lock:
            self._check_marker()
            shard = self._shard(actor, namespace)
            before = self._marker()
            key = norm_key(fact)
            reloads = 0
            while True:
                row = shard.exact(fact)
                if row is not None:
                    sim: float = 1.0
                    vector = None
                else:
                    vector, before = self._embed_own(fact, before)
                    row, sim = self._nearest(shard, vector, negates(fact))
                    if sim < self.near_duplicate:
                        row = None
                if row is None:
                    break
                existing_id = shard.ids[row]
                compared: str | None = None  # the hash of the words restates() read
                if vector is not None:
                    same, compared = self._restated(existing_id, fact, (actor, namespace))
                    if not same:
                        break  # close in meaning but saying other words: a new memory
                refreshed = self._refresh(
                    existing_id,
                    subject,
                    confidence,
                    now,
                    source,
                    key=key if vector is None else None,
                    memory_type=memory_type,
                    compared=compared,
                    scope=(actor, namespace),
                )
                if refreshed is None:
                    # the index's text of that row is stale (rewritten elsewhere): reload it;
                    # never call a fact a duplicate of a record that no longer says it
                    reloads += 1
                    if reloads > 2:
                        shard.drop(existing_id, self._share(existing_id))
                        continue
                    del self._shards[(actor, namespace)]
                    shard = self._shard(actor, namespace)
                    continue
                if refreshed:
                    if vector is not None:  # a vector of text we did not store: do not keep
                        self.cache.delete_for([content_sha256(fact)])
                    self._own_write(before)  # no content or status changed
                    return RememberResult(existing_id, False, existing_id, sim)
                # no longer active in the store: look again
                shard.drop(existing_id, self._share(existing_id))

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
                vector, before = self._embed_own(fact, before)
            inferred = (
                None if subject and subject.strip() else self._infer_subject(shard, fact, vector)
            )
            # insert-only, tombstones checked in the same transaction: erased text stays erased
            result = self._insert(record)
            dup = [f for f in result.failed if f.code == DUPLICATE_ACTIVE]
            if dup:  # another process stored the same text since our index looked
                self._epoch += 1  # its write: every shard re-checks
                existing_id = dup[0].message
                if self._refresh(
                    existing_id, subject, confidence, now, source, key=key,
                    memory_type=memory_type, scope=(actor, namespace),
                ):  # fmt: skip
                    if content_sha256(fact) not in self._hashes(existing_id):
                        self.cache.delete_for([content_sha256(fact)])
                    return RememberResult(existing_id, False, existing_id, 1.0)
                # gone again already: insert (the check runs again in that transaction)
                result = self._insert(record, unique=False)
            erased = [f for f in result.failed if f.code in (ERASED_CONTENT, ERASED_SOURCE)]
            if erased:
                if vector is not None:  # a vector of erased text: never kept
                    self.cache.delete_for([content_sha256(fact)])
                raise RememberRefused(erased[0].code, "this content was erased for the actor")
            if record.id not in result.succeeded:
                why = "; ".join(f"{f.code}: {f.message}" for f in result.failed) or "not stored"
                raise RuntimeError(f"remember: store refused record {record.id}: {why}")
            if inferred is not None and not self._put_subject(record, inferred):
                self._epoch += 1  # removed by another writer already: every shard re-checks
                return RememberResult(record.id, True, None, None)
            shard.append(record.id, fact, vector, record.created_at)
            shard.shift(self._share(record.id))
            names = self._namespaces.get(actor)
            if names is not None:
                names[1].add(namespace)
            self._own_write(before)
            return RememberResult(record.id, True, None, None)

    def _put_subject(self, record: MemoryRecord, inferred: str) -> bool:
        """Write the new record's inferred subject key (a few of its words), then look at the
        record again: an erasure (or a delete) committed since the insert has already
        forgotten the keys it knew, so a key written after it would keep erased words for
        good. Write, then look (as erase_sweep): either the removal's own cleanup comes
        after our write, or the record is already gone here and the key goes with it.
        False: the record is gone (or no longer the text we stored)."""
        shard = (record.actor_id, record.namespace)
        self.subjects.put(record.actor_id, record.namespace, {record.id: inferred}, "remember")
        now = self.store.get(record.id)
        if now is not None and (now.actor_id, now.namespace, now.content) == (
            *shard,
            record.content,
        ):
            return True
        self.subjects.forget_removed(shard, {record.id: record.content})
        return False

    def _insert(self, record: MemoryRecord, *, unique: bool = True) -> BatchResult:
        """Insert-only; in SQLite also refused (DUPLICATE_ACTIVE) when an active record of
        the shard already holds the same folded text, checked in the insert's transaction.
        Other stores have no such transaction: the index's check above is all they get."""
        if isinstance(self.store, SqliteStore):
            # the marker our index was checked against: while nobody has written since
            # (another connection's commit, or another Memory's on this one), the index's
            # answer stands and SQLite skips its scan of the shard
            seen = self._seen_marker if isinstance(self._seen_marker, tuple) else None
            return self.store.insert_new([record], unique_active=unique, seen_version=seen)
        return insert_new(self.store, [record])

    def _hashes(self, record_id: str) -> set[str]:
        rec = self.store.get(record_id)
        return set() if rec is None else {rec.sha256, content_sha256(rec.content)}

    @property
    def subjects(self) -> InferredSubjects:
        got = self.__dict__.get("_subjects")
        if got is None:
            got = self.__dict__["_subjects"] = InferredSubjects.for_store(self.store)
        return got

    def _infer_subject(self, shard: ShardIndex, fact: str, vector: np.ndarray) -> str | None:
        """The inferred subject of the closest memory on the same topic, or a new key (the
        nightly run uses the same leader rule: group.infer_subjects). None: inference off."""
        cfg = self.policy.inference
        if not cfg.enabled:
            return None
        if shard.n:
            sims = shard.vectors @ vector.astype(np.float32)
            order = np.argsort(-sims)[:8]
            close = [shard.ids[int(i)] for i in order if sims[int(i)] >= cfg.topic_cosine]
            known = self.subjects.get((shard.actor_id, shard.namespace), close) if close else {}
            for rid in close:  # closest first
                if rid in known:
                    return known[rid]
        tag = hashlib.sha256(f"{fact}\x1f{shard.n}\x1f{time.time_ns()}".encode()).hexdigest()[:6]
        return f"{subject_keywords(fact)} ~{tag}"

    @staticmethod
    def _nearest(shard: ShardIndex, vector: np.ndarray, negated: bool) -> tuple[int | None, float]:
        if shard.n == 0:
            return None, -1.0
        sims = shard.vectors @ vector.astype(np.float32)
        same = np.fromiter(shard.negated, dtype=bool, count=shard.n) == negated
        sims = np.where(same, sims, -np.inf)
        row = int(np.argmax(sims))
        return (row, float(sims[row])) if np.isfinite(sims[row]) else (None, -1.0)

    def _restated(
        self, record_id: str, fact: str, scope: tuple[str, str]
    ) -> tuple[bool, str | None]:
        """Whether the record says the same words as ``fact``, and the hash of the text
        compared. A near duplicate refreshes only a record that says the same words:
        "allergic to 3 medications" must not confirm "2 medications" (memlife/restate.py).
        A record gone meanwhile counts as restated: the refresh then finds it gone and
        looks again; so does a record no longer in ``scope`` (actor, namespace): another
        actor's record that took the id over is not this shard's."""
        rec = self.store.get(record_id)
        if rec is None or (rec.actor_id, rec.namespace) != scope:
            return True, None
        return restates(rec.content, fact), rec.sha256

    def _refresh(
        self, record_id: str, subject: str | None, confidence: float, now: datetime,
        source: Source = Source.user_stated, *, key: str | None = None,
        memory_type: MemoryType = MemoryType.semantic, compared: str | None = None,
        scope: tuple[str, str] | None = None,
    ) -> bool | None:  # fmt: skip
        """True: refreshed. False: gone, no longer active, or no longer the text
        ``compared`` (a near duplicate's hash as :meth:`_restated` read it): look again.
        None: the record no longer has the exact-duplicate ``key`` (its text was changed
        elsewhere).

        The store changes only what a refresh changes, from the row as it is then (SQLite:
        one conditional UPDATE, ``access_count + 1``): a concurrent refresh's access or
        another writer's expiry is never written back from this read. A lifetime change
        (:meth:`_relife`) is written only while the row's lifetime is still the one read:
        else read again (a few times), so it is never lost to a concurrent change."""
        read_sha = compared  # a near duplicate's text as compared (key is None)
        for _ in range(3):
            rec = self.store.get(record_id)
            if rec is None or rec.status is not Status.active or self.expired(rec, now):
                return False  # an expired record is never served: the fact is stored anew
            if scope is not None and (rec.actor_id, rec.namespace) != scope:
                return False  # the id is another actor's (or namespace's) record now: not ours
            if key is not None and norm_key(rec.content) != key:
                return None  # checked on the read the conditional write below is tied to
            if key is None and read_sha not in (None, rec.sha256):
                return False  # rewritten since its words were compared (_restated): look again
            read_sha = rec.sha256
            if rec.retention_class is RetentionClass.legal_hold:
                # a held record is never rewritten (invariant 1): the access goes to the ledger
                self.ledger.append(rec.actor_id, rec.namespace, rec.id, at=now)
                return True
            change = Refresh(
                at=now,
                confidence=confidence,
                subject=subject or None,
                # said again by a source the policy trusts: verified
                verify=source in self.policy.verification.verified_on_restatement,
            )
            relife = self._relife(rec, memory_type, now)
            if relife is not None:
                change = replace(
                    change,
                    memory_type=relife[0],
                    expires_at=relife[1],
                    was_type=rec.memory_type,
                    was_expires_at=rec.expires_at,
                )
            refresh = getattr(self.store, "refresh_active", None)
            if refresh is None:  # stores without one: a read-modify-write, last writer wins
                result = self.store.put_many([_refreshed(rec, change)])
                return record_id in result.succeeded
            if refresh(record_id, rec.sha256, change, scope=scope):
                return True
            # not written: deleted, erased, held or rewritten since the read, or (a lifetime
            # change) its expiry changed: read again
        return False

    def _relife(
        self, rec: MemoryRecord, memory_type: MemoryType, now: datetime
    ) -> tuple[MemoryType, datetime | None] | None:
        """The lifetime a duplicate's refresh gives ``rec`` (memory_type, expires_at), or None
        to keep its own. A restatement is never thrown away before a new record of the
        ``memory_type`` asked for would be (that type's TTL from ``now``; a type without
        one, never): "allergic to penicillin" saved as semantic must not vanish with the
        year-old episodic record of the same words. The later deadline wins; a record's
        type changes only when its own type's TTL would otherwise end it (an episodic
        record restated as semantic becomes semantic; a procedural one keeps its type)."""
        old = self._deadline(rec.memory_type, rec.created_at, rec.expires_at)
        new = self._deadline(memory_type, now, None)
        if old is None:
            return None  # never expires: nothing lives longer
        if new is None:
            own_ttl = self.policy.memory_types[rec.memory_type].default_ttl_days
            return (rec.memory_type if own_ttl is None else memory_type), None
        return (rec.memory_type, new) if new > old else None

    def _deadline(
        self, memory_type: MemoryType, created_at: datetime, expires_at: datetime | None
    ) -> datetime | None:
        """When a record expires (as :meth:`expired` reads it); None: never."""
        if expires_at is not None:
            return stored_time(expires_at)
        ttl = self.policy.memory_types[memory_type].default_ttl_days
        # past the calendar (a statement dated 9999): its last instant, never an OverflowError
        return None if ttl is None else days_after(stored_time(created_at), ttl)

    # -- status changes --------------------------------------------------------------------
    def set_status(
        self,
        record_ids: Sequence[str],
        status: Status | str,
        *,
        replaced_by: str | None = None,
        actor: str | None = None,
    ) -> list[str]:
        """Change status through the store and keep the index in step; returns ids changed.
        A held record (legal_hold, retained) is never changed from here (invariant 1): not
        forgotten, superseded or quarantined, nor made active again (that drops its
        replacement and writes no receipt; a release is `memlife hold release`). ``actor``:
        only that actor's records, checked again at the write (SQLite: in its transaction)."""
        status = choice_arg(Status, status, "status")
        record_ids = ids_arg(record_ids, "record_ids")
        replaced_by = record_id_arg(replaced_by, "replaced_by", optional=True)
        if status is Status.retained:
            # a hold is a receipted run (`memlife hold place`): written here it would pin a
            # record with no evidence, and nothing here could release it
            raise InputError("status 'retained' is a hold: place it with `memlife hold place`")
        if (status is Status.superseded) != (replaced_by is not None):
            raise InputError("replaced_by names the replacement of a superseded record, and "
                             "only of one")  # fmt: skip
        with self._lock:
            self._check_marker()
            before = self._marker()
            started = utcnow()  # before the write: an erasure after it is swept below
            records = self._get_many(record_ids)
            record_ids = [i for i in record_ids if i not in records or not records[i].held]
            if actor is not None:
                record_ids = [
                    i for i in record_ids if i in records and records[i].actor_id == actor
                ]
            if replaced_by is not None:
                _check_replacement(self.store.get(replaced_by), replaced_by, records.values())
            # the check again at the write, in its transaction: a hold placed since the read
            # wins (SQLite); other stores check, then write
            result = self._write_status(list(record_ids), status, replaced_by, actor)
            touched: dict[tuple[str, str], ShardIndex] = {}
            back: dict[tuple[str, str], list[MemoryRecord]] = {}
            for rid in result.succeeded:
                rec = records.get(rid)
                if rec is None:
                    continue
                key = (rec.actor_id, rec.namespace)
                shard = self._shards.get(key)
                if shard is None:
                    continue
                if status is Status.active and rid not in shard.row_of:
                    back.setdefault(key, []).append(rec)
                elif status is not Status.active:
                    shard.drop(rid, self._share(rid))
                touched[key] = shard
            for key, recs in back.items():
                # embedded after the write: an erasure committed since would have its text's
                # vector and codes stored again, so the shard load's guard (sweep, re-read)
                vectors = self._embed_loaded(key[0], recs, started)
                for rec, vec in zip(recs, vectors, strict=True):
                    touched[key].append(rec.id, rec.content, vec, rec.created_at)
                    touched[key].shift(self._share(rec.id))
            if status is Status.superseded and result.succeeded:
                self._hand_over(result.succeeded, records, replaced_by)
            self._own_write(before)
            return list(dict.fromkeys(result.succeeded))  # each id once

    def _hand_over(
        self, ids: Sequence[str], records: dict[str, MemoryRecord], to: str | None
    ) -> None:
        """Superseded records that pointed to a record superseded here now point to its
        replacement, as the night's and a reviewer's hand-over do (status._repoint): a
        superseded record never points to a superseded one. A quarantined one moves too
        (a restore puts it back under its replacement). Each keeps its status and its
        status time: a move is no new supersede (superseded retention counts from that
        time). Held ones stay as they are."""
        from memlife.orphans import pointing_to

        targets = {i: (records[i].actor_id, records[i].namespace) for i in ids if i in records}
        found = self._get_many(sorted(set(pointing_to(self.store, targets)) - {to}))
        moves: dict[tuple[Status, datetime | None], list[str]] = {}
        for i, r in sorted(found.items()):
            if r.status in (Status.superseded, Status.quarantined) and not r.held:
                moves.setdefault((r.status, r.status_changed_at), []).append(i)
        for (status, at), followers in moves.items():
            self._write_status(followers, status, to, at=at)

    def _write_status(
        self, ids: list[str], status: Status, replaced_by: str | None, actor: str | None = None,
        at: datetime | None = None,
    ) -> Any:  # fmt: skip
        """The status write, with the hold (and ``actor``) check in its transaction where the
        store has one (SQLite: a hold placed since the read wins); other stores check, then
        write. ``at``: the status time to keep (a hand-over), else now."""
        guarded = getattr(self.store, "set_status_unless_held", None)
        if guarded is None:
            return self.store.set_status(ids, status, replaced_by=replaced_by, at=at)
        return guarded(ids, status, replaced_by=replaced_by, actor=actor, at=at)

    def forget(self, record_ids: Sequence[str], actor: str | None = None) -> list[str]:
        """Mark records ``pending_delete`` (the nightly job deletes them after the grace);
        ``actor``: only that actor's, checked again at the write."""
        return self.set_status(record_ids, Status.pending_delete, actor=actor)

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
        *,
        log: bool = True,
    ) -> list[Hit]:
        """Top ``k`` of ``actor``'s ACTIVE memories for ``query`` (all namespaces when None).

        Hits whose cosine is below ``threshold`` (default: the instance's) are never
        returned. Each returned hit is appended to the access ledger, unless ``log`` is
        False: a caller that returns only some hits (a filtered, paged search) logs those.
        """
        actor_arg(actor)
        size = len(text_arg(query, "query").encode("utf-8"))
        if size > self.content_max_bytes:  # the lexical and date terms read all of it
            raise InputError(f"query is {size} bytes, over the limit of {self.content_max_bytes}")
        if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
            raise InputError(f"k must be a positive whole number, not {shown(k)}")
        if threshold is not None and not number_in(threshold, -1, 1):
            raise InputError(f"threshold must be a cosine from -1 to 1, not {shown(threshold)}")
        if namespace is not None:  # as remember's, or one of the actor's stored without '/'
            namespace_filter_arg(namespace, lambda: self.store.list_namespaces(actor))
        thr = self.threshold if threshold is None else threshold
        qv, tokens = embed_for_recall(self.embedder, query, self.token_alignment)
        with self._lock:
            self._check_marker()
            names = [namespace] if namespace is not None else sorted(self._actor_namespaces(actor))
            shards = [self._shard(actor, ns) for ns in names]
            out: list[Hit] = []
            now = utcnow()
            want = k + 2
            while True:
                # hits past their deadline stay in the shard until a run deletes them: when
                # they fill the list, look further (a wider list, ranked the same way)
                cands = rank_sets(qv, query, shards, k=want, threshold=thr, query_tokens=tokens)
                records = self._get_many([c.id for c in cands])
                out = []
                for c in cands:
                    rid = c.id
                    rec = records.get(rid)
                    if rec is not None and self.expired(rec, now):
                        continue  # past its deadline: never returned, even before a run deletes it
                    # another actor's record under a reused id, or the record moved to another
                    # namespace: not what this shard ranked
                    if (
                        rec is None
                        or rec.status is not Status.active
                        or (rec.actor_id, rec.namespace) != (actor, shards[c.which].namespace)
                    ):
                        # changed behind our back: never returned, and its share leaves the
                        # fingerprint (made active again elsewhere, it no longer matches)
                        shards[c.which].drop(rid, None if rec is None else self._share(rid))
                        continue
                    out.append(Hit(rec, c.score, len(out) + 1, c.similarity))
                    if len(out) == k:
                        break
                if len(out) == k or len(cands) < want:
                    break
                want *= 4
        if out and log:
            qsha = query_sha256(query)
            now = utcnow()
            for h in out:
                self.ledger.append(
                    actor, h.record.namespace, h.record.id, rank=h.rank, query_sha256=qsha, at=now
                )
        return out

    def expired(self, rec: MemoryRecord, now: datetime | None = None) -> bool:
        """Past its deadline (``expires_at``, else the policy's TTL for its type): never
        served, by recall or a direct read, even before a nightly run deletes it."""
        now = now or utcnow()
        if rec.expires_at is not None:
            return stored_time(rec.expires_at) <= now
        ttl = self.policy.memory_types[rec.memory_type].default_ttl_days
        age = now - stored_time(rec.created_at)
        return ttl is not None and age.total_seconds() >= ttl * 86400

    def close(self) -> None:
        self.ledger.flush()
        if self.__dict__.pop("_watching", False):  # once: other watchers keep theirs
            self.ledger.watch_erasures(self.store, False)  # the store may close next

    def __enter__(self) -> LongTermMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_replacement(
    by: MemoryRecord | None, by_id: str, superseded: Iterable[MemoryRecord]
) -> None:
    """A superseded record points to an existing active replacement of its own actor and
    namespace (invariants 3 and 8), never to itself."""
    if by is None or by.status is not Status.active:
        raise InputError(f"replaced_by {by_id!r} is not an active record")
    for rec in superseded:
        if rec.id == by.id or (rec.actor_id, rec.namespace) != (by.actor_id, by.namespace):
            raise InputError(
                f"replaced_by {by_id!r} cannot replace {rec.id!r}: itself, or another "
                "actor's or namespace's record"
            )


def _check_options(
    store: object,
    refresh_seconds: object,
    page_size: object,
    content_max_bytes: object,
    token_alignment: object,
) -> None:
    """LongTermMemory's (and so Memory's) options, checked before anything is opened, as
    every call's arguments are: an InputError naming the option."""
    if not isinstance(store, MemoryStore):
        raise InputError(
            f"store must be a store URL or an open MemoryStore, not {type(store).__name__}"
        )
    if not number_in(refresh_seconds, 0, float("inf")):
        raise InputError(
            f"refresh_seconds must be a number of seconds >= 0, not {shown(refresh_seconds)}"
        )
    for what, value in (("page_size", page_size), ("content_max_bytes", content_max_bytes)):
        if value is None and what == "content_max_bytes":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InputError(f"{what} must be a positive whole number, not {shown(value)}")
    if token_alignment is not None and not isinstance(token_alignment, bool):
        raise InputError(
            f"token_alignment must be True, False or None, not {shown(token_alignment)}"
        )


def _later(kept: datetime | None, at: datetime) -> datetime:
    return at if kept is None or at > kept else kept


def _refreshed(rec: MemoryRecord, change: Refresh) -> MemoryRecord:
    """``rec`` with ``change`` applied (stores without ``refresh_active``: a whole-record
    write, last writer wins; a backdated restatement never moves recency back)."""
    update: dict[str, Any] = {
        "last_accessed_at": _later(rec.last_accessed_at or rec.created_at, change.at),
        "access_count": rec.access_count + 1,
        "confidence": max(rec.confidence, change.confidence),
    }
    if change.verify:
        update["last_verified_at"] = _later(rec.last_verified_at or rec.created_at, change.at)
    if rec.subject is None and change.subject:
        update["subject"] = change.subject
    if change.memory_type is not None:
        update["memory_type"] = change.memory_type
        update["expires_at"] = change.expires_at
    return rec.model_copy(update=update)


def default_namespace(actor: str) -> str:
    """Where the CLI and the example agent put memories without an explicit namespace."""
    return settings().namespace.replace("{actor}", actor)


_LOCKS: weakref.WeakKeyDictionary[Any, threading.RLock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def _store_lock(store: object) -> threading.RLock:
    """One lock for every LongTermMemory over one store object (a LangGraph store beside
    the agent's own Memory, say): between one's duplicate check and its insert, no other
    writes through the same connection, where SQLite's ``data_version`` would not see it."""
    with _LOCKS_GUARD:
        try:
            return _LOCKS.setdefault(store, threading.RLock())
        except TypeError:  # not weakly referable: a lock of its own
            return threading.RLock()
