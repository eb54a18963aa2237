"""review: a reviewer's keep / verify / dispute on a review item (memlife.review_queue).

keep and dispute change no record (the decision is the evidence); verify stamps
``last_verified_at`` with the run's cutoff. The payload names the decision; the receipt
carries the reviewer's identity (Executor.reviewer).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from memlife.apply.appliers.base import (
    BaseApplier,
    get_many,
    keeping,
    record_missing,
    stale,
    write_verified,
)
from memlife.apply.registry import Result, register
from memlife.faults import checkpoint
from memlife.journal import Operation, OpKind, Outcome
from memlife.stores.base import ItemFailure

if TYPE_CHECKING:
    from memlife.apply.executor import Executor
    from memlife.apply.tally import Tally


@register
class Review(BaseApplier):
    kind = OpKind.review
    checkpoint = "after_supersede"

    def apply(self, ex: Executor, ops: list[Operation], tally: Tally) -> dict[str, Result]:
        out: dict[str, Result] = {}
        current = get_many(ex.store, [o.record_id for o in ops])
        with keeping(out):
            for o in ops:
                decision = json.loads(o.payload or "{}").get("decision")
                r = current.get(o.record_id)
                if decision in ("keep", "dispute"):
                    out[o.operation_id] = Outcome.reviewed
                    continue
                if r is None:
                    out[o.operation_id] = record_missing(o)
                    continue
                problem = stale(o, r)
                if problem is not None:
                    out[o.operation_id] = problem
                    continue
                if decision != "verify":
                    out[o.operation_id] = ItemFailure(o.record_id, "BAD_DECISION", retryable=False)
                    continue
                if r.last_verified_at == ex.cutoff:  # our crashed attempt already stamped it
                    out[o.operation_id] = Outcome.reviewed
                    continue
                failure = write_verified(ex, r)  # the verification only, on the row as read
                checkpoint(self.checkpoint)
                out[o.operation_id] = failure or Outcome.reviewed
        return out
