"""Targeted erasure: a subject's (or some ids') records and everything derived from them.

What goes, per erased record:
  - the record itself (any status: active, superseded, quarantined, ...);
  - every copy of its text: records of the actor with the same text, replacements built
    only from erased records, the superseded sources of an erased replacement; a
    replacement of erased AND kept records is rebuilt from the kept ones (extractive
    text) or withdrawn, its kept sources reactivated (model text): see plan_erasure;
  - embedding-cache rows of its content (by content sha256, every model), the dry-run
    cache ($MEMLIFE_HOME/embeddings.db) included, and every derived result kept beside
    them for the record's shard (memlife/derived.py: inferred subject keys hold words);
  - access-ledger rows (``memlife.ledger.erase``, when the ledger module is installed);
  - journal payloads that mention it (``journal.forget_payloads``), quarantine snapshots
    and pending-erasure rows;
Tombstones (memlife/tombstones.py: ids and hashes) are committed first, before the final
selection: a concurrent replacement write is either refused by them or selected here.
Then the store's WAL is folded into the file, the file is VACUUMed and the WAL truncated,
so neither the SQLite file nor its WAL keeps the erased bytes (secure_delete is on).
Run reports and receipts hold ids and hashes only; they stay (they are the evidence).

Legal hold defers an erasure: the record stays, the request is journaled as an erase
operation in FAILED state with code LEGAL_HOLD, a receipt with outcome ``deferred`` is
written (``deferrals/{operation_id}.json``), and a row in ``pending_erasures`` remembers it. The deferred erasure is applied
by ``memlife hold release --id ID`` (which lifts the hold and erases at once), and also by
any later ``erase`` call (``memlife erase --pending``) once the hold is gone by other means.
A hold also protects what it depends on: a held replacement is deferred, not rebuilt, and a
replacement that a held superseded source points to is deferred with it (_split_held).

Why one module (over 500 lines): selection, the hold split and the application share one
plan (ErasurePlan) and must agree on it step by step: tombstones are written between two
selections, and what a hold defers must be exactly what is not erased.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memlife import tombstones
from memlife.apply.appliers.hold_release import release_payload
from memlife.apply.appliers.status import MAX_CHAIN
from memlife.audit import ReceiptSink, ReceiptWriteError, dumps
from memlife.backends import embedding_cache
from memlife.consolidate.base import Group, pick_survivor
from memlife.derived import forget_for
from memlife.embed_cache import EmbeddingCache, dry_run_cache
from memlife.errors import EraseError as EraseError  # moved; re-exported
from memlife.evidence_deferrals import deferral_key
from memlife.evidence_key import for_evidence
from memlife.holds import require_some
from memlife.inferred import InferredSubjects
from memlife.journal import Journal, Operation, OpKind, OpState, Outcome, open_journal
from memlife.lease import for_store as lease_for_store
from memlife.lease import scoped as lease_scoped
from memlife.model import MemoryRecord, RetentionClass, Status, content_sha256, utcnow
from memlife.outcome_sweep import sweep_for_erase
from memlife.policy import Policy
from memlife.quarantine import ManualRun, forget_snapshots, manual_run
from memlife.receipts import operation_receipt
from memlife.state.side import side_tables
from memlife.stores.base import MAX_BATCH, MemoryStore, chunked, iter_shard
from memlife.stores.sqlite import tombstone_norm


def pending_erasures(store: MemoryStore, actor_id: str | None = None) -> list[dict[str, Any]]:
    return side_tables(store).pending(actor_id)


def actor_records(store: MemoryStore, actor_id: str) -> list[MemoryRecord]:
    out: list[MemoryRecord] = []
    for ns in store.list_namespaces(actor_id):
        for page in iter_shard(store, actor_id, ns):
            out += page.records
    return out


def select_targets(
    store: MemoryStore, actor_id: str, *, subject: str | None = None, ids: Sequence[str] = ()
) -> tuple[list[MemoryRecord], dict[str, str]]:
    """The records to erase (the actor's only) and why each is in (see :func:`plan_erasure`)."""
    plan = plan_erasure(store, actor_id, subject=subject, ids=ids)
    return plan.targets, plan.why


@dataclass
class ErasurePlan:
    """What an erasure does: records to erase (and why), replacements to rebuild, sources
    to bring back (those of a withdrawn replacement)."""

    targets: list[MemoryRecord]
    why: dict[str, str]
    rebuild: list[MemoryRecord] = field(default_factory=list)  # new version, same id
    reactivate: list[MemoryRecord] = field(default_factory=list)
    old_shas: set[str] = field(default_factory=set)  # hashes rebuilding replaces (caches go)
    # requests a hold still defers (plan_erasure's still_held): not planned, yet they pin
    # what they point to, as the held targets do (_split_held)
    still_held: list[MemoryRecord] = field(default_factory=list)


def plan_erasure(
    store: MemoryStore, actor_id: str, *, subject: str | None = None, ids: Sequence[str] = (),
    erased_earlier: bool = False, still_held: Sequence[str] = (),
) -> ErasurePlan:  # fmt: skip
    """Requested records and every copy of their text, to a fixpoint:

    - DERIVED_REPLACEMENT: a replacement built only from erased records (or whose other
      sources are gone: nothing to rebuild it from);
    - SOURCE_OF_ERASED: the superseded sources of an erased replacement (same claims);
    - SAME_CONTENT: another record of the actor with the same text (exact or folded);
    - WITHDRAWN_REPLACEMENT: a replacement built from erased AND kept records whose text
      is not verbatim one of its sources (a model wrote it: it may carry the erased
      claim). It goes; its kept sources come back active, so the next night
      re-consolidates them without the erased one.
    A replacement of erased and kept records whose text IS verbatim a source (the
    extractive consolidator) is rebuilt in place: its text becomes the pick among the
    kept sources, and its ``supersedes`` lists only them.

    ``erased_earlier``: the actor's records erased before (their tombstones: ids and text
    hashes) count as erased too. A released pending erasure is planned so: what a hold
    deferred as derived (a tainted or pinned replacement, a source) is decided again from
    what was erased, never taken for a request of its own (which would erase the kept
    sources a replacement was to be rebuilt from).

    ``still_held``: requested records whose erasure a hold still defers. What they reach
    counts as reached (a copy of their text whose own hold was lifted goes now), while they
    stay out of the plan: their deferral stands.
    """
    if not subject and not ids and not erased_earlier:
        raise EraseError("name a --subject or at least one --id")
    records = actor_records(store, actor_id)
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
    texts = {r.id: text_keys(r) for r in records}
    if erased_earlier:
        for ghost, keys in _erased_keys(store, actor_id).items():
            # an id the actor uses again is that record's: the erased text still counts,
            # under a name no record has (its copies go; the new record stays): "x#erased"
            # may be a live record's id, which must not take the ghost's reason
            gid = ghost
            while gid in by_id:
                gid += "#erased"
            why[gid], texts[gid] = ERASED_EARLIER, keys
    for rid in still_held:
        if rid in by_id and rid not in why:
            why[rid] = STILL_HELD
    withdrawn: set[str] = set()
    changed = bool(why)
    while changed:  # to a fixpoint
        changed = False
        erased_keys = set().union(*(texts[i] for i in why))
        for r in records:
            if r.id in why:
                continue
            code = _rule(r, by_id, why, withdrawn, texts, erased_keys)
            if code:
                why[r.id] = code
                withdrawn |= {r.id} if code == "WITHDRAWN_REPLACEMENT" else set()
                changed = True
    planned = {i: w for i, w in why.items() if i in by_id and w != STILL_HELD}
    plan = ErasurePlan([by_id[i] for i in sorted(planned)], planned)
    plan.still_held = [by_id[i] for i in sorted(why) if i in by_id and why[i] == STILL_HELD]
    erased_keys = set().union(*(texts[i] for i in why)) if why else set()
    for r in records:
        sup = set(r.provenance.supersedes)
        if r.id in why or not sup or not (sup & why.keys() or texts[r.id] & erased_keys):
            continue
        kept = [by_id[i] for i in sorted(sup) if i in by_id and i not in why]
        clean = [k for k in kept if not texts[k.id] & erased_keys]
        gone = [by_id[i] for i in sorted(sup & why.keys()) if i in by_id]
        unread = bool(sup & why.keys() - by_id.keys())  # erased earlier: its fields unknown
        plan.rebuild.append(_rebuilt(r, kept, clean, gone, unread))
        plan.old_shas |= {r.sha256, content_sha256(r.content)}
    for rid in sorted(withdrawn):
        plan.reactivate += [
            s for s in records
            if s.id not in why and s.provenance.replaced_by == rid and s.status is Status.superseded
        ]  # fmt: skip
    # superseded by an erased record not built from it (a reviewer's `supersede --by`, an
    # online status change): its text is its own, so it stays and comes back
    plan.reactivate += [
        s for s in records
        if s.id not in why and s.status is Status.superseded and s.provenance.replaced_by in why
        and s.provenance.replaced_by not in withdrawn and not _source_of(s, by_id, why)
    ]  # fmt: skip
    return plan


def _source_of(r: MemoryRecord, by_id: dict[str, MemoryRecord], why: dict[str, str]) -> bool:
    """Whether ``r`` is a source of an erased replacement, holding its claims: superseded by
    a record erased now that was built from it, directly or down a chain of replacements
    (a source handed over to a later replacement: status._repoint), or by one erased
    earlier (its sources are unknown)."""
    by = r.provenance.replaced_by
    if by is None or by not in why:
        return False
    target = by_id.get(by)
    if target is None:
        return True
    seen: set[str] = set()
    level = set(target.provenance.supersedes)
    for _ in range(MAX_CHAIN):
        if r.id in level:
            return True
        seen |= level
        level = {s for i in level if i in by_id for s in by_id[i].provenance.supersedes} - seen
        if not level:
            return False
    return True  # a chain past the bound: its claims may be anyone's, so it goes


def _rule(
    r: MemoryRecord, by_id: dict[str, MemoryRecord], why: dict[str, str], withdrawn: set[str],
    texts: dict[str, set[str]], erased_keys: set[str],
) -> str | None:  # fmt: skip
    """Why ``r`` must go too, or None (it stays, or is rebuilt when it is a tainted replacement)."""
    sup = set(r.provenance.supersedes)
    if sup and sup <= why.keys():
        return "DERIVED_REPLACEMENT"
    if _source_of(r, by_id, why) and r.provenance.replaced_by not in withdrawn:
        return "SOURCE_OF_ERASED"
    if not (sup & why.keys() or texts[r.id] & erased_keys):
        return None
    if not sup:
        return "SAME_CONTENT"
    kept = [by_id[i] for i in sup if i in by_id and i not in why]
    if not kept:
        return "DERIVED_REPLACEMENT"  # its other sources are gone: nothing to rebuild from
    clean = [k for k in kept if not texts[k.id] & erased_keys]
    sources = [by_id[i] for i in sup if i in by_id]
    own = f"sha:{content_sha256(r.content)}"  # an erased source's text, by its tombstone
    verbatim = any(r.content == s.content for s in sources) or any(
        i not in by_id and own in texts.get(i, ()) for i in sup
    )
    if not clean or not verbatim:
        return "WITHDRAWN_REPLACEMENT"  # model-written (or no clean source): cannot be rebuilt
    return None


ERASED_EARLIER = "ERASED_EARLIER"  # a tombstoned record, as plan_erasure's erased_earlier reads it
STILL_HELD = "STILL_HELD"  # a requested record a hold still defers, as plan_erasure reads it
# what a pending erasure was deferred as, when it was asked for (not derived): planned as a
# request once released; any other reason is derived again from what was erased
REQUESTED = frozenset({"ERASURE_REQUEST", "HOLD_RELEASED"})


def _erased_keys(store: MemoryStore, actor_id: str) -> dict[str, set[str]]:
    """The actor's erased record ids and their text keys (as text_keys gives them)."""
    out: dict[str, set[str]] = {}
    rows = tombstones.listing(store, actor_id)
    names = {str(t["record_id"]) for t in rows}
    for t in rows:
        rid = tombstones.erased_id(str(t["record_id"]), str(t["content_sha256"]), names)
        out.setdefault(rid, set()).update(
            tombstone_keys(str(t["content_sha256"]), t.get("norm_sha256"))
        )
    return out


def tombstone_keys(content_sha256: str, norm_sha256: str | None) -> set[str]:
    """A tombstone's text keys, in text_keys' form (an erased record's, without its text)."""
    return {f"sha:{content_sha256}", *([f"norm:{norm_sha256}"] if norm_sha256 else [])}


def text_keys(r: MemoryRecord) -> set[str]:
    """A record's text keys: its hashes and its statement key under today's fold. Never an
    older store version's key (tombstone_norms): those folded different facts into one
    ('Knows C++' and 'Knows C', 'A+' and 'A-'); they exist only so that a tombstone written
    then keeps refusing what it refused (the store's refusal checks them), and matching a
    live record against them would erase a fact nobody asked to erase."""
    keys = {f"sha:{content_sha256(r.content)}", f"sha:{r.sha256}"}
    norm = tombstone_norm(r.content)
    return keys | ({f"norm:{norm}"} if norm else set())


def _rebuilt(
    r: MemoryRecord, kept: Sequence[MemoryRecord], clean: Sequence[MemoryRecord],
    gone: Sequence[MemoryRecord] = (), ghost: bool = False,
) -> MemoryRecord:  # fmt: skip
    """The replacement again, from the kept sources only: extractive, so it never writes text.
    A free-text field (owner, subject) an erased source (``gone``) gave it, and no kept one
    has, goes with that source: the kept sources' instead. One set otherwise (``remember``
    filled a subject in, ``import --update``) stays, unless an erased source can no longer
    be read (``ghost``: erased earlier, its rebuild deferred by a hold): then what no kept
    source has goes, erring toward the erasure."""
    pick = next((k for k in clean if k.content == r.content), None)  # only sources change
    if pick is None:
        pick = pick_survivor(Group(key=f"rebuild:{r.id}", actor_id=r.actor_id,
                                   namespace=r.namespace, subject=r.subject or "",
                                   records=list(clean)))  # fmt: skip
    content = pick.content
    prov = r.provenance.model_copy(update={
        "supersedes": [k.id for k in kept], "content_sha256": content_sha256(content),
    })  # fmt: skip

    def theirs(field: str) -> bool:  # the value came with an erased source only
        value = getattr(r, field)
        return (
            value is not None
            and all(getattr(k, field) != value for k in clean)
            and (ghost or any(getattr(g, field) == value for g in gone))
        )

    owner = pick.owner or next((k.owner for k in clean if k.owner), None)
    return r.model_copy(update={
        "content": content, "provenance": prov, "created_at": max(k.created_at for k in clean),
        "confidence": min(r.confidence, max(k.confidence for k in clean)),
        "owner": owner if theirs("owner") else r.owner,
        "subject": (pick.subject or None) if theirs("subject") else r.subject,
    })  # fmt: skip


def compact(
    store: MemoryStore, cache: EmbeddingCache | Sequence[EmbeddingCache] | None = None,
    journal: Journal | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Fold the WAL, VACUUM, truncate the WAL again: no erased byte left in file or WAL
    (the store's, the caches', and the journal's where it is a file of its own: the home's
    journal.db beside a store without one held the forgotten payloads' frames)."""
    out: dict[str, Any] = {"vacuumed": False}
    conns: list[tuple[sqlite3.Connection, Any]] = []
    conn = getattr(store, "connection", None)
    if isinstance(conn, sqlite3.Connection):
        checkpoint = getattr(store, "checkpoint", None)
        if checkpoint is not None:
            checkpoint()
        conns.append((conn, getattr(store, "lock", None) or threading.RLock()))
    caches = [cache] if isinstance(cache, EmbeddingCache) else list(cache or ())
    for c in caches:
        if isinstance(c.connection, sqlite3.Connection) and c.connection is not conn:
            conns.append((c.connection, c.lock))
    own = getattr(journal, "connection", None)
    if isinstance(own, sqlite3.Connection) and own is not conn:
        conns.append((own, getattr(journal, "lock", None) or threading.RLock()))
    busy = 0
    for con, lock in conns:
        with lock:
            con.execute("VACUUM")
            row = con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            busy += int(row[0]) if row else 0
        out["vacuumed"] = True
    out["wal_busy"] = busy  # > 0: another connection held the WAL; rerun `memlife erase --pending`
    return out


def _write_deferral_receipt(
    sink: ReceiptSink, op: Operation, secret: bytes, reviewer: str | None = None
) -> bool:
    """Create-only; False when it exists already (a rerun). Raises ReceiptWriteError.
    ``reviewer``: who asked (``reviewer_identity``, as every manual run's receipts name).

    Kept beside ``operations/``, not in it: the operation itself is not done (FAILED,
    LEGAL_HOLD), and its own receipt is written if and when it is applied.
    """
    doc = operation_receipt(for_evidence(op, secret), reviewer)  # content hash keyed, as any
    doc["outcome"] = "deferred"
    return sink.put_new(deferral_key(op.operation_id), dumps(doc))


def _defer(
    run: ManualRun,
    store: MemoryStore,
    held: Sequence[MemoryRecord],
    why: dict[str, str],
    asked: Mapping[str, str] | None = None,
) -> None:
    """Each held record's erasure journaled FAILED (LEGAL_HOLD), receipted, and kept
    pending; ``asked`` (id -> when the erasure was asked for, a carried request) dates the
    pending row, else this run's cutoff."""
    side = side_tables(store)
    ops = [
        run.executor.new_op(
            OpKind.erase,
            r.actor_id,
            r.namespace,
            r.id,
            [why[r.id], "LEGAL_HOLD", "ERASURE_DEFERRED"],
            r.sha256,
        )
        for r in held
    ]
    for o in run.journal.plan(ops):
        if o.state is OpState.PLANNED:
            o = run.journal.transition(o.operation_id, OpState.FAILED, outcome=Outcome.failed,
                                       error="LEGAL_HOLD", at=run.cutoff,
                                       by=run.executor.mover)  # fmt: skip
        try:
            _write_deferral_receipt(
                run.sink, o, run.executor.evidence_secret(), run.executor.reviewer
            )
        except ReceiptWriteError as exc:
            # the operation is FAILED (deferred), so the journal shows no receipt owed: the
            # run must say so itself, or it sealed `success` with its deferral evidence
            # missing and nothing told the operator to rerun it (audit 52f)
            run.tally.counts["deferral_receipt_failed"] += 1
            run.tally.failures.append({
                "operation_id": o.operation_id, "run_id": o.run_id, "record_id": o.record_id,
                "action": o.kind.value, "code": "DEFERRAL_RECEIPT_WRITE_FAILED",
                "retryable": True, "detail": type(exc.__cause__).__name__ if exc.__cause__
                else "error",
            })  # fmt: skip
        side.add_pending(
            {
                "record_id": o.record_id,
                "actor_id": o.actor_id,
                "namespace": o.namespace,
                "operation_id": o.operation_id,
                "run_id": run.run_id,
                "requested_at": (asked or {}).get(o.record_id, run.cutoff.isoformat()),
            }
        )
        run.tally.counts["deferred"] += 1


def _erase_now(run: ManualRun, records: Sequence[MemoryRecord], why: dict[str, str],
               caches: Sequence[EmbeddingCache]) -> list[Operation]:  # fmt: skip
    planned = run.journal.plan([
        run.executor.new_op(OpKind.erase, r.actor_id, r.namespace, r.id, [why[r.id]], r.sha256)
        for r in records
    ])  # fmt: skip
    run.executor.erase_cache = caches[0]
    done: list[Operation] = []
    for batch in chunked(planned, MAX_BATCH):  # the erase applier (apply/appliers/erase.py)
        done += run.executor.run_lifecycle(batch, run.tally)
    gone = {o.record_id for o in done if o.outcome in (Outcome.deleted, Outcome.already_absent)}
    _close_reviews(run, [r for r in records if r.id in gone],
                   {o.record_id: o.operation_id for o in done})  # fmt: skip
    for cache in caches[1:]:  # caches outside the store (the dry-run one)
        cache.delete_for(
            [s for r in records if r.id in gone for s in (r.sha256, content_sha256(r.content))]
        )
        run.tally.counts["derived_rows_forgotten"] += forget_for(
            cache, {(r.actor_id, r.namespace) for r in records if r.id in gone}
        )
    return done


def _close_reviews(run: ManualRun, records: Sequence[MemoryRecord], op_of: dict[str, str]) -> None:
    """Review items about erased records: nothing is left to decide, and an open item would
    wait for a reviewer for ever. Closed (decision ``erased``, by this run and the record's
    erase operation), counted."""
    from memlife.review_queue import ReviewQueue

    if not records:
        return
    queue = ReviewQueue.for_store(run.executor.store)
    for item in queue.for_records([(r.id, r.actor_id, r.namespace) for r in records]):
        if item.state != "resolved" and queue.close(
            item.item_id, state="resolved", decision="erased", reviewer=f"memlife:{run.run_id}",
            at=run.cutoff, operation_id=op_of.get(item.record_id),
        ):  # fmt: skip
            run.tally.counts["review_items_closed"] += 1


def home_caches() -> list[EmbeddingCache]:
    """Embedding caches outside the store: the dry-run cache ($MEMLIFE_HOME/embeddings.db)."""
    cache = dry_run_cache()
    return [cache] if cache is not None else []


def _split_held(plan: ErasurePlan) -> tuple[list[MemoryRecord], list[MemoryRecord]]:
    """(deferred, erased now). A legal hold wins over erasure (invariant 1), and what it
    protects must stay whole (invariant 3): a held replacement is not rebuilt (it leaves
    ``plan.rebuild``, deferred as TAINTED_REPLACEMENT), and a replacement that a held,
    superseded source points to is not erased while that hold stands."""
    for r in [r for r in plan.rebuild if r.held]:
        plan.rebuild.remove(r)
        plan.why[r.id] = "TAINTED_REPLACEMENT"
        plan.targets.append(r)
    held = [r for r in plan.targets if r.held]
    # held superseded records: targets, and kept sources of a withdrawn replacement (never
    # reactivated while held: that would rewrite them)
    staying = [*held, *(r for r in plan.reactivate if r.held), *plan.still_held]
    pinned = {r.provenance.replaced_by for r in staying if r.status is Status.superseded}
    free = []
    for r in plan.targets:
        if r.held:
            continue
        if r.id in pinned:
            held.append(r)  # deferred with its held source; erased once that hold is released
        else:
            free.append(r)
    # a deferred replacement keeps its sources: none of them comes back active beside it
    plan.reactivate = [
        r for r in plan.reactivate if not r.held and r.provenance.replaced_by not in pinned
    ]
    return held, free


def _merge(a: ErasurePlan, b: ErasurePlan) -> ErasurePlan:
    why = {**b.why, **a.why}
    by_id = {r.id: r for r in [*b.targets, *a.targets]}
    rebuild = {r.id: r for r in [*a.rebuild, *b.rebuild] if r.id not in why}
    react = {r.id: r for r in [*a.reactivate, *b.reactivate] if r.id not in why}
    still = {r.id: r for r in [*a.still_held, *b.still_held] if r.id not in why}
    return ErasurePlan([by_id[i] for i in sorted(why)], why, list(rebuild.values()),
                       list(react.values()), a.old_shas | b.old_shas,
                       list(still.values()))  # fmt: skip


def _is_its_record(r: MemoryRecord | None, row: dict[str, Any]) -> bool:
    """The pending row is about this record: same actor and namespace. A record that took
    the id after the deferred one was removed is another record (another actor's, even)."""
    return r is not None and (r.actor_id, r.namespace) == (row["actor_id"], row["namespace"])


def deferred_as(journal: Journal, row: dict[str, Any]) -> str:
    """Why the deferred record was in its erasure (the deferred operation's first reason)."""
    op = journal.get(row["operation_id"])
    return op.reasons[0] if op is not None and op.reasons else "ERASURE_REQUEST"


def _select(
    store: MemoryStore, actor_id: str | None, subject: str | None, ids: Sequence[str], pending: bool
) -> tuple[ErasurePlan, list[str]]:
    """The erasure's plan and the pending erasures it applies (their holds are gone).

    A released record that was asked for is planned as a request; one that was derived
    (a tainted or pinned replacement, a source) is planned again from the records erased
    before (``plan_erasure(erased_earlier=True)``): rebuilt, withdrawn or erased as the
    first erasure would have done had it not been held."""
    plan = ErasurePlan([], {})
    if actor_id and (subject or ids):
        plan = plan_erasure(store, actor_id, subject=subject, ids=ids)
    released: dict[str, list[str]] = {}
    requested: dict[str, list[str]] = {}
    held: dict[str, list[str]] = {}  # requests a hold still defers: what they reach goes
    if pending:
        journal = open_journal(store)
        for p in pending_erasures(store, actor_id):
            r = store.get(p["record_id"])
            if r is None or not _is_its_record(r, p) or r.id in plan.why:
                continue
            if r.held:
                if deferred_as(journal, p) in REQUESTED:
                    held.setdefault(r.actor_id, []).append(r.id)
                continue
            released.setdefault(r.actor_id, []).append(r.id)
            if deferred_as(journal, p) in REQUESTED:
                requested.setdefault(r.actor_id, []).append(r.id)
    for actor in sorted(released):
        asked = requested.get(actor, [])
        more = plan_erasure(store, actor, ids=asked, erased_earlier=True,
                            still_held=held.get(actor, []))  # fmt: skip
        more.why.update({i: "HOLD_RELEASED" for i in asked})
        plan = _merge(plan, more)
    return plan, [i for rids in released.values() for i in rids]


@lease_scoped  # the lease manual_run takes is given back however the erasure ends
def erase(
    store: MemoryStore, actor_id: str | None, *, subject: str | None = None, ids: Sequence[str] = (),
    pending: bool = True, policy: Policy | str | None = None, receipts: str | ReceiptSink | None = None,
    now: datetime | None = None, cache: EmbeddingCache | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Erase the targets (deferring held ones) and apply released pending erasures.

    ``actor_id=None`` with no subject/ids only drains pending erasures whose hold is gone.
    Order matters: tombstones are committed BEFORE the final selection, so a replacement
    a concurrent run writes from an erased record is either refused by its writer
    (tombstone) or seen here (derived) and rebuilt or erased; never missed.
    """
    if (subject or ids) and not actor_id:
        raise EraseError("--actor is required with --subject/--id")
    # the store's lease from the first selection on: a hold placed meanwhile (it takes the
    # lease too) would otherwise meet a record selected as free
    with lease_for_store(store, "erase", "manual:erase"):
        return _erase(store, actor_id, subject, ids, pending, policy, receipts, now, cache)


def _erase(
    store: MemoryStore, actor_id: str | None, subject: str | None, ids: Sequence[str],
    pending: bool, policy: Policy | str | None, receipts: str | ReceiptSink | None,
    now: datetime | None, cache: EmbeddingCache | None,
) -> dict[str, Any]:  # fmt: skip
    plan, released = _select(store, actor_id, subject, ids, pending)
    tombstones.add(store, _split_held(plan)[1])
    again, released2 = _select(store, actor_id, subject, ids, pending)
    plan = _merge(plan, again)
    released = list(dict.fromkeys([*released, *released2]))
    held, free = _split_held(plan)
    targets, why = plan.targets, plan.why
    # a released record pinned again (a held source still points to it) stays deferred
    released = [i for i in released if i not in {r.id for r in held}]
    pending_now = {p["record_id"] for p in pending_erasures(store, actor_id)}
    tombstones.add(store, free)
    # `is not None`: a DynamoDB cache has no length (truthiness would ask it for one)
    caches = [cache if cache is not None else embedding_cache(store), *home_caches()]
    run = manual_run(
        store,
        "erase",
        [r.id for r in targets],
        policy=policy,
        receipts=receipts,
        now=now,
        # the request, not the targets, names the run: a rerun after a crash is the same run
        request={"actor": actor_id, "subject": subject, "ids": sorted(ids), "pending": pending},
    )
    run.extra.update(
        requested={"actor_id": actor_id, "subject_given": bool(subject), "ids": list(ids)},
        erased=[], deferred=[], released=released,
        derived=sorted(i for i, w in why.items() if w not in ("ERASURE_REQUEST", "HOLD_RELEASED")),
        rebuilt=sorted(r.id for r in plan.rebuild), reactivated=sorted(r.id for r in plan.reactivate),
    )  # fmt: skip
    resumed = 0
    if pending:  # erasures an earlier attempt left unfinished (a crash, a receipt outage)
        run.executor.erase_cache = cache
        resumed = run.executor.resume_due(run.tally, kinds={OpKind.erase})
        if resumed:
            run.seal_abandoned()  # the attempt that left them gets its run receipt too
    if held:  # not again for a record deferred before, unless this call asks for it
        fresh = [r for r in held if r.id not in pending_now or why[r.id] == "ERASURE_REQUEST"]
        _defer(run, store, fresh, why)
        run.extra["deferred"] = [r.id for r in fresh]  # what this call deferred
        run.extra["still_deferred"] = sorted({r.id for r in held} - set(run.extra["deferred"]))
    if plan.rebuild:
        _rebuild_now(run, store, plan.rebuild, plan.old_shas, caches)
    if plan.reactivate:
        _reactivate_now(run, plan.reactivate)
    done = _erase_now(run, free, why, caches) if free else []
    # held since it was selected (a hold no lease orders, e.g. an import): deferred as well
    refused = {o.record_id for o in done if o.last_error == "LEGAL_HOLD"}
    if refused:
        _defer(run, store, [r for r in free if r.id in refused], why)
        run.extra["deferred"] += sorted(refused)
    run.extra["erased"] = [
        o.record_id for o in done if o.outcome in (Outcome.deleted, Outcome.already_absent)
    ]
    # a resumed erasure compacts too (this run's own, or another attempt's pending): the
    # attempt that deleted the record and then failed never did, and the erased bytes stay
    # in the WAL as long as this process, or a killed one's file, keeps it
    sweep_for_erase(store)  # a killed night's staged replacements may hold the erased text
    # the bare sweep compacts even with nothing to erase: it is the documented remedy for a
    # compaction another connection kept busy (`wal_busy`), whose erased bytes stay in the
    # file and WAL until a VACUUM and a truncating checkpoint succeed (docs/evaluation.md)
    sweep = pending and actor_id is None and not subject and not ids
    if free or plan.rebuild or resumed or OpKind.erase in run.resumed or sweep:
        run.extra["compaction"] = compact(store, caches, run.journal)
    for c in caches[1:]:
        c.close()
    # Pending rows of records that vanished by other means (or whose id another record
    # took) are simply forgotten.
    # A released record rebuilt, reactivated or found to stay is settled too.
    settled = {r.id for r in [*plan.rebuild, *plan.reactivate]} | (set(released) - why.keys())
    gone = [
        p["record_id"]
        for p in pending_erasures(store, actor_id)
        if p["record_id"] in settled or not _is_its_record(store.get(p["record_id"]), p)
    ]
    if gone:
        side_tables(store).forget_pending(gone)
    return run.finish()


def _rebuild_now(
    run: ManualRun, store: MemoryStore, rebuilt: Sequence[MemoryRecord], old_shas: set[str],
    caches: Sequence[EmbeddingCache],
) -> None:  # fmt: skip
    """Rewrite tainted replacements from their kept sources (same id: pointers stay valid).

    Through the write_replacement applier: the write checks tombstones in its transaction.
    """
    # the text each replacement held before: its inferred subject key (and a key it made
    # for others) is made of those words, which may be the erased ones (audit 53a)
    before = {r.id: old.content for r in rebuilt if (old := store.get(r.id)) is not None}
    planned = run.journal.plan([
        run.executor.new_op(OpKind.write_replacement, r.actor_id, r.namespace, r.id,
                            ["ERASURE_REBUILD"], content_sha256(r.content), payload=r.to_json())
        for r in rebuilt
    ])  # fmt: skip
    run.executor.run_lifecycle(planned, run.tally)
    ids = [r.id for r in rebuilt]
    forget_snapshots(store, ids)  # a quarantine snapshot holds the replacement's old text
    if (drop := getattr(store, "drop_stale_overflow", None)) is not None:
        drop(ids)  # AgentCore's sidecar keeps older overflow: the erased source's owner
    run.tally.counts["journal_payloads_forgotten"] += run.journal.forget_payloads(ids)
    for cache in caches:
        cache.delete_for(old_shas)
        forget_for(cache, {(r.actor_id, r.namespace) for r in rebuilt})
    # keys never move, so the old text's key would keep the erased words for good: it goes
    # as a removed record's does; the next night keys the rebuilt text afresh
    subjects = InferredSubjects.for_store(store)
    for r in rebuilt:
        if r.id in before:
            own, others = subjects.forget_removed((r.actor_id, r.namespace), {r.id: before[r.id]})
            run.tally.counts["inferred_subjects_forgotten"] += own
            run.tally.counts["inferred_subjects_rekeyed"] += others


def _reactivate_now(run: ManualRun, records: Sequence[MemoryRecord]) -> None:
    """Sources of a withdrawn replacement come back active: the next night regroups them."""
    planned = run.journal.plan([
        run.executor.new_op(OpKind.reactivate, r.actor_id, r.namespace, r.id,
                            ["REPLACEMENT_WITHDRAWN"], r.sha256,
                            replacement=r.provenance.replaced_by) for r in records
    ])  # fmt: skip
    run.executor.run_lifecycle(planned, run.tally)


def carry_pending(
    store: MemoryStore, rows: Sequence[Any], *, policy: Policy | str | None = None,
    receipts: str | ReceiptSink | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Pending erasures carried from another store (memlife/erasure_export.py: rows with
    record_id, actor_id, namespace, reason): each record found in the same scope is
    deferred here as its first erasure deferred it (a journaled operation, a deferral
    receipt, a pending row with that reason and the request's own time), so releasing its
    hold here erases it as it would have there. A row whose record is not here (or is
    another actor's) is listed; one already pending here (the file imported again) is
    not deferred twice."""
    found: list[MemoryRecord] = []
    why: dict[str, str] = {}
    asked: dict[str, str] = {}
    missing, again = [], []
    # deferred here already (the same file imported again): that deferral stands, once
    here = {(p["actor_id"], p["namespace"], p["record_id"]) for p in pending_erasures(store)}
    for p in rows:
        r = store.get(p.record_id)
        if r is None or (r.actor_id, r.namespace) != (p.actor_id, p.namespace):
            missing.append(p.record_id)
            continue
        if (r.actor_id, r.namespace, r.id) in here:
            again.append(r.id)
            continue
        found.append(r)
        why[r.id] = p.reason
        asked[r.id] = p.requested_at.isoformat()
    with lease_for_store(store, "erase-carry", "manual:erase_carry"):
        run = manual_run(store, "erase_carry", [r.id for r in found], policy=policy,
                         receipts=receipts, request={"carried": sorted(why)})  # fmt: skip
        if found:
            _defer(run, store, found, why, asked)
        run.extra.update(carried=sorted(why), not_found=sorted(missing),
                         already_pending=sorted(again))  # fmt: skip
        return run.finish()


def release_hold(
    store: MemoryStore, ids: Sequence[str], *, retention_class: RetentionClass = RetentionClass.standard,
    policy: Policy | str | None = None, receipts: str | ReceiptSink | None = None,
    now: datetime | None = None, cache: EmbeddingCache | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Lift the legal hold of these records (receipted run), then apply their pending erasures."""
    if retention_class is RetentionClass.legal_hold:
        raise EraseError("releasing a hold to legal_hold is not a release")
    require_some(store, list(dict.fromkeys(ids)), "release")
    with lease_for_store(store, "hold-release", "manual:hold_release"):  # across the erasures too
        run = manual_run(store, "hold_release", ids, policy=policy, receipts=receipts, now=now)
        try:
            summary = _release(run, store, ids, retention_class)
        finally:
            run.release()
        return _erase_released(store, summary, run, cache)


def erase_freed(
    store: MemoryStore, ids: Sequence[str], policy: Policy | str | None,
    receipts: str | ReceiptSink | None,
) -> list[dict[str, Any]]:  # fmt: skip
    """The pending erasures of records an update has just taken out of a hold (``import
    --update --allow-held``), applied now, as ``release_hold`` applies them: else the next
    night would delete as expired, or group, a record an erasure is waiting for."""
    freed = set(ids)
    actors = {p["actor_id"] for p in pending_erasures(store) if p["record_id"] in freed}
    return [erase(store, a, pending=True, policy=policy, receipts=receipts, now=utcnow())
            for a in sorted(actors)]  # fmt: skip


def _release(run: ManualRun, store: MemoryStore, ids: Sequence[str],
             retention_class: RetentionClass) -> dict[str, Any]:  # fmt: skip
    """One hold_release operation per held record, through its applier (journaled, receipted)."""
    not_held, missing, ops = [], [], []
    for rid in dict.fromkeys(ids):
        r = store.get(rid)
        if r is None:
            missing.append(rid)
        elif not r.held:
            not_held.append(rid)
        else:
            ops.append(run.executor.new_op(OpKind.hold_release, r.actor_id, r.namespace, r.id,
                                           ["HOLD_RELEASED"], r.sha256,
                                           payload=release_payload(retention_class)))  # fmt: skip
    if ops:
        run.executor.run_lifecycle(run.journal.plan(ops), run.tally)
    released = [o.record_id for o in run.journal.by_run(run.run_id)  # every attempt of this run
                if o.kind is OpKind.hold_release and o.outcome is Outcome.released]  # fmt: skip
    not_held = [i for i in not_held if i not in released]
    run.extra.update(released=released, not_held=not_held, not_found=missing,
                     retention_class=retention_class.value)  # fmt: skip
    return run.finish()


def _erase_released(store: MemoryStore, summary: dict[str, Any], run: ManualRun,
                    cache: EmbeddingCache | None) -> dict[str, Any]:  # fmt: skip
    released = set(summary["released"])
    # the released records' own pending erasures, and those their hold pinned (a
    # replacement a held source points to, deferred with it): any of their actors' rows
    records = [store.get(rid) for rid in released]
    actors = {r.actor_id for r in records if r is not None}
    if any(p["actor_id"] in actors or p["record_id"] in released
           for p in pending_erasures(store)):  # fmt: skip
        summary["erasures"] = [erase(store, a, pending=True, policy=run.policy, receipts=run.sink,
                                     now=utcnow(), cache=cache) for a in sorted(actors)]  # fmt: skip
    return summary
