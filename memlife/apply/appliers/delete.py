"""delete: remove a record (hard expiry, pending past grace). A record already gone is done.

Its content's vector, token codes and inferred subject key go with it (forget_content)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memlife.apply.appliers.base import (
    BaseApplier,
    as_read,
    get_many,
    gone_outcome,
    stale,
    until_stopped,
)
from memlife.apply.registry import Result, register
from memlife.consolidate.replacement import past_lifetime
from memlife.errors import ShardStopped
from memlife.faults import checkpoint
from memlife.journal import Operation, OpKind, Outcome
from memlife.model import MemoryRecord, Status, content_sha256

if TYPE_CHECKING:
    from memlife.apply.executor import Executor
    from memlife.apply.tally import Tally


def delete_records(ex: Executor, ops: list[Operation]) -> dict[str, Result]:
    """Delete in one batch, re-checking each record right before (a hold may be new)."""
    by_record = {o.record_id: o for o in ops}
    current = get_many(ex.store, list(by_record))
    # held now, not at planning: a hold placed since pins what its record names as well
    pinned = _pinned(ex, current) | _disputed(ex, ops)
    out: dict[str, Result] = {}
    ids: list[str] = []
    # a replacement's own delete decided first: its sources follow only if it goes
    for rid, o in sorted(by_record.items(), key=lambda kv: "REPLACEMENT_DELETED" in kv[1].reasons):
        r = current.get(rid)
        refused = stale(o, r) if r is not None else None
        if refused is not None:
            out[o.operation_id] = refused
        elif rid in pinned or (r is not None and not _still_superseded(ex, o, r, ids)):
            out[o.operation_id] = Outcome.skipped  # kept: held, disputed, no longer superseded
        else:
            ids.append(rid)
    if ids:
        # first: a failure here deletes nothing and the batch is retried; after the delete
        # it would leave records gone with no receipt that says so (only already_absent).
        # A hold placed on a record meanwhile still wins: SQLite's DELETE refuses it.
        forget_content(ex, [by_record[rid] for rid in ids], current)
        expect = as_read(ex, {rid: current[rid] for rid in ids if rid in current})
        res, stop = until_stopped(lambda: ex.store.delete_many(ids, **expect))
        checkpoint("after_delete")
        for rid in res.succeeded:
            out[by_record[rid].operation_id] = Outcome.deleted
        for rid in res.missing:
            out[by_record[rid].operation_id] = gone_outcome(ex, by_record[rid], rid in current)
        for f in res.failed:
            out[by_record[f.id].operation_id] = f
        if stop is not None:
            raise ShardStopped(stop, out)
    return out


def _disputed(ex: Executor, ops: list[Operation]) -> set[str]:
    """Records a reviewer disputed since their delete was planned (a rerun or the retry
    queue carries out a delete journaled before the dispute; audit 51b): the planner keeps
    a disputed record (DISPUTED), and so does its delete now. A reviewer's own delete
    (REVIEW_DELETE) is the answer that ends its item's dispute (resolving.py checks it),
    but only in a reviewer's resolve, which checked the disputes under its lease: the same
    delete retried by a night's queue was checked before a later dispute (audit 51r)."""
    own = ex.reviewer is not None
    asked = [o for o in ops if not (own and "REVIEW_DELETE" in o.reasons)]
    if not asked:
        return set()
    queue = ex.review_backend()
    marked = {s: queue.disputed(*s) for s in {(o.actor_id, o.namespace) for o in asked}}
    return {o.record_id for o in asked if o.record_id in marked[(o.actor_id, o.namespace)]}


