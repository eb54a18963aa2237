"""Replacements a held source pins: one check, for the planner's decisions and the delete
applier alike, so a dry run says what the apply run does.

A source kept under hold after consolidation still says "replaced by R". Deleting R
(expired, superseded too long) would leave the held record superseded by nothing and its
fact unserved once the hold goes (invariants 1 and 3). The applier always skipped such an
R (``HELD_SOURCE``) but the planner read no provenance, so a dry run proposed deleting it.
"""

from __future__ import annotations

from collections.abc import Mapping

from memlife.apply.appliers.base import get_many
from memlife.model import MemoryRecord
from memlife.plan import DELETE_ACTIONS, Action, Decision, Reason
from memlife.stores.base import MemoryStore


def pinned_by_a_hold(store: MemoryStore, current: Mapping[str, MemoryRecord]) -> set[str]:
    """Those of ``current`` (records about to be deleted) that a held source still names as
    its replacement, read from the records' own source lists (any shard, any status that
    holds: legal hold or retained)."""
    sources = {s for r in current.values() for s in r.provenance.supersedes}
    if not sources:
        return set()
    return {
        by
        for s in get_many(store, sorted(sources)).values()
        if s.held and (by := s.provenance.replaced_by) is not None and by in current
    }


def hold_pinned(store: MemoryStore, decisions: list[Decision]) -> list[Decision]:
    """``decisions`` with each planned delete of a pinned replacement made a hold
    (``DELETE_DEFERRED``, ``HELD_SOURCE``). Reads the delete candidates, when there are any."""
    deletes = [d.id for d in decisions if d.action in DELETE_ACTIONS]
    if not deletes:
        return decisions
    pinned = pinned_by_a_hold(store, get_many(store, deletes))
    for d in decisions:
        if d.id in pinned and d.action in DELETE_ACTIONS:
            d.action = Action.hold
            d.reasons += [Reason.DELETE_DEFERRED, Reason.HELD_SOURCE]
    return decisions
