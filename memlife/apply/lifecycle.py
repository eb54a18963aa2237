"""The lifecycle every operation runs through, first pass or resume (journal/base.py):

    PLANNED --apply--> APPLIED --receipt--> RECEIPTED
       |                  ^
       +----fail----> FAILED --(retryable, due)--+

An operation is picked up again from whatever state the journal holds; a RECEIPTED one
is never touched. The applier comes from the registry, by the operation's kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from memlife.apply.registry import Result, applier_for
from memlife.apply.retry import next_retry
from memlife.apply.tally import COUNT, Tally
from memlife.audit import ReceiptWriteError
from memlife.errors import JournalStateError, ShardStopped
from memlife.evidence_key import for_evidence
from memlife.faults import checkpoint
from memlife.journal import Operation, OpState, Outcome
from memlife.receipts import write_operation_receipt
from memlife.stores.base import ItemFailure, StoreError

if TYPE_CHECKING:
    from datetime import datetime

    from memlife.apply.executor import Executor

ApplyFn = Callable[[list[Operation]], dict[str, Result]]


def run_lifecycle(ex: Executor, ops: list[Operation], tally: Tally,
                  apply: ApplyFn | None = None) -> list[Operation]:  # fmt: skip
    """Drive ``ops`` (one kind) to RECEIPTED where possible; return each as journaled now.

    ``apply`` overrides the registered applier (tests); normally the kind decides.
    """
    todo = [o for o in ops if o.state is OpState.PLANNED or retryable(o)]
    if todo and ex.fence is not None:
        ex.fence()  # still the store's one writer (a lease taken over while paused: stop)
    if todo:
        applier = applier_for(todo[0].kind)
        fn = apply or (lambda batch: applier.apply(ex, batch, tally))
        for n, batch in enumerate(_rounds(todo)):
            if n and (batch[0].actor_id, batch[0].namespace) in ex.stopped:
                break  # the store stopped the shard: the rest stays queued for the next run
            _apply(ex, batch, fn, tally)
    done = []
    settled = []
    for o in ops:
        current = ex.journal.get(o.operation_id)
        if current is None:  # planned by this run a moment ago: a journal that lost it is broken
            raise JournalStateError(f"operation {o.operation_id} vanished from the journal")
        if current.state is OpState.APPLIED:
            current = receipt(ex, current, tally)
            if current.state is OpState.RECEIPTED:
                settled.append(current)
        done.append(current)
    if settled:
        applier_for(settled[0].kind).settle(ex, settled)
    return done


def _rounds(todo: list[Operation]) -> list[list[Operation]]:
    """``todo`` in batches that name each record once, in order. An applier answers a
    batch record by record; the retry queue's batch mixes runs, and two of them may each
    hold an operation on one record (a delete failed on two nights): one batch lost one
    answer and stopped every later night on a KeyError (audit 52e). The later operation
    then finds the record as the earlier one left it (gone: already_absent)."""
    rounds: list[list[Operation]] = []
    seen: dict[str, int] = {}
    for o in todo:
        n = seen[o.record_id] = seen.get(o.record_id, -1) + 1
        if n == len(rounds):
            rounds.append([])
        rounds[n].append(o)
    return rounds


def retryable(op: Operation) -> bool:
    """A failure comes back only with a next_retry_at; a terminal one is never replayed."""
    return op.state is OpState.FAILED and op.next_retry_at is not None


def end_terminally(ex: Executor, ops: list[Operation], code: str, tally: Tally) -> None:
    """Close unfinished operations that can no longer succeed (e.g. their replacement was
    never written): FAILED with no retry, counted once, listed for an operator."""
    for o in ops:
        if o.state is OpState.PLANNED or retryable(o):
            ex.journal.transition(o.operation_id, OpState.FAILED, outcome=Outcome.failed,
                                  error=code, next_retry_at=None, by=ex.mover)  # fmt: skip
            _count_failure(o, ItemFailure(o.record_id, code, retryable=False), None, tally)


def _count_failure(o: Operation, r: ItemFailure, retry_at: datetime | None, tally: Tally) -> None:
    tally.counts["failed"] += 1
    tally.failures.append({
        "operation_id": o.operation_id, "run_id": o.run_id, "record_id": o.record_id,
        "action": o.kind.value, "code": r.code, "retryable": r.retryable,
        "next_retry_at": retry_at.isoformat() if retry_at else None,
    })  # fmt: skip


def _apply(ex: Executor, todo: list[Operation], fn: ApplyFn, tally: Tally) -> None:
    try:
        results = fn(todo)
    except (StoreError, ShardStopped) as exc:  # e.g. quota: the shard stops
        # what the store did before it stopped stands; the rest of the batch fails
        done = exc.results if isinstance(exc, ShardStopped) else {}
        results = {o.operation_id: ItemFailure(o.record_id, exc.code) for o in todo} | done
        shard = (todo[0].actor_id, todo[0].namespace)
        if shard not in ex.stopped:  # named once in the run receipt
            ex.stopped.add(shard)
            tally.stopped_shards.append(
                {"actor_id": shard[0], "namespace": shard[1], "code": exc.code}
            )
    for o in todo:
        r = results[o.operation_id]
        if isinstance(r, ItemFailure):
            retry_at = next_retry(o.attempts + 1, ex.cutoff) if r.retryable else None
            ex.journal.transition(o.operation_id, OpState.FAILED, outcome=Outcome.failed,
                                  error=r.code, next_retry_at=retry_at, by=ex.mover)  # fmt: skip
            _count_failure(o, r, retry_at, tally)
        else:
            ex.journal.transition(o.operation_id, OpState.APPLIED, outcome=r, by=ex.mover)
            tally.counts[COUNT[r]] += 1
            if o.run_id != ex.run_id:  # an earlier run's operation, finished by the retry queue
                tally.counts[f"retry_queue_{COUNT[r]}"] += 1


def receipt(ex: Executor, op: Operation, tally: Tally) -> Operation:
    """APPLIED -> RECEIPTED once the create-only receipt is durable; else stays APPLIED."""
    checkpoint("before_receipt")
    try:
        # False: already there from a crashed run. A reviewer's decision names the reviewer.
        write_operation_receipt(ex.sink, for_evidence(op, ex.evidence_secret()),
                                reviewer=getattr(ex, "reviewer", None))  # fmt: skip
    except ReceiptWriteError as exc:
        tally.counts["receipt_failed"] += 1
        tally.failures.append({
            "operation_id": op.operation_id, "run_id": op.run_id, "record_id": op.record_id,
            "action": op.kind.value, "code": "RECEIPT_WRITE_FAILED", "retryable": True,
            "detail": type(exc.__cause__).__name__ if exc.__cause__ else "error",
        })  # fmt: skip
        return op  # stays APPLIED: the retry queue writes the receipt later
    checkpoint("after_receipt")
    return ex.journal.transition(op.operation_id, OpState.RECEIPTED, by=ex.mover)