def _still_superseded(ex: Executor, o: Operation, r: MemoryRecord, going: list[str]) -> bool:
    """A delete planned for a superseded record (its retention over, or its replacement
    deleted: memlife/orphans.py) still holds only while the record is superseded (an
    erasure may have made it active again since), and, for REPLACEMENT_DELETED, while its
    replacement is gone or ``going`` (deleted by this batch: a hold placed on the
    replacement keeps it, and so its sources). A forgotten record past its grace, or an
    expired one, still holds only while it is forgotten, or its deadline past: an agent
    may have written it again since the plan (a LangGraph put of the same key and value)."""
    if "GRACE_ELAPSED" in o.reasons and r.status is not Status.pending_delete:
        return False  # written active again since the plan: no grace left to end
    if {"HARD_EXPIRED", "TTL_EXPIRED"} & set(o.reasons):
        if not past_lifetime(r, ex.policy.ttl_days(), ex.cutoff):
            return False  # written again since the plan with a later deadline, or none
    if "ALREADY_SUPERSEDED" not in o.reasons:
        return True
    if r.status is not Status.superseded:
        return False
    if "REPLACEMENT_DELETED" not in o.reasons:
        return True
    by = r.provenance.replaced_by
    if by is None or by in going:
        return True
    other = ex.store.get(by)  # gone, or another actor's or namespace's (orphans.py)
    return other is None or (other.actor_id, other.namespace) != (r.actor_id, r.namespace)


def _pinned(ex: Executor, current: dict[str, MemoryRecord]) -> set[str]:
    """Those of ``current`` a held record reaches (memlife/pinned.py), read now."""
    from memlife.model import link_of
    from memlife.pinned import held_superseded, pinned_by_a_hold  # pinned imports the planner

    shards = ((r.actor_id, r.namespace) for r in current.values())
    held = held_superseded(ex.store, shards, ex.held_paged)
    return pinned_by_a_hold(ex.store, {rid: link_of(r) for rid, r in current.items()}, held)


def forget_content(ex: Executor, gone: list[Operation], current: dict[str, MemoryRecord]) -> None:
    """What the records about to be deleted left beside the store goes first: the vector
    and token codes of their content (the codes' word-piece ids spell the text) in the
    run's cache and the dry runs' file, their shards' derived rows, and their inferred
    subject keys (content words; also off the records grouped under a key their words
    made). A text another record of the actor still holds keeps its vector. A record the
    delete then misses is only embedded again when next asked. Erasure does more
    (apply/appliers/erase.py)."""
    from memlife.derived import forget_for
    from memlife.embed_cache import with_dry_runs_cache
    from memlife.inferred import InferredSubjects

    shards: dict[tuple[str, str], dict[str, str | None]] = {}
    shas: dict[str, set[str]] = {}  # by actor
    for o in gone:
        r = current.get(o.record_id)
        shards.setdefault((o.actor_id, o.namespace), {})[o.record_id] = r.content if r else None
        mine = shas.setdefault(o.actor_id, set())
        mine |= {o.content_sha256} if o.content_sha256 else set()
        if r is not None:
            mine |= {r.sha256, content_sha256(r.content)}
    held = getattr(ex.store, "contents_held", None)
    leaving = {o.record_id for o in gone}
    drop = [
        sha
        for actor, mine in shas.items()
        for sha in (mine - held(actor, mine, leaving) if held is not None else mine)
    ]
    with with_dry_runs_cache(ex.removal_cache()) as caches:
        for c in caches:
            c.delete_for(drop)
            forget_for(c, shards)
    subjects = InferredSubjects.for_store(ex.store)
    for shard, removed in shards.items():
        subjects.forget_removed(shard, removed)


@register
class Delete(BaseApplier):
    kind = OpKind.delete
    checkpoint = "after_delete"

    def apply(self, ex: Executor, ops: list[Operation], tally: Tally) -> dict[str, Result]:
        return delete_records(ex, ops)

    def settle(self, ex: Executor, ops: list[Operation]) -> None:
        """A quarantine snapshot of a deleted record goes with it: snapshots are keyed by
        record id, and another actor's record may take the id (a restore would apply it)."""
        from memlife.state.side import side_tables

        gone = [o.record_id for o in ops if o.outcome in (Outcome.deleted, Outcome.already_absent)]
        if gone:
            side_tables(ex.store).forget_snapshots(gone)
