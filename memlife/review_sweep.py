"""Open (and waiting) review items whose finding the record itself shows gone: closed, so the
queue holds only live questions.

The queue carries an item each night its finding is made again; an item not found again
used to wait for a reviewer for ever. It is closed here only on evidence in the store, not
because a night did not make the finding (a night that deletes, holds or merges a record,
or runs at an older cutoff, never looks at some findings):

    record_gone   the record is absent, or its id is another actor's or namespace's (it
                  was removed on a night before items were closed with the operation that
                  removed them: ``run_commit.close_removed``)
    superseded    the record is superseded
    cleared       MISSING_OWNER: it has an owner now (its own, or the policy's);
                  STALE_VERIFICATION: it was verified since the item was opened;
                  LOW_SCORE: scored as the planner scores it (its reads in the access
                  ledger included) at a cutoff no earlier than the night that last found
                  it, it is at or above its type's low score, or acting on it no longer
                  matters (Planner.low_score_finding);
                  POSSIBLE_UPDATE: the newer record of the pair is gone from the shard,
                  or no longer active (superseded, pending deletion) since before this
                  night, which did not pair the record with its successor (a merge's
                  pair is renewed for the merged record the night after); or the two
                  texts no longer read as an update (``group.looks_like_update``).
                  Other findings (conflicts) are left.

Left open as well: disputed items (a dispute protects its record until a person resolves
it); items the night found (carried, renewed, moot) or an earlier attempt of this run saw;
a rerun's withheld POSSIBLE_UPDATE findings (``run_planning.reviewable``); items of shards
out of the run's scope or whose planning failed; records held, quarantined or unreadable.
Closed by memlife, an item answers nothing (``review_queue.base.ANSWERS``): should the
finding come back, it is asked again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime

from memlife.apply.appliers.base import get_many
from memlife.errors import StoreError
from memlife.group import looks_like_update
from memlife.ledger_merge import merge_into_view
from memlife.model import MemoryRecord, Status, parse_time, plan_view
from memlife.plan import Planner, Reason
from memlife.review_queue import ReviewItem, ReviewQueue
from memlife.run_types import RunContext
from memlife.stores import MemoryStore

CHUNK = 500  # records read at a time


def close_unfound(
    ctx: RunContext,
    store: MemoryStore,
    queue: ReviewQueue,
    items: Sequence[ReviewItem],
    *,
    found: Iterable[str],
    failed_shards: Iterable[tuple[str, str]],
    withheld: Iterable[str] = (),
) -> Counter[str]:
    """Close (a dry run: count) the open ``items`` (the queue's, listed once a night) the
    night did not find again and whose finding the store shows gone (module doc).

    ``found``: the ids of the items the night found (carried, renewed, closed as moot: a dry
    run writes none of that); ``failed_shards``: (actor, namespace) of the shards whose
    planning failed (never their joined name: "a" + "/x:/y" and "a:/x" + "/y" read alike) (their items stay); ``withheld``: item ids whose finding this attempt
    left out. Counts review_cleared (the record holds, its finding does not),
    review_record_superseded and review_record_gone."""
    skip_shards, skip_items = set(failed_shards), set(found) | set(withheld)

    def planned(i: ReviewItem) -> bool:
        return (
            i.last_seen_run != ctx.run_id
            and i.opened_run != ctx.run_id
            and i.item_id not in skip_items
            and ctx.config.covers(i.actor_id, i.namespace)
            and (i.actor_id, i.namespace) not in skip_shards
        )

    todo = [i for i in items if i.state in ("open", "waiting") and planned(i)]
    counts: Counter[str] = Counter()
    planner = Planner(ctx.policy, ctx.cutoff)
    for start in range(0, len(todo), CHUNK):
        part = todo[start : start + CHUNK]
        ids = {i.record_id for i in part} | {i.pair_id for i in part if i.pair_id is not None}
        try:
            records = get_many(store, sorted(ids))
        except StoreError:  # unreadable now: the items wait for a night that can read them
            counts["review_sweep_unread"] += len(part)
            continue
        for item in part:
            decision = _closing(item, records, ctx, planner)
            if decision is None:
                continue
            # an item a reviewer resolved meanwhile keeps that decision, and is not counted
            reviewer = f"memlife:{ctx.run_id}"
            if ctx.config.dry_run or queue.close(
                item.item_id, state="resolved", decision=decision, reviewer=reviewer,
                at=ctx.cutoff, operation_id=None,
            ):  # fmt: skip
                counts[_COUNTS[decision]] += 1
    return counts


_COUNTS = {
    "cleared": "review_cleared",
    "record_gone": "review_record_gone",
    "superseded": "review_record_superseded",
}


def _closing(
    item: ReviewItem, records: dict[str, MemoryRecord], ctx: RunContext, planner: Planner
) -> str | None:
    """The decision memlife closes ``item`` with, or None (it stays open)."""
    record = records.get(item.record_id)
    if record is None or not _same_shard(record, item):
        return "record_gone"  # absent, or its id taken by another actor or namespace
    if record.status is Status.superseded:
        return "superseded"
    if record.status is not Status.active or record.held:
        return None
    return "cleared" if _finding_gone(item, record, records, ctx, planner) else None


def _same_shard(record: MemoryRecord, item: ReviewItem) -> bool:
    return (record.actor_id, record.namespace) == (item.actor_id, item.namespace)


def _finding_gone(
    item: ReviewItem,
    record: MemoryRecord,
    records: dict[str, MemoryRecord],
    ctx: RunContext,
    planner: Planner,
) -> bool:
    """The store's evidence that the finding no longer holds (as the planner reads it)."""
    if item.reason == Reason.MISSING_OWNER.value:
        own = record.owner is not None and bool(record.owner.strip())
        mt = str(record.memory_type)
        return own or bool(ctx.policy.owner_for(record.actor_id, record.namespace, mt))
    if item.reason == Reason.STALE_VERIFICATION.value:
        verified = record.last_verified_at
        return verified is not None and verified >= datetime.fromisoformat(item.opened_at)
    if item.reason == Reason.LOW_SCORE.value:
        # a score falls with time: an older cutoff (a retried earlier night) would read a
        # later night's finding as gone; reads under a store-native id (CloudTrail on
        # AgentCore) are not credited here, so a score can only be read low, never high
        try:
            last_found = parse_time(item.last_seen_at)
        except (TypeError, ValueError, AttributeError):  # a row edited by hand: left open
            return False
        if ctx.cutoff < last_found:
            return False
        view = merge_into_view(plan_view(record), ctx.access_stats)
        return not planner.low_score_finding(view)
    if item.reason == Reason.POSSIBLE_UPDATE.value and item.pair_id is not None:
        newer = records.get(item.pair_id)
        if newer is None or not _same_shard(newer, item):
            return True
        if newer.created_at == record.created_at:
            # stated at one instant: no update either way (group.py since session 30); an
            # item opened before that rule is moot, and its default would retire a fact
            return True
        if not looks_like_update(newer.content, record.content):
            # the texts no longer read as an update (a rule changed since it was opened:
            # "not give up" is no cue since audit 49v): moot, as the same instant above
            return True
        # a newer record no longer active (superseded by a reviewer or a merge, pending
        # deletion) cannot replace this one. The night it changed, the pair waits for its
        # successor (the planner pairs the record with a merged record the next night, and
        # the item is renewed); a night after that which did not find it again leaves it
        # moot, not open for good with its default decision refused (session 30 review)
        changed = newer.status_changed_at
        return newer.status is not Status.active and (changed is None or changed < ctx.cutoff)
    return False
