"""hold: place a legal hold (retention_class legal_hold); idempotent, receipted."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memlife.apply.appliers.base import (
    CHANGED,
    SCOPE_CHANGED,
    BaseApplier,
    get_many,
    keeping,
    record_missing,
    write_retention,
)
from memlife.apply.registry import Result, register
from memlife.faults import checkpoint
from memlife.journal import Operation, OpKind, Outcome
from memlife.model import MemoryRecord, RetentionClass
from memlife.stores.base import ItemFailure

if TYPE_CHECKING:
    from memlife.apply.executor import Executor
    from memlife.apply.tally import Tally


@register
class Hold(BaseApplier):
    kind = OpKind.hold
    checkpoint = "after_supersede"

    def apply(self, ex: Executor, ops: list[Operation], tally: Tally) -> dict[str, Result]:
        out: dict[str, Result] = {}
        current = get_many(ex.store, [o.record_id for o in ops])
        with keeping(out):
            for o in ops:
                out[o.operation_id] = self._hold(ex, o, current.get(o.record_id))
        return out

    def _hold(
        self, ex: Executor, o: Operation, r: MemoryRecord | None, again: bool = True
    ) -> Result:
        if r is None:
            return record_missing(o)
        if (r.actor_id, r.namespace) != (o.actor_id, o.namespace):
            # the id is another actor's (or namespace's) record now: a hold asked for one
            # tenant's record never lands on another's (invariant 8)
            return ItemFailure(o.record_id, SCOPE_CHANGED, retryable=False)
        if r.retention_class is RetentionClass.legal_hold:
            return Outcome.held  # already held: by us (a crash) or by hand
        failure = write_retention(ex, r, RetentionClass.legal_hold)
        checkpoint(self.checkpoint)
        if failure is not None and failure.code == CHANGED and again:
            # the row moved since the read (forgotten, taken over): decide on it as it is now
            return self._hold(ex, o, ex.store.get(o.record_id), again=False)
        return failure or Outcome.held
