"""A reviewer's decision that an earlier attempt left unfinished: the same resolve finishes it.

`review resolve ITEM --decision delete` killed after the delete and before its receipt (or
before the item was closed) left the record gone, the operation APPLIED and the item open.
The same command then found no record ("no longer exists") and stopped, so the delete had
no receipt until a night completed it (invariant 2), and the item stayed open for a record
that no longer exists. A rerun of the decision now takes up that attempt's operations
instead: unfinished ones are carried to their receipt by the rerun's own run (as a night
resumes due operations), and one already receipted only has its item closed.

An earlier attempt is recognised by its operations alone: this item's record, actor and
namespace, the decision's kind, and the reason codes the resolve writes
(``REVIEW_<DECISION>`` beside the item's reason), created since the item was opened.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from memlife.apply.lifecycle import retryable
from memlife.audit import ReceiptSink
from memlife.journal import Journal, Operation, OpKind, OpState, Outcome
from memlife.journal.base import operation_id
from memlife.model import parse_time
from memlife.review_queue.base import ReviewItem

# what a receipted attempt did, when its record is gone: the decision was carried out
DONE = frozenset({Outcome.deleted, Outcome.already_absent, Outcome.superseded})


def earlier_attempt(
    journal: Journal,
    item: ReviewItem,
    decision: str,
    kind: OpKind,
    others: Collection[str] = (),
) -> list[Operation]:
    """The latest earlier attempt's operations of ``decision`` on ``item`` (its main
    operation first, then the deletes that went with it), or [] when there is none, or
    when it ended otherwise (refused, skipped, failed for good). ``others``: operations
    other items of the record were closed with, never this item's attempts."""
    opened = _time(item.opened_at)
    mine = [
        o for o in journal.for_record(item.record_id)
        if o.record_id == item.record_id and o.kind is kind  # for_record: replacements too
        and (o.actor_id, o.namespace) == (item.actor_id, item.namespace)
        and f"REVIEW_{decision.upper()}" in o.reasons and item.reason in o.reasons
        # the item's opening is a night's cutoff, the operation's time the journal's clock:
        # a night at an earlier cutoff (a catch-up, --now) opens an item "before" the
        # delete that closed its predecessor, so that delete is told apart by its item
        and (opened is None or o.created_at is None or o.created_at >= opened)
        and o.operation_id not in others
    ]  # fmt: skip
    if not mine:
        return []
    main = max(mine, key=lambda o: o.created_at.timestamp() if o.created_at else 0.0)
    if not (unfinished(main) or (main.state is OpState.RECEIPTED and main.outcome in DONE)):
        return []
    rest = [o for o in journal.by_run(main.run_id)
            if o.operation_id != main.operation_id and unfinished(o)]  # fmt: skip
    return [main, *rest]


def same_request(
    sink: ReceiptSink,
    op: Operation,
    item: ReviewItem,
    decision: str,
    reviewer: str,
    replacement: str | None,
) -> bool:
    """Whether ``op`` is this very decision: the same replacement, and the same reviewer,
    told by its operation id (keyed by its run's key, in that run's manifest, with the
    item, the decision and the reviewer). Another reviewer's attempt is not finished under
    this one's name, nor a supersede to another record (session 29 review)."""
    from memlife.review import find_run

    if op.kind is OpKind.supersede and op.replacement_id != replacement:
        return False
    run = find_run(sink, op.run_id)
    key = run.manifest.get("run_key") if run is not None else None
    if not isinstance(key, str):
        return False
    return operation_id(key, op.kind, [item.item_id, decision, reviewer]) == op.operation_id


def unfinished(op: Operation) -> bool:
    """Not yet at its receipt, and not failed for good."""
    return op.state in (OpState.PLANNED, OpState.APPLIED) or retryable(op)


def _time(value: str) -> datetime | None:
    try:
        return parse_time(value)
    except ValueError:
        return None
