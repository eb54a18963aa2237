"""Phase B: deletions after the regression gate, per shard, in batches of at most 100
(AgentCore's limit); quarantine instead when the gate blocked."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from memlife.apply.lifecycle import run_lifecycle
from memlife.apply.tally import Tally
from memlife.faults import checkpoint
from memlife.journal import OpKind, Outcome
from memlife.stores.base import MAX_BATCH, chunked

if TYPE_CHECKING:
    from memlife.apply.executor import Executor


@dataclass(frozen=True)
class DeleteItem:
    """What phase B needs to delete one record: ids and codes only, no content."""

    id: str
    actor_id: str
    namespace: str
    reasons: tuple[str, ...]
    content_sha256: str | None


def delete(ex: Executor, items: Sequence[DeleteItem], tally: Tally) -> None:
    queued = queued_deletes(ex) if items else set()
    for shard_items in by_shard(items):
        shard_items = [i for i in shard_items if not _queued(i, queued, tally)]
        # a replacement's batch before its sources' (memlife/orphans.py): the delete applier
        # lets a source go only once its replacement is gone
        shard_items.sort(key=lambda i: "REPLACEMENT_DELETED" in i.reasons)
        for n, batch in enumerate(chunked(shard_items, MAX_BATCH)):
            if (batch[0].actor_id, batch[0].namespace) in ex.stopped:
                # a StoreError stopped this shard: the rest is planned again next run, and
                # stays tonight: retained (audit 51vii: it was in no outcome)
                rest = shard_items[n * MAX_BATCH :]
                tally.ids_not_deleted += [{"id": i.id, "reason": "SHARD_STOPPED"} for i in rest]
                tally.counts["shard_stopped_records"] += len(rest)
                break
            ops = [
                ex.new_op(OpKind.delete, i.actor_id, i.namespace, i.id, i.reasons, i.content_sha256)
                for i in batch
            ]
            planned = ex.plan(ops)
            checkpoint("after_journal_write")
            for o in run_lifecycle(ex, planned, tally):
                if o.outcome is Outcome.failed:
                    tally.ids_not_deleted.append({"id": o.record_id, "reason": o.last_error})
                elif o.outcome is Outcome.skipped:  # a held source points to it, or it is
                    # a source whose replacement stays or that is active again
                    why = "SOURCE_KEPT" if "ALREADY_SUPERSEDED" in o.reasons else "HELD_SOURCE"
                    tally.ids_not_deleted.append({"id": o.record_id, "reason": why})


# past every retry the queue holds: ``due_pages`` up to it lists the whole queue, not only
# what is due at the cutoff (a retry failed again tonight is due minutes after it)
_EVER = datetime.max.replace(tzinfo=UTC)


def queued_deletes(ex: Executor) -> set[tuple[str, str, str]]:
    """(actor, namespace, record id) of every delete an earlier run still owes: planned,
    applied with its receipt owed, or failed retryably (due now or later); the retry queue
    finishes it. A terminal failure is no longer queued, and this run's own operations are
    found again by their ids (a rerun), so neither counts."""
    return {
        (o.actor_id, o.namespace, o.record_id)
        for page in ex.journal.due_pages(_EVER)
        for o in page
        if o.kind is OpKind.delete and o.run_id != ex.run_id
    }


def _queued(item: DeleteItem, queued: set[tuple[str, str, str]], tally: Tally) -> bool:
    """A record whose delete is queued gets no second one tonight: planned again each night
    its delete failed, it ended with two operations and two receipts, `deleted` and
    `already_absent` (audit 52e2). Only a delete of the same tenant's record counts: another
    kind (an erase) or another actor's record of that id is planned as before. It stays
    tonight: retained, named in ids_not_deleted."""
    if (item.actor_id, item.namespace, item.id) not in queued:
        return False
    tally.ids_not_deleted.append({"id": item.id, "reason": "DELETE_QUEUED"})
    tally.counts["delete_queued_records"] += 1
    return True


def quarantine(ex: Executor, items: Sequence[DeleteItem], tally: Tally, reason: str) -> None:
    for shard_items in by_shard(items):
        ops = [
            ex.new_op(
                OpKind.quarantine,
                i.actor_id,
                i.namespace,
                i.id,
                [*i.reasons, reason],
                i.content_sha256,
            )
            for i in shard_items
        ]
        planned = ex.plan(ops)
        checkpoint("after_journal_write")
        run_lifecycle(ex, planned, tally)
        tally.ids_not_deleted += [{"id": i.id, "reason": reason} for i in shard_items]


def by_shard(items: Sequence[DeleteItem]) -> list[list[DeleteItem]]:
    shards: dict[tuple[str, str], list[DeleteItem]] = {}
    for i in items:
        shards.setdefault((i.actor_id, i.namespace), []).append(i)
    return [shards[k] for k in sorted(shards)]
