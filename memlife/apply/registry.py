"""One applier per operation kind, used alike by the first pass and by resume.

An applier turns a batch of operations of its kind into one result per operation:
an ``Outcome`` (done) or an ``ItemFailure`` (retryable or terminal). It must be
idempotent (a crash may replay it after the change happened) and must re-check its
precondition against the record as it is now; it never trusts what was planned.
``settle`` (optional) runs once an operation is RECEIPTED, for clean-up that must wait
for the evidence (e.g. dropping a quarantine snapshot).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from memlife.journal import Operation, OpKind, Outcome
from memlife.stores.base import ItemFailure

if TYPE_CHECKING:
    from memlife.apply.executor import Executor
    from memlife.apply.tally import Tally

Result = Outcome | ItemFailure


class Applier(Protocol):
    kind: OpKind
    checkpoint: str  # the fault point right after the store change (faults.POINTS)

    def apply(self, ex: Executor, ops: list[Operation], tally: Tally) -> dict[str, Result]: ...

    def settle(self, ex: Executor, ops: list[Operation]) -> None: ...


APPLIERS: dict[OpKind, Applier] = {}


def register(cls: type) -> type:
    """Class decorator: one instance per kind; a second applier for a kind is a bug."""
    inst = cls()
    if inst.kind in APPLIERS:
        raise RuntimeError(f"two appliers for {inst.kind}")
    APPLIERS[inst.kind] = inst
    return cls


def applier_for(kind: OpKind) -> Applier:
    try:
        return APPLIERS[kind]
    except KeyError:
        raise LookupError(f"no applier registered for operation kind {kind.value!r}") from None
