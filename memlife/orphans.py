"""Superseded records go with the replacement they point to (invariant 3).

A superseded record says "replaced by R" and is served by nobody: R carries its fact. When
the night deletes R (hard-expired, its TTL past, or forgotten and past the grace), the
record would point to nothing: a reviewer's `supersede --by B` where B expires, or
`Memory.forget` of a consolidation's replacement, left its sources so until their own
superseded retention ended. The fact they held went with R, so they go too, each with its
own receipted delete (``REPLACEMENT_DELETED``), following chains of such links.

Held records are not touched: a held source pins its replacement (memlife/pinned.py runs
first), so R is not deleted at all. A disputed record waits for its reviewer. The delete
applier re-checks each record's hold, scope and content before it deletes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from memlife.model import Link, PlanView, Status, is_held
from memlife.pinned import read_links
from memlife.plan import DELETE_ACTIONS, Action, Decision, Reason
from memlife.stores.base import MemoryStore


def sources_follow(
    store: MemoryStore,
    views: Iterable[PlanView],
    decisions: list[Decision],
    known: Mapping[str, Link] | None = None,
    disputed: Collection[str] = frozenset(),
) -> list[Decision]:
    """``decisions`` with each superseded, unheld, undisputed (``disputed``: the shard's
    records a reviewer disputed) record whose replacement is planned for deletion planned
    for deletion too (module doc). Reads the links of the shard's superseded records only
    when the shard has a delete."""
    deleting = {d.id for d in decisions if d.action in DELETE_ACTIONS}
    if not deleting:
        return decisions
    by_id = {d.id: d for d in decisions}
    candidates = [
        v.id
        for v in views
        if v.status == Status.superseded
        and not is_held(v.retention_class, v.status)
        and v.id in by_id
        and by_id[v.id].action not in DELETE_ACTIONS
        and v.id not in disputed
        and Reason.DISPUTED not in by_id[v.id].reasons
    ]
    if not candidates:
        return decisions
    links = read_links(store, candidates, known)
    grew = True
    while grew:  # a chain (an import may link a superseded record to another) follows
        grew = False
        for rid in candidates:
            link = links.get(rid)
            if rid in deleting or link is None or link.held or link.replaced_by not in deleting:
                continue
            d = by_id[rid]
            d.action = Action.delete_expired
            d.reasons = [Reason.ALREADY_SUPERSEDED, Reason.REPLACEMENT_DELETED]
            deleting.add(rid)
            grew = True
    return decisions
