"""reactivate: an erasure withdrew a replacement (its text may carry the erased claim), so
the kept sources it superseded come back ``active`` and the next night regroups them.

Precondition, re-checked now: the record is superseded by exactly that replacement
(``replacement_id``) and not held. Already active with no replacement: done (a resume).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memlife.apply.appliers.base import BaseApplier, get_many, is_held, keeping, record_missing
from memlife.apply.registry import Result, register
from memlife.faults import checkpoint
from memlife.journal import Operation, OpKind, Outcome
from memlife.model import Status
from memlife.stores.base import ItemFailure

if TYPE_CHECKING:
    from memlife.apply.executor import Executor
    from memlife.apply.tally import Tally


@register
class Reactivate(BaseApplier):
    kind = OpKind.reactivate
    checkpoint = "after_supersede"

    def apply(self, ex: Executor, ops: list[Operation], tally: Tally) -> dict[str, Result]:
        out: dict[str, Result] = {}
        current = get_many(ex.store, [o.record_id for o in ops])
        ready = []
        with keeping(out):
            for o in ops:
                r = current.get(o.record_id)
                if r is None:
                    out[o.operation_id] = record_missing(o)
                elif is_held(r):
                    out[o.operation_id] = ItemFailure(o.record_id, "LEGAL_HOLD", retryable=False)
                elif r.status is Status.active and r.provenance.replaced_by is None:
                    out[o.operation_id] = Outcome.restored  # done before a crash
                elif (
                    r.status is not Status.superseded
                    or r.provenance.replaced_by != o.replacement_id
                ):
                    out[o.operation_id] = ItemFailure(
                        o.record_id, "STALE_PRECONDITION", retryable=False
                    )
                else:
                    ready.append(o)
            if ready:
                res = ex.store.set_status(
                    [o.record_id for o in ready],
                    Status.active,
                    replaced_by=None,
                    policy_version=ex.policy.version,
                    at=ex.cutoff,
                )
                checkpoint(self.checkpoint)
                failed = {f.id: f for f in res.failed}
                for o in ready:
                    out[o.operation_id] = failed.get(o.record_id, Outcome.restored)
        return out
