"""supersede: mark an original ``superseded`` by its (active, written first) replacement."""

from __future__ import annotations

from memlife.apply.appliers.base import BaseApplier
from memlife.apply.appliers.status import set_status
from memlife.apply.registry import Result, register
from memlife.journal import Operation, OpKind, Outcome
from memlife.model import Status


@register
class Supersede(BaseApplier):
    kind = OpKind.supersede
    checkpoint = "after_supersede"

    def apply(self, ex, ops: list[Operation], tally) -> dict[str, Result]:
        return set_status(ex, ops, Status.superseded, Outcome.superseded, self.checkpoint)
