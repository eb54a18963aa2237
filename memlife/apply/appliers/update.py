"""update: `memlife import --update` overwrites a record with the imported one (its payload).

Re-checked against the record as it is now: same actor and namespace, not under hold
(unless the run was given --allow-held), content not erased for that actor. Only the import's
own run writes it: another run's retry queue ends an interrupted import's update
(UPDATE_ABANDONED) rather than write an old line over a newer one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memlife.apply.appliers.base import (
    BaseApplier,
    get_many,
    is_held,
    keeping,
    put_as_read,
    record_missing,
)
from memlife.apply.registry import Result, register
from memlife.journal import Operation, OpKind, Outcome
from memlife.model import MemoryRecord
from memlife.stores.base import ItemFailure
from memlife.tombstones import refusal

if TYPE_CHECKING:
    from memlife.apply.executor import Executor
    from memlife.apply.tally import Tally


@register
class Update(BaseApplier):
    kind = OpKind.update
    checkpoint = "after_replacement_write"

    def apply(self, ex: Executor, ops: list[Operation], tally: Tally) -> dict[str, Result]:
        out: dict[str, Result] = {}
        current = get_many(ex.store, [o.record_id for o in ops])
        with keeping(out):
            for o in ops:
                old = current.get(o.record_id)
                if not o.payload:
                    out[o.operation_id] = ItemFailure(o.record_id, "NO_PAYLOAD", retryable=False)
                    continue
                new = MemoryRecord.model_validate_json(o.payload)
                code = None
                if old is None:
                    code = "RECORD_MISSING"
                elif (old.actor_id, old.namespace) != (new.actor_id, new.namespace):
                    code = "SCOPE_MISMATCH"
                elif is_held(old) and "ALLOW_HELD" not in o.reasons:  # import --allow-held
                    code = "LEGAL_HOLD"
                elif o.run_id != ex.run_id and old != new:
                    # an interrupted import's line, replayed by a later run (the retry queue):
                    # never written back over what was written since (a corrected import);
                    # rerunning the import finishes it
                    code = "UPDATE_ABANDONED"
                else:
                    code = refusal(ex.store, new)  # ERASED_CONTENT: erased text never comes back
                if code:
                    out[o.operation_id] = ItemFailure(o.record_id, code, retryable=False)
                    continue
                failure = (
                    put_as_read(ex, new, old) if old else record_missing(o)
                )  # the row as checked
                out[o.operation_id] = failure or Outcome.updated
        return out
