"""write_replacement: put the consolidated record (its JSON is the operation's payload)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memlife.apply.appliers.base import BaseApplier, is_held
from memlife.apply.registry import Result, register
from memlife.faults import checkpoint
from memlife.journal import Operation, OpKind, Outcome
from memlife.model import MemoryRecord, Status
from memlife.stores.base import ItemFailure
from memlife.tombstones import ERASED_CONTENT, ERASED_SOURCE, write_replacement

if TYPE_CHECKING:
    from memlife.apply.executor import Executor
    from memlife.apply.tally import Tally


@register
class WriteReplacement(BaseApplier):
    kind = OpKind.write_replacement
    checkpoint = "after_replacement_write"

    def apply(self, ex: Executor, ops: list[Operation], tally: Tally) -> dict[str, Result]:
        out: dict[str, Result] = {}
        for o in ops:
            if not o.payload or '"content"' not in o.payload:
                out[o.operation_id] = ItemFailure(o.record_id, "NO_PAYLOAD", retryable=False)
                continue
            record = MemoryRecord.model_validate_json(o.payload)
            current = ex.store.get(record.id)
            if current is not None and is_held(current):  # held since it was written (a
                # crash, a hold, the rerun) or an erasure's rebuild: never rewritten (invariant 1)
                written = current.content == record.content and set(
                    current.provenance.supersedes
                ) == set(record.provenance.supersedes)
                out[o.operation_id] = (
                    Outcome.written
                    if written
                    else ItemFailure(o.record_id, "LEGAL_HOLD", retryable=False)
                )
                continue
            if (  # written by a killed attempt, then forgotten or quarantined online since:
                current is not None  # done, and not written over (back into recall)
                and current.status in (Status.pending_delete, Status.quarantined)
                and current.content == record.content
                and set(current.provenance.supersedes) == set(record.provenance.supersedes)
            ):
                out[o.operation_id] = Outcome.written
                continue
            # tombstones are checked in the write's own transaction: an erasure that landed
            # since the group was read wins, and the refused payload is forgotten
            res = write_replacement(ex.store, record)
            checkpoint(self.checkpoint)
            if res.failed and res.failed[0].code in (ERASED_CONTENT, ERASED_SOURCE):
                ex.journal.forget_payloads([o.record_id])
                out[o.operation_id] = Outcome.skipped  # withdrawn: the group regroups next night
                continue
            out[o.operation_id] = res.failed[0] if res.failed else Outcome.written
        return out
