"""What appliers share: a base with a no-op settle, batched reads, the hold test."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memlife.journal import Operation, OpKind
from memlife.model import MemoryRecord, RetentionClass, Status
from memlife.stores.base import MemoryStore

if TYPE_CHECKING:
    from memlife.apply.executor import Executor


class BaseApplier:
    kind: OpKind
    checkpoint: str = "after_supersede"

    def settle(self, ex: Executor, ops: list[Operation]) -> None:
        """Nothing to clean up after the receipt, unless a kind says otherwise."""


def is_held(record: MemoryRecord | None) -> bool:
    return record is not None and (
        record.retention_class is RetentionClass.legal_hold or record.status is Status.retained
    )


def get_many(store: MemoryStore, ids: Sequence[str]) -> dict[str, MemoryRecord]:
    """One batched read where the store has it: a remote store pays per call."""
    many = getattr(store, "get_many", None)
    if many is not None:
        return many(ids)
    out = {}
    for rid in ids:
        r = store.get(rid)
        if r is not None:
            out[rid] = r
    return out
