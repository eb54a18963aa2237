"""quarantine: hide a record the regression gate held back (recoverable; see memlife.quarantine)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memlife.apply.appliers.base import BaseApplier
from memlife.apply.appliers.status import set_status
from memlife.apply.registry import Result, register
from memlife.journal import Operation, OpKind, Outcome
from memlife.model import Status

if TYPE_CHECKING:
    from memlife.apply.executor import Executor
    from memlife.apply.tally import Tally


@register
class Quarantine(BaseApplier):
    kind = OpKind.quarantine
    checkpoint = "after_supersede"

    def apply(self, ex: Executor, ops: list[Operation], tally: Tally) -> dict[str, Result]:
        return set_status(ex, ops, Status.quarantined, Outcome.quarantined, self.checkpoint)
