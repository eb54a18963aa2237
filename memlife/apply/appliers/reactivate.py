"""reactivate: an erasure withdrew a replacement (its text may carry the erased claim), so
the kept sources it superseded come back ``active`` and the next night regroups them.

Precondition, re-checked now: the record is superseded by exactly that replacement
(``replacement_id``) and not held. Already active with no replacement: done (a resume).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from memlife.apply.appliers.base import (
    BaseApplier,
    as_read,
    get_many,
    is_held,
    record_missing,
    settled,
    until_stopped,
)
from memlife.apply.registry import Result, register
from memlife.errors import ShardStopped
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
        for o in ops:
            r = current.get(o.record_id)
            if r is None:
                out[o.operation_id] = record_missing(o)
            elif is_held(r):
                out[o.operation_id] = ItemFailure(o.record_id, "LEGAL_HOLD", retryable=False)
            elif r.status is Status.active and r.provenance.replaced_by is None:
                out[o.operation_id] = Outcome.restored  # done before a crash
            elif r.status is not Status.superseded or r.provenance.replaced_by != o.replacement_id:
                out[o.operation_id] = ItemFailure(
                    o.record_id, "STALE_PRECONDITION", retryable=False
                )
            else:
                ready.append(o)
        if ready:
            write = partial(ex.store.set_status, [o.record_id for o in ready], Status.active,
                            replaced_by=None, policy_version=ex.policy.version, at=ex.cutoff,
                            **as_read(ex, {o.record_id: current[o.record_id] for o in ready}))  # fmt: skip
            res, stop = until_stopped(write)  # a quota part-way: what it did is kept
            settled(out, ready, res, stop, Outcome.restored)
            if stop is not None:
                raise ShardStopped(stop, out)
            checkpoint(self.checkpoint)
        return out
