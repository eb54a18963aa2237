"""Replacements a held source pins: a planning hint, so a dry run says what apply does.

A source kept under legal hold after consolidation still says "replaced by R". Deleting
R (expired, superseded too long) would leave the held record superseded by nothing and
its fact unserved once the hold goes (invariants 1 and 3). The delete applier has always
skipped such an R (``HELD_SOURCE``), but the planner read no provenance, so a dry run
proposed deleting it. The planner now holds R (``Planner.plan_shard``, ``hints.pinned``).
"""

from __future__ import annotations

from collections.abc import Sequence

from memlife.apply.appliers.base import get_many
from memlife.model import PlanView, RetentionClass, Status
from memlife.stores.base import MemoryStore


def pinned_replacements(store: MemoryStore, views: Sequence[PlanView]) -> frozenset[str]:
    """Ids the shard's held, superseded records name as their replacement. Reads only
    those records (rare: a hold placed after consolidation), nothing when there are none."""
    # the store's fast path gives plain strings: compare by value
    sources = [v.id for v in views
               if v.status == Status.superseded and v.retention_class == RetentionClass.legal_hold]  # fmt: skip
    if not sources:
        return frozenset()
    return frozenset(
        by
        for s in get_many(store, sources).values()
        if s.held and (by := s.provenance.replaced_by) is not None
    )
