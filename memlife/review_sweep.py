"""Open review items a night no longer finds: closed, so the queue holds only live questions.

The queue carries an item each night its finding is made again. An item the night planned
the record of, and did not find again, asks about something that no longer holds: an owner
was set, the record was verified or read again, its POSSIBLE_UPDATE pair went, or its
record is gone (deleted or superseded on a night before such items were closed with the
operation that removed them: ``run_commit.close_removed``). Left open, it waited for a
reviewer for ever. Closed by memlife, it answers nothing (``review_queue.base.ANSWERS``):
should the finding come back, it is asked again.

Left open: disputed items (a dispute protects its record until a person resolves it);
items of shards the run did not plan (out of scope, failed); items the run saw (carried,
renewed or opened by an earlier attempt of this run: a rerun closes nothing the first
attempt kept); items whose POSSIBLE_UPDATE finding a rerun withheld
(``run_planning.reviewable``); and items whose record the night did not plan (held,
quarantined, written after the cutoff, or unreadable).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from memlife.apply.appliers.base import get_many
from memlife.errors import StoreError
from memlife.model import MemoryRecord, Status
from memlife.namespaces import glob_match
from memlife.review_queue import ReviewItem, ReviewQueue
from memlife.run_types import RunContext
from memlife.stores import MemoryStore

CHUNK = 500  # records read at a time


def close_unfound(
    ctx: RunContext,
    store: MemoryStore,
    queue: ReviewQueue,
    *,
    found: Iterable[str],
    failed_shards: Iterable[str],
    withheld: Iterable[str] = (),
) -> Counter[str]:
    """Close (a dry run: count) the open items the night planned and did not find again.

    ``found``: the ids of the items the night found (carried, renewed, closed as moot: a dry
    run writes none of that); ``failed_shards``: "actor:namespace" of the shards whose
    planning failed (their items stay); ``withheld``: item ids whose finding this attempt
    left out. Counts review_cleared (the record holds, its finding does not),
    review_record_superseded and review_record_gone."""
    skip_shards, skip_items = set(failed_shards), set(found) | set(withheld)
    actors, globs = set(ctx.config.actors), ctx.config.namespaces

    def planned(i: ReviewItem) -> bool:
        return (
            i.last_seen_run != ctx.run_id
            and i.opened_run != ctx.run_id
            and i.item_id not in skip_items
            and (not actors or i.actor_id in actors)
            and (not globs or any(glob_match(g, i.namespace) for g in globs))
            and f"{i.actor_id}:{i.namespace}" not in skip_shards
        )

    items = [i for i in queue.list(states=("open",)) if planned(i)]
    counts: Counter[str] = Counter()
    for start in range(0, len(items), CHUNK):
        part = items[start : start + CHUNK]
        try:
            records = get_many(store, sorted({i.record_id for i in part}))
        except StoreError:  # unreadable now: the items wait for a night that can read them
            counts["review_sweep_unread"] += len(part)
            continue
        for item in part:
            decision = _closing(item, records.get(item.record_id), ctx)
            if decision is None:
                continue
            counts[_COUNTS[decision]] += 1
            if not ctx.config.dry_run:
                queue.close(item.item_id, state="resolved", decision=decision,
                            reviewer=f"memlife:{ctx.run_id}", at=ctx.cutoff, operation_id=None)  # fmt: skip
    return counts


_COUNTS = {
    "cleared": "review_cleared",
    "record_gone": "review_record_gone",
    "superseded": "review_record_superseded",
}


def _closing(item: ReviewItem, record: MemoryRecord | None, ctx: RunContext) -> str | None:
    """The decision memlife closes ``item`` with, or None where the night did not plan its
    record (the item stays open)."""
    if record is None or (record.actor_id, record.namespace) != (item.actor_id, item.namespace):
        return "record_gone"  # absent, or its id taken by another actor or namespace
    if record.status is Status.superseded:
        return "superseded"
    if record.status is not Status.active or record.held or record.created_at > ctx.cutoff:
        return None
    return "cleared"
