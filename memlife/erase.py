"""Targeted erasure: a subject's (or some ids') records and everything derived from them.

What goes, per erased record:
  - the record itself (any status: active, superseded, quarantined, ...);
  - replacements built only from erased records (``provenance.supersedes`` is a subset of
    the erased ids, to a fixpoint), and the superseded sources of an erased replacement
    (they hold the same claims);
  - embedding-cache rows of its content (by content sha256, every model);
  - access-ledger rows (``memlife.ledger.erase``, when the ledger module is installed);
  - journal payloads that mention it (``journal.forget_payloads``), quarantine snapshots
    and pending-erasure rows;
then the store's WAL is folded into the file, the file is VACUUMed and the WAL truncated,
so neither the SQLite file nor its WAL keeps the erased bytes (secure_delete is on).
Run reports and receipts hold ids and hashes only; they stay (they are the evidence).

Legal hold defers an erasure: the record stays, the request is journaled as an erase
operation in FAILED state with code LEGAL_HOLD, a receipt with outcome ``deferred`` is
written (``deferrals/{operation_id}.json``), and a row in ``pending_erasures`` remembers it. The deferred erasure is applied
by ``memlife hold release --id ID`` (which lifts the hold and erases at once), and also by
any later ``erase`` call (``memlife erase --pending``) once the hold is gone by other means.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memlife.audit import ReceiptSink, ReceiptWriteError, dumps
from memlife.embed_cache import EmbeddingCache
from memlife.journal import Operation, OpKind, OpState, Outcome
from memlife.model import MemoryRecord, RetentionClass, Status, utcnow
from memlife.policy import Policy
from memlife.quarantine import ManualRun, _side, manual_run
from memlife.receipts import operation_receipt
from memlife.stores.base import MemoryStore, chunked, iter_shard

PENDING_SCHEMA = """
CREATE TABLE IF NOT EXISTS pending_erasures (
    record_id TEXT PRIMARY KEY,
    actor_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    operation_id TEXT NOT NULL,   -- the FAILED(LEGAL_HOLD) erase operation that deferred it
    run_id TEXT NOT NULL,
    requested_at TEXT NOT NULL
);
"""


class EraseError(ValueError):
    """The request is malformed (no target, or ids of another actor)."""


def _pending_conn(store: MemoryStore) -> tuple[sqlite3.Connection, Any]:
    conn, lock = _side(store)
    with lock:
        conn.executescript(PENDING_SCHEMA)
    return conn, lock


def pending_erasures(store: MemoryStore, actor_id: str | None = None) -> list[dict[str, Any]]:
    conn, lock = _pending_conn(store)
    sql = "SELECT record_id, actor_id, namespace, operation_id, run_id, requested_at FROM pending_erasures"
    args: tuple = ()
    if actor_id:
        sql, args = sql + " WHERE actor_id=?", (actor_id,)
    with lock:
        rows = conn.execute(sql + " ORDER BY requested_at, record_id", args).fetchall()
    keys = ("record_id", "actor_id", "namespace", "operation_id", "run_id", "requested_at")
    return [dict(zip(keys, r, strict=True)) for r in rows]


def _is_held(r: MemoryRecord) -> bool:
    return r.retention_class is RetentionClass.legal_hold or r.status is Status.retained


def _actor_records(store: MemoryStore, actor_id: str) -> list[MemoryRecord]:
    out: list[MemoryRecord] = []
    for ns in store.list_namespaces(actor_id):
        for page in iter_shard(store, actor_id, ns):
            out += page.records
    return out


def select_targets(
    store: MemoryStore, actor_id: str, *, subject: str | None = None, ids: Sequence[str] = ()
) -> tuple[list[MemoryRecord], dict[str, str]]:
    """The records to erase (the actor's only) and why each is in: REQUESTED or DERIVED."""
    if not subject and not ids:
        raise EraseError("name a --subject or at least one --id")
    records = _actor_records(store, actor_id)
    by_id = {r.id: r for r in records}
    why: dict[str, str] = {}
    foreign = []
    for rid in ids:
        if rid in by_id:
            why[rid] = "ERASURE_REQUEST"
        elif store.get(rid) is not None:
            foreign.append(rid)
    if foreign:
        raise EraseError(
            f"{len(foreign)} id(s) do not belong to actor {actor_id}: {', '.join(foreign)}"
        )
    if subject:
        want = subject.strip().lower()
        for r in records:
            if r.subject and r.subject.strip().lower() == want:
                why.setdefault(r.id, "ERASURE_REQUEST")
    changed = bool(why)
    while changed:  # derived records, to a fixpoint
        changed = False
        for r in records:
            if r.id in why:
                continue
            sup = set(r.provenance.supersedes)
            built_from_erased = bool(sup) and sup <= why.keys()
            source_of_erased = r.provenance.replaced_by in why
            if built_from_erased or source_of_erased:
                why[r.id] = "DERIVED_REPLACEMENT" if built_from_erased else "SOURCE_OF_ERASED"
                changed = True
    return [by_id[i] for i in sorted(why)], why


def ledger_erase(ids: Sequence[str]) -> int | None:
    """The access ledger forgets these records; None when no ledger module is installed."""
    try:
        from memlife.ledger import AccessLedger
    except ImportError:  # pragma: no cover - the ledger ships with memlife
        return None
    return int(AccessLedger().erase(list(ids)))


def compact(store: MemoryStore, cache: EmbeddingCache | None = None) -> dict[str, Any]:
    """Fold the WAL, VACUUM, truncate the WAL again: no erased byte left in file or WAL."""
    out: dict[str, Any] = {"vacuumed": False}
    conns: list[tuple[sqlite3.Connection, Any]] = []
    conn = getattr(store, "connection", None)
    if isinstance(conn, sqlite3.Connection):
        checkpoint = getattr(store, "checkpoint", None)
        if checkpoint is not None:
            checkpoint()
        conns.append((conn, store.lock))  # type: ignore[attr-defined]
    if cache is not None and cache.connection is not conn:
        conns.append((cache.connection, cache.lock))
    busy = 0
    for c, lock in conns:
        with lock:
            c.execute("VACUUM")
            row = c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            busy += int(row[0]) if row else 0
        out["vacuumed"] = True
    out["wal_busy"] = busy  # > 0: another connection held the WAL; rerun `memlife erase --pending`
    return out


def deferral_key(operation_id: str) -> str:
    return f"deferrals/{operation_id}.json"


def _write_deferral_receipt(sink: ReceiptSink, op: Operation) -> bool:
    """Create-only; False when it exists already (a rerun). Raises ReceiptWriteError.

    Kept beside ``operations/``, not in it: the operation itself is not done (FAILED,
    LEGAL_HOLD), and its own receipt is written if and when it is applied.
    """
    doc = operation_receipt(op)
    doc["outcome"] = "deferred"
    return sink.put_new(deferral_key(op.operation_id), dumps(doc))


def _defer(
    run: ManualRun, store: MemoryStore, held: Sequence[MemoryRecord], why: dict[str, str]
) -> None:
    conn, lock = _pending_conn(store)
    ops = [run.executor.new_op(OpKind.erase, r.actor_id, r.namespace, r.id,
                               [why[r.id], "LEGAL_HOLD", "ERASURE_DEFERRED"], r.sha256)
           for r in held]  # fmt: skip
    for o in run.journal.plan(ops):
        if o.state is OpState.PLANNED:
            o = run.journal.transition(o.operation_id, OpState.FAILED, outcome=Outcome.failed,
                                       error="LEGAL_HOLD", at=run.cutoff)  # fmt: skip
        try:
            _write_deferral_receipt(run.sink, o)
        except ReceiptWriteError:
            run.tally.counts["receipt_failed"] += 1
        with lock:
            conn.execute(
                "INSERT OR IGNORE INTO pending_erasures VALUES (?, ?, ?, ?, ?, ?)",
                (
                    o.record_id,
                    o.actor_id,
                    o.namespace,
                    o.operation_id,
                    run.run_id,
                    run.cutoff.isoformat(),
                ),
            )
        run.tally.counts["deferred"] += 1


def forget_pending(store: MemoryStore, ids: Sequence[str]) -> None:
    """Pending-erasure rows of records now erased (the erase applier calls this)."""
    conn, lock = _pending_conn(store)
    with lock:
        conn.executemany("DELETE FROM pending_erasures WHERE record_id=?", [(i,) for i in ids])


def _erase_now(run: ManualRun, records: Sequence[MemoryRecord], why: dict[str, str],
               cache: EmbeddingCache) -> list[Operation]:  # fmt: skip
    planned = run.journal.plan([
        run.executor.new_op(OpKind.erase, r.actor_id, r.namespace, r.id, [why[r.id]], r.sha256)
        for r in records
    ])  # fmt: skip
    run.executor.erase_cache = cache
    done: list[Operation] = []
    for batch in chunked(planned, 100):  # the erase applier (apply/appliers/erase.py)
        done += run.executor.run_lifecycle(batch, run.tally)
    return done


def erase(
    store: MemoryStore, actor_id: str | None, *, subject: str | None = None, ids: Sequence[str] = (),
    pending: bool = True, policy: Policy | str | None = None, receipts: str | ReceiptSink | None = None,
    now: datetime | None = None, cache: EmbeddingCache | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Erase the targets (deferring held ones) and apply released pending erasures.

    ``actor_id=None`` with no subject/ids only drains pending erasures whose hold is gone.
    """
    targets: list[MemoryRecord] = []
    why: dict[str, str] = {}
    if actor_id and (subject or ids):
        targets, why = select_targets(store, actor_id, subject=subject, ids=ids)
    elif subject or ids:
        raise EraseError("--actor is required with --subject/--id")
    released: list[str] = []
    if pending:
        for p in pending_erasures(store, actor_id):
            r = store.get(p["record_id"])
            if r is None or p["record_id"] in why:
                continue
            if not _is_held(r):
                targets.append(r)
                why[r.id] = "HOLD_RELEASED"
                released.append(r.id)
    held = [r for r in targets if _is_held(r)]
    free = [r for r in targets if not _is_held(r)]
    cache = cache or EmbeddingCache.for_store(store)
    run = manual_run(
        store, "erase", [r.id for r in targets], policy=policy, receipts=receipts, now=now
    )
    run.extra.update(
        requested={"actor_id": actor_id, "subject_given": bool(subject), "ids": list(ids)},
        erased=[], deferred=[r.id for r in held], derived=sorted(i for i, w in why.items()
                                                                 if w in ("DERIVED_REPLACEMENT", "SOURCE_OF_ERASED")),
        released=released,
    )  # fmt: skip
    if held:
        _defer(run, store, held, why)
    done = _erase_now(run, free, why, cache) if free else []
    run.extra["erased"] = [
        o.record_id for o in done if o.outcome in (Outcome.deleted, Outcome.already_absent)
    ]
    if free:
        run.extra["compaction"] = compact(store, cache)
    # Pending rows of records that vanished by other means are simply forgotten.
    conn, lock = _pending_conn(store)
    with lock:
        for p in pending_erasures(store, actor_id):
            if store.get(p["record_id"]) is None:
                conn.execute("DELETE FROM pending_erasures WHERE record_id=?", (p["record_id"],))
    return run.finish()


def release_hold(
    store: MemoryStore, ids: Sequence[str], *, retention_class: RetentionClass = RetentionClass.standard,
    policy: Policy | str | None = None, receipts: str | ReceiptSink | None = None,
    now: datetime | None = None, cache: EmbeddingCache | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Lift the legal hold of these records (receipted run), then apply their pending erasures."""
    if retention_class is RetentionClass.legal_hold:
        raise EraseError("releasing a hold to legal_hold is not a release")
    run = manual_run(store, "hold_release", ids, policy=policy, receipts=receipts, now=now)
    at = run.cutoff
    released, not_held, missing = [], [], []
    for rid in dict.fromkeys(ids):
        r = store.get(rid)
        if r is None:
            missing.append(rid)
        elif not _is_held(r):
            not_held.append(rid)
        else:
            update: dict[str, Any] = {"retention_class": retention_class}
            if r.status is Status.retained:
                update.update(status=Status.active, status_changed_at=at)
            store.put_many([r.model_copy(update=update)])
            released.append(rid)
    run.extra.update(released=released, not_held=not_held, not_found=missing,
                     retention_class=retention_class.value)  # fmt: skip
    summary = run.finish()
    pending_ids = {p["record_id"] for p in pending_erasures(store)}
    mine = [rid for rid in released if rid in pending_ids]
    if mine:
        actors = {p["actor_id"] for p in pending_erasures(store) if p["record_id"] in mine}
        summary["erasures"] = [erase(store, a, pending=True, policy=run.policy, receipts=run.sink,
                                     now=utcnow(), cache=cache) for a in sorted(actors)]  # fmt: skip
    return summary
