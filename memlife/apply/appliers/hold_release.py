"""hold_release: lift a legal hold; the payload names the retention class the record gets."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from memlife.apply.appliers.base import (
    SCOPE_CHANGED,
    BaseApplier,
    get_many,
    is_held,
    keeping,
    record_missing,
)
from memlife.apply.registry import Result, register
from memlife.faults import checkpoint
from memlife.journal import Operation, OpKind, Outcome
from memlife.model import RetentionClass, Status
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
                r = current.get(o.record_id)
                target = RetentionClass(
                    json.loads(o.payload or "{}").get("retention_class", "standard")
                )
                if r is None:
                    out[o.operation_id] = record_missing(o)
                    continue
                if (r.actor_id, r.namespace) != (o.actor_id, o.namespace):
                    # another actor's record under the id now: its hold is not ours to lift,
                    # nor its pending erasures ours to run (invariants 1 and 8)
                    out[o.operation_id] = ItemFailure(o.record_id, SCOPE_CHANGED, retryable=False)
                    continue
                if not is_held(r):  # released already: by our crashed attempt, or by hand
                    out[o.operation_id] = (
                        Outcome.released
                        if r.retention_class is target
                        else ItemFailure(o.record_id, "NOT_HELD", retryable=False)
                    )
                    continue
                update: dict[str, Any] = {"retention_class": target}
                if r.status is Status.retained:
                    update.update(status=Status.active, status_changed_at=ex.cutoff)
                res = ex.store.put_many([r.model_copy(update=update)])
                checkpoint(self.checkpoint)
                out[o.operation_id] = res.failed[0] if res.failed else Outcome.released
        return out
