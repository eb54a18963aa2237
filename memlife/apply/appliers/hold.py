"""hold: place a legal hold (retention_class legal_hold); idempotent, receipted."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memlife.apply.appliers.base import (
    SCOPE_CHANGED,
    BaseApplier,
    get_many,
    keeping,
    record_missing,
)
from memlife.apply.registry import Result, register
from memlife.faults import checkpoint
from memlife.journal import Operation, OpKind, Outcome
from memlife.model import RetentionClass
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
                r = current.get(o.record_id)
                if r is None:
                    out[o.operation_id] = record_missing(o)
                elif (r.actor_id, r.namespace) != (o.actor_id, o.namespace):
                    # the id is another actor's (or namespace's) record now: a hold asked for
                    # one tenant's record never lands on another's (invariant 8)
                    out[o.operation_id] = ItemFailure(o.record_id, SCOPE_CHANGED, retryable=False)
                elif r.retention_class is RetentionClass.legal_hold:
                    out[o.operation_id] = Outcome.held  # already held: by us (a crash) or by hand
                else:
                    res = ex.store.put_many(
                        [r.model_copy(update={"retention_class": RetentionClass.legal_hold})]
                    )
                    checkpoint(self.checkpoint)
                    out[o.operation_id] = res.failed[0] if res.failed else Outcome.held
        return out
