"""purge: delete a record that has sat in quarantine long enough (holds excepted)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memlife.apply.appliers.base import BaseApplier, get_many
from memlife.apply.appliers.delete import delete_records
from memlife.apply.registry import Result, register
from memlife.journal import Operation, OpKind
from memlife.model import Status
from memlife.stores.base import ItemFailure

if TYPE_CHECKING:
    from memlife.apply.executor import Executor
    from memlife.apply.tally import Tally


@register
class Purge(BaseApplier):
    kind = OpKind.purge
    checkpoint = "after_delete"

    def apply(self, ex: Executor, ops: list[Operation], tally: Tally) -> dict[str, Result]:
        out: dict[str, Result] = {}
        current = get_many(ex.store, [o.record_id for o in ops])
        todo = []
        for o in ops:
            r = current.get(o.record_id)
            if r is not None and r.status is not Status.quarantined:
                out[o.operation_id] = ItemFailure(o.record_id, "NOT_QUARANTINED", retryable=False)
            else:
                todo.append(o)
        if todo:
            out.update(delete_records(ex, todo))
        return out

    def settle(self, ex: Executor, ops: list[Operation]) -> None:
        from memlife.state.side import side_tables

        side_tables(ex.store).forget_snapshots([o.record_id for o in ops])
