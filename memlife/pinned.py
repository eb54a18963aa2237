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

MAX_CHAIN = 16  # replacements of replacements followed down to a held source, at most


def pinned_by_a_hold(store: MemoryStore, current: Mapping[str, MemoryRecord]) -> set[str]:
    """Those of ``current`` (records about to be deleted) that a held source still names as
    its replacement, directly or through a chain of replacements (A held -> R1 -> R2: R1 is
    kept for A, so R2 is kept for R1). Read from the records' own source lists, level by
    level (any shard; held is legal hold or retained)."""
    seen: dict[str, MemoryRecord] = dict(current)
    named_by: dict[str, list[str]] = {}  # record -> the sources that name it their replacement
    level = [r for r in current.values() if r.provenance.supersedes]
    for _ in range(MAX_CHAIN):
        wanted = sorted({s for r in level for s in r.provenance.supersedes if s not in seen})
        seen.update(get_many(store, wanted) if wanted else {})
        up = []
        for r in level:
            for sid in r.provenance.supersedes:
                s = seen.get(sid)
                if s is not None and s.provenance.replaced_by == r.id:
                    named_by.setdefault(r.id, []).append(sid)
                    if not s.held and s.provenance.supersedes:
                        up.append(s)
        if not up:
            break
        level = up
    anchored: dict[str, bool] = {}

    def held_below(rid: str) -> bool:
        if rid not in anchored:
            anchored[rid] = False  # a cycle anchors nothing
            anchored[rid] = any(seen[s].held or held_below(s) for s in named_by.get(rid, ()))
        return anchored[rid]

    return {rid for rid in current if held_below(rid)}


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
