"""Resolving a review item (``memlife review resolve``): a manual run, journaled, applied
and receipted with the reviewer's identity (package doc)."""

from __future__ import annotations

import builtins
import json
from datetime import datetime
from typing import Any

from memlife.lease import scoped as lease_scoped
from memlife.model import Status
from memlife.plan import Reason
from memlife.review_queue.base import ReviewItem
from memlife.review_queue.decisions import (
    ACTS_ON_CONTENT,
    ReplacementNotFound,
    ReviewDecision,
    ReviewError,
    ReviewItemNotFound,
)
from memlife.review_queue.queue import ReviewQueue
from memlife.review_queue.seen import seen_token
from memlife.review_queue.unfinished import earlier_attempt, same_request, unfinished


@lease_scoped  # the lease its decision run takes is given back however the resolve ends
def resolve(
    store: Any, iid: str, decision: ReviewDecision | str, reviewer: str, *,
    by: str | None = None, policy: Any = None, receipts: Any = None, now: datetime | None = None,
    seen: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Carry out a reviewer's decision on one item: journaled, receipted with the reviewer.
    ``seen``: the token ``review show`` printed; refused when the texts changed since."""
    from memlife.audit import as_sink
    from memlife.journal import OpKind, OpState, open_journal
    from memlife.quarantine import manual_run

    decision = ReviewDecision(decision)
    if by is not None and decision is not ReviewDecision.supersede:  # else silently ignored
        raise ReviewError(f"--by is for --decision supersede, not {decision.value}")
    if not reviewer or not reviewer.strip():
        raise ReviewError("a reviewer identity is required (--reviewer)")
    queue = ReviewQueue.for_store(store)
    item = queue.get(iid)
    if item is None:
        raise ReviewItemNotFound(f"review item {iid}: not found")
    if item.state == "resolved":
        raise ReviewError(
            f"review item {iid}: already resolved ({item.decision} by {item.reviewer})"
        )
    record = store.get(item.record_id)
    if record is not None and (record.actor_id, record.namespace) != (
        item.actor_id,
        item.namespace,
    ):
        # the id was freed and taken by another actor or namespace: not this item's record
        # (invariant 8); the item can only be closed (keep), and nothing is read or written
        record = None
    kind = {ReviewDecision.supersede: OpKind.supersede, ReviewDecision.delete: OpKind.delete}.get(
        decision, OpKind.review
    )
    # the same decision killed part way (after the delete, before its receipt): finished now
    # a predecessor item's decision (the record deleted, imported again, found again) is not
    # an attempt of this one: the operations other items were closed with are left out
    others = {o.operation_id for o in queue.for_record(item.record_id, item.actor_id,
                                                         item.namespace)
              if o.item_id != iid and o.operation_id}  # fmt: skip
    earlier = earlier_attempt(open_journal(store), item, decision.value, kind, others)
    if earlier and not same_request(as_sink(receipts), earlier[0], item, decision.value,
                                    reviewer, by or item.pair_id):  # fmt: skip
        raise ReviewError(
            f"review item {iid}: an earlier {decision.value} of it (run {earlier[0].run_id}) "
            "is unfinished and was another request (another reviewer or replacement): the "
            "next nightly run completes it, then the item can be answered"
        )
    if seen is not None and not earlier and seen.strip() != (now_seen := seen_token(store, item)):
        # a night renewed the item for changed text between the reviewer's show and this
        # resolve: the decision would land on a text nobody read (audit 53b's Left)
        raise ReviewError(
            f"review item {iid}: its records changed since you read them (--seen {seen.strip()},"
            f" now {now_seen}): run `memlife review show {iid}` again and decide on what it says"
        )
    if record is None and decision is not ReviewDecision.keep and not earlier:
        raise ReviewError(
            f"review item {iid}: record {item.record_id} no longer exists in "
            f"{item.actor_id} {item.namespace}"
        )
    replacement = by or item.pair_id
    if decision is ReviewDecision.supersede:
        if not replacement:
            raise ReviewError(f"review item {iid}: supersede needs a pair item or --by RECORD_ID")
        if replacement == item.record_id:  # invariant 3: a record cannot replace itself
            raise ReviewError(f"review item {iid}: a record cannot be superseded by itself")
        newer = store.get(replacement)
        if newer is None and by is not None:
            raise ReplacementNotFound(f"review item {iid}: replacement {by}: no such record")
        if newer is not None and (newer.actor_id, newer.namespace) != (
            item.actor_id,
            item.namespace,
        ):
            raise ReviewError(
                f"review item {iid}: replacement {replacement} is in another actor/namespace"
            )
        if newer is None or newer.status is not Status.active:
            now_by = newer.provenance.replaced_by if newer is not None else None
            raise ReviewError(
                f"review item {iid}: replacement {replacement} is not an active record"
                + (" (it no longer exists; name one with --by RECORD_ID)" if newer is None
                   else f" (it was superseded by {now_by}: use --by {now_by})" if now_by
                   else f" ({newer.status.value})")
            )  # fmt: skip
    if record is not None and decision.value in ACTS_ON_CONTENT:
        # The item is about the content it was opened on (or last renewed for by a night).
        # A hash of None is an item opened before hashes were kept: which content it was
        # about is unknown, so, as for changed content, it is refused until the next night
        # records the hash on it (keep and dispute are not affected).
        if item.content_sha256 is None:
            raise ReviewError(
                f"review item {iid}: opened before content hashes were kept, so the content "
                f"it was about is unknown; {decision.value} is refused until the next nightly "
                "run records it (keep or dispute may proceed)"
            )
        if record.sha256 != item.content_sha256:
            raise ReviewError(
                f"review item {iid}: record {item.record_id} changed since the item was opened "
                f"(content sha256 {item.content_sha256[:12]}… now {record.sha256[:12]}…); "
                f"{decision.value} is refused: the next nightly run reopens the item for the "
                "new content (keep or dispute may proceed)"
            )
    if (
        record is not None
        and decision is ReviewDecision.verify
        and record.status is not Status.active
    ):
        # a superseded or quarantined record is out of recall: nothing to verify it against
        raise ReviewError(
            f"review item {iid}: record {item.record_id} is {record.status.value}, not active; "
            "verify is refused (keep or dispute may proceed)"
        )
    held = record is not None and record.held
    if held and decision in (
        ReviewDecision.supersede,
        ReviewDecision.delete,
        ReviewDecision.verify,
    ):
        raise ReviewError(f"review item {iid}: record {item.record_id} is under legal hold")
    deletes = decision is ReviewDecision.delete and not earlier
    trail = _followers(store, queue, iid, record) if deletes else []
    # one run per decision on one item by one reviewer: two items of a record resolved at the
    # same ``now`` (a review UI's batch time) are two runs, each with its own receipt
    request = {"item": iid, "decision": decision.value, "reviewer": reviewer}
    if earlier:
        request["finishes"] = earlier[0].run_id
    run = manual_run(store, f"review_{decision.value}", [item.record_id], policy=policy,
                     receipts=receipts, now=now, request=request)  # fmt: skip
    run.executor.reviewer = reviewer
    again = queue.get(iid)  # under the lease now: another reviewer may have resolved it meanwhile
    if again is None or again.state == "resolved":
        run.extra["refused"] = "ALREADY_RESOLVED"
        run.finish()
        by_whom = f" ({again.decision} by {again.reviewer})" if again is not None else ""
        raise ReviewError(f"review item {iid}: already resolved{by_whom}")
    if again.state == "disputed" and (again.state, again.reviewer) != (item.state, item.reviewer):
        # disputed by someone since this decision was checked: it was made on an item nobody
        # had disputed, and would end that dispute unseen (a delete took the record; audit 51b)
        run.extra["refused"] = "DISPUTED_MEANWHILE"
        run.finish()
        raise ReviewError(
            f"review item {iid}: disputed by {again.reviewer} meanwhile; {decision.value} is "
            "refused: read the item again (a decision on a disputed item ends its dispute)"
        )
    if deletes:
        # checked again under the lease: another reviewer may have disputed the record (or
        # one that goes with it) between the check above and the lease (audit 49b)
        try:
            trail = _followers(store, queue, iid, record)
        except ReviewError as exc:
            run.extra["refused"] = "DISPUTED" if isinstance(exc, _Disputed) else "HELD_SOURCE"
            run.finish()
            raise
    if earlier:  # that attempt's own operations, carried to their receipts by this run
        op, todo = earlier[0], [o for o in earlier if unfinished(o)]
        run.extra["finished_run"] = op.run_id
    else:
        todo = _new_ops(run, item, decision, reviewer, kind, record, replacement, trail)
        op = todo[0]
    from memlife.apply.lifecycle import run_lifecycle
    from memlife.journal import Outcome

    ran = run_lifecycle(run.executor, run.journal.plan(todo), run.tally) if todo else []
    done = next((o for o in ran if o.operation_id == op.operation_id), op)
    if earlier:  # the attempt that left them gets its run receipt too
        run.seal_abandoned()
    kept = decision is ReviewDecision.delete and done.outcome is Outcome.skipped
    if kept:  # a hold placed on a record superseded by it since the check: it stays
        run.extra["refused"] = "HELD_SOURCE"
    elif done.state is OpState.RECEIPTED or done.state is OpState.APPLIED:
        state = "disputed" if decision is ReviewDecision.dispute else "resolved"
        queue.close(iid, state=state, decision=decision.value, reviewer=reviewer, at=run.cutoff,
                    operation_id=done.operation_id)  # fmt: skip
        if decision in (ReviewDecision.supersede, ReviewDecision.delete):
            # the record is gone from recall: its other open items have nothing left to
            # decide. A dispute stands: it still guards the record (and, through its
            # replacement, from a delete) until someone resolves it
            for other in queue.for_record(item.record_id, item.actor_id, item.namespace):
                if other.item_id != iid and other.state not in ("resolved", "disputed"):
                    queue.close(other.item_id, state="resolved", decision=decision.value,
                                reviewer=reviewer, at=run.cutoff, operation_id=done.operation_id)  # fmt: skip
    run.extra["reviewer"] = reviewer
    run.extra["item_id"] = iid
    summary = run.finish()
    if kept:
        raise ReviewError(
            f"review item {iid}: record {item.record_id} was kept: a record it replaces is "
            "under legal hold (a held source pins its replacement); the item stays open"
        )
    resolved = queue.get(iid)
    if resolved is None:  # the queue lost the item it just closed: not a reviewer's mistake
        raise RuntimeError(f"review item {iid} vanished while it was resolved")
    summary["item"] = resolved.as_json()
    return summary


def _new_ops(
    run: Any, item: ReviewItem, decision: ReviewDecision, reviewer: str, kind: Any,
    record: Any, replacement: str | None, trail: builtins.list[Any],
) -> builtins.list[Any]:  # fmt: skip
    """The decision's operation, then the deletes of the records superseded by the one
    deleted (each its own receipted delete, decided after it: the delete applier lets a
    source go only once its replacement does)."""
    from memlife.journal import OpKind

    op = run.executor.new_op(
        kind, item.actor_id, item.namespace, item.record_id,
        [f"REVIEW_{decision.value.upper()}", item.reason],
        # the precondition the applier re-checks (stale()): the reviewed content, so a change
        # between this check and the apply is STALE_PRECONDITION and nothing is done
        item.content_sha256 if decision.value in ACTS_ON_CONTENT
        else record.sha256 if record is not None else None,
        replacement=replacement if decision is ReviewDecision.supersede else None,
        payload=json.dumps({"decision": decision.value}),
        key_ids=[item.item_id, decision.value, reviewer],
    )  # fmt: skip
    follow = [
        run.executor.new_op(OpKind.delete, s.actor_id, s.namespace, s.id,
                            [Reason.ALREADY_SUPERSEDED.value, Reason.REPLACEMENT_DELETED.value],
                            s.sha256, key_ids=[item.item_id, decision.value, reviewer, s.id])
        for s in trail
    ]  # fmt: skip
    return [op, *follow]


class _Disputed(ReviewError):
    """A delete refused because a record it would remove is disputed."""


def _followers(store: Any, queue: ReviewQueue, iid: str, record: Any) -> builtins.list[Any]:
    """The superseded records that would go with ``record`` (memlife/orphans.py), nearest
    first; a delete is refused, before anything is written, while the record itself is
    disputed, or one of them is held (a held source pins its replacement, as at night) or
    disputed (never deleted until its item is resolved). Asked before the run and again
    under its lease (``_Disputed`` for a dispute)."""
    from memlife.orphans import followers

    if record is None:
        return []
    marked = queue.disputed(record.actor_id, record.namespace)
    # every disputed item of the record, not only those its item ids reach: a dispute
    # carried by `import --erasures` before audit 49b kept an id no lookup reaches
    disputes = [] if record.id not in marked else [
        i.item_id for i in queue.list(actor=record.actor_id, states=("disputed",))
        if (i.record_id, i.namespace) == (record.id, record.namespace) and i.item_id != iid
    ]  # fmt: skip
    if disputes:  # disputed through another item of the record (session 41): it stands
        raise _Disputed(
            f"review item {iid}: record {record.id} is disputed in review item {disputes[0]}: "
            "a disputed record is never deleted until its dispute is resolved; the delete "
            "is refused (resolve that item)"
        )
    trail = followers(store, record)
    held = sorted(s.id for s in trail if s.held)
    if held:
        raise ReviewError(
            f"review item {iid}: record {record.id} replaces {', '.join(held[:5])}, under "
            "legal hold: a held source pins its replacement, so the delete is refused "
            "(release the hold first, or keep)"
        )
    disputed = sorted({s.id for s in trail} & marked)
    if disputed:
        raise _Disputed(
            f"review item {iid}: record {record.id} replaces {', '.join(disputed[:5])}, "
            "disputed: a disputed record is never deleted until its item is resolved, and it "
            "would go with its replacement; the delete is refused"
        )
    return trail
