"""erase: delete a record named by an erasure request, and everything derived from its content.

Besides the record: embedding-cache rows of its content, access-ledger rows, journal
payloads that mention it, its quarantine snapshot and its pending-erasure row. Each
clean-up is idempotent, so a resumed erase (record already gone) finishes them all.
"""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING

from memlife.apply.appliers.base import (
    SCOPE_CHANGED,
    BaseApplier,
    as_read,
    get_many,
    gone_outcome,
    is_held,
    until_stopped,
)
from memlife.apply.registry import Result, register
from memlife.errors import ShardStopped
from memlife.faults import checkpoint
from memlife.journal import JournalStateError, Operation, OpKind, Outcome
from memlife.model import content_sha256
from memlife.stores.base import ItemFailure

if TYPE_CHECKING:
    from memlife.apply.executor import Executor
    from memlife.apply.tally import Tally


@register
class Erase(BaseApplier):
    kind = OpKind.erase
    checkpoint = "after_delete"

    def apply(self, ex: Executor, ops: list[Operation], tally: Tally) -> dict[str, Result]:
        out: dict[str, Result] = {}
        current = get_many(ex.store, [o.record_id for o in ops])
        shas: dict[str, set[str]] = {
            o.record_id: {o.content_sha256} if o.content_sha256 else set() for o in ops
        }
        ids = []
        for o in ops:
            r = current.get(o.record_id)
            if r is not None and is_held(r):  # a hold placed since selection
                out[o.operation_id] = ItemFailure(o.record_id, "LEGAL_HOLD", retryable=False)
                continue
            if r is not None and (r.actor_id, r.namespace) != (o.actor_id, o.namespace):
                # the id is another actor's record now: not the one asked to be erased
                out[o.operation_id] = ItemFailure(o.record_id, SCOPE_CHANGED, retryable=False)
                continue
            if r is not None:
                shas[o.record_id] |= {r.sha256, content_sha256(r.content)}
            ids.append(o.record_id)
        by_record = {o.record_id: o for o in ops}
        # its text may have changed since: an erasure takes the record whatever it says now
        expect = as_read(ex, {rid: current[rid] for rid in ids if rid in current})
        if expect:
            expect["any_text"] = True
        res, stop = until_stopped(lambda: ex.store.delete_many(ids, **expect))
        checkpoint(self.checkpoint)
        for rid in res.succeeded:
            out[by_record[rid].operation_id] = Outcome.deleted
        for rid in res.missing:  # a killed attempt's own delete is this erasure's to claim
            out[by_record[rid].operation_id] = gone_outcome(ex, by_record[rid], rid in current)
        for f in res.failed:
            out[by_record[f.id].operation_id] = f
        gone = [*res.succeeded, *res.missing]
        if gone:
            shards: dict[tuple[str, str], dict[str, str | None]] = {}
            for rid in gone:
                o, r = by_record[rid], current.get(rid)
                shards.setdefault((o.actor_id, o.namespace), {})[rid] = r.content if r else None
            _forget_derived(ex, gone, [s for rid in gone for s in shas[rid]], tally, shards)
        if stop is not None:  # what it did delete is forgotten above, then the shard stops
            raise ShardStopped(stop, out)
        return out


def _forget_derived(
    ex: Executor, gone: list[str], shas: list[str], tally: Tally,
    shards: dict[tuple[str, str], dict[str, str | None]],
) -> None:  # fmt: skip
    from memlife.backends import open_ledger
    from memlife.derived import forget_for
    from memlife.embed_cache import with_dry_runs_cache
    from memlife.state.side import side_tables

    cache = ex.removal_cache()  # the dry runs' file: erase.py's caller (home_caches)
    # an erase retried by a later run (the nightly retry queue, `erase --pending`) runs
    # with the store's cache: the dry runs' file on this machine is cleaned all the same
    # (its vectors, and the model answers a dry run kept: consolidate/answers.py)
    with with_dry_runs_cache(cache) as caches:
        for c in caches:
            c.delete_for(shas)
            # results derived from the shard (an inferred subject key holds content words)
            tally.counts["derived_rows_forgotten"] += forget_for(c, shards)
            if c is not cache:  # secure_delete zeroed the rows; the WAL still holds them
                c.fold_wal()
    # the access ledger forgets them (on S3 with $MEMLIFE_STATE)
    ledger = open_ledger(store=ex.store)
    for actor in sorted({a for a, _ in shards}):  # the erased records' own actor's rows only
        ids = [rid for (a, _), recs in shards.items() if a == actor for rid in recs]
        tally.counts["ledger_rows_erased"] += int(ledger.erase(ids, actor_id=actor))
    tally.counts["journal_payloads_forgotten"] += ex.journal.forget_payloads(gone)
    side = side_tables(ex.store)
    side.forget_snapshots(gone)
    from memlife.inferred import InferredSubjects

    # an inferred subject key holds content words: it goes with the record, and off the
    # records grouped under it since
    subjects = InferredSubjects.for_store(ex.store)
    for shard, removed in shards.items():
        own, others = subjects.forget_removed(shard, removed)
        tally.counts["inferred_subjects_forgotten"] += own
        tally.counts["inferred_subjects_rekeyed"] += others
    for deferred in side.forget_pending(gone):  # the deferral is settled, not pending
        with suppress(JournalStateError):
            ex.journal.resolve(deferred, "ERASED_AFTER_RELEASE", at=ex.cutoff)
