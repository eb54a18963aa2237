"""write_replacement: put the consolidated record (its JSON is the operation's payload)."""

from __future__ import annotations

from memlife.apply.appliers.base import BaseApplier
from memlife.apply.registry import Result, register
from memlife.faults import checkpoint
from memlife.journal import Operation, OpKind, Outcome
from memlife.model import MemoryRecord
from memlife.stores.base import ItemFailure


@register
class WriteReplacement(BaseApplier):
    kind = OpKind.write_replacement
    checkpoint = "after_replacement_write"

    def apply(self, ex, ops: list[Operation], tally) -> dict[str, Result]:
        out: dict[str, Result] = {}
        for o in ops:
            if not o.payload or '"content"' not in o.payload:
                out[o.operation_id] = ItemFailure(o.record_id, "NO_PAYLOAD", retryable=False)
                continue
            record = MemoryRecord.model_validate_json(o.payload)
            res = ex.store.put_many([record])
            checkpoint(self.checkpoint)
            out[o.operation_id] = res.failed[0] if res.failed else Outcome.written
        return out
