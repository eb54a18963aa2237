"""hold_release: lift a legal hold; the payload names the retention class the record gets."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from memlife.apply.appliers.base import (
    CHANGED,
    SCOPE_CHANGED,
    BaseApplier,
    get_many,
    is_held,
    keeping,
    record_missing,
    write_retention,
)
from memlife.apply.registry import Result, register
from memlife.faults import checkpoint
from memlife.journal import Operation, OpKind, Outcome
from memlife.model import MemoryRecord, RetentionClass, Status
from memlife.stores.base import ItemFailure

if TYPE_CHECKING:
    from memlife.apply.executor import Executor
    from memlife.apply.tally import Tally


def release_payload(retention_class: RetentionClass) -> str:
    return json.dumps({"retention_class": retention_class.value})


@register
class HoldRelease(BaseApplier):
    kind = OpKind.hold_release
    checkpoint = "after_supersede"

    def apply(self, ex: Executor, ops: list[Operation], tally: Tally) -> dict[str, Result]:
        out: dict[str, Result] = {}
        current = get_many(ex.store, [o.record_id for o in ops])
        with keeping(out):
            for o in ops:
                out[o.operation_id] = self._release(ex, o, current.get(o.record_id))
        return out

    def _release(
        self, ex: Executor, o: Operation, r: MemoryRecord | None, again: bool = True
    ) -> Result:
        target = RetentionClass(json.loads(o.payload or "{}").get("retention_class", "standard"))
        if r is None:
            return record_missing(o)
        if (r.actor_id, r.namespace) != (o.actor_id, o.namespace):
            # another actor's record under the id now: its hold is not ours to lift, nor its
            # pending erasures ours to run (invariants 1 and 8)
            return ItemFailure(o.record_id, SCOPE_CHANGED, retryable=False)
        if _held_since(ex, o):  # a later request wins: an interrupted release never lifts it
            return ItemFailure(o.record_id, "HOLD_PLACED_SINCE", retryable=False)
        if not is_held(r):  # released already: by our crashed attempt, or by hand
            if r.retention_class is target:
                return Outcome.released
            return ItemFailure(o.record_id, "NOT_HELD", retryable=False)
        status = Status.active if r.status is Status.retained else None
        failure = write_retention(ex, r, target, status)
        checkpoint(self.checkpoint)
        if failure is not None and failure.code == CHANGED and again:
            # the row moved since the read: decide on it as it is now
            return self._release(ex, o, ex.store.get(o.record_id), again=False)
        return failure or Outcome.released


def _held_since(ex: Executor, o: Operation) -> bool:
    """Whether a hold on the record was asked for after this release was (an operator who
    interrupted ``hold release`` and placed the hold again: the retry queue must not lift
    it, and the night then delete what the hold keeps; invariant 1)."""
    if o.created_at is None:
        return False
    return any(
        h.kind is OpKind.hold and h.created_at is not None and h.created_at > o.created_at
        for h in ex.journal.for_record(o.record_id)
    )
