"""Replacements a held source pins: one check, for the planner's decisions and the delete
applier alike, so a dry run says what the apply run does.

A source kept under hold after consolidation still says "replaced by R". Deleting R
(expired, superseded too long) would leave the held record superseded by nothing and its
fact unserved once the hold goes (invariants 1 and 3). So does deleting R2 where R was
itself replaced by R2: the pin follows the chain. The applier always skipped a pinned R
(``HELD_SOURCE``) but the planner read no provenance, so a dry run proposed deleting it.

The links are read two ways, and a record is pinned when a held record reaches it along
"replaced by" links: up from each delete candidate through the sources it lists (any
shard), and down from the shard's held, superseded records through their replacements
(a replacement need not list its source: a status set online, an import). Both walks go
until nothing new is found, so no chain is too long and a cycle ends the walk. The delete
applier reads the shard's held records again right before it deletes: a hold placed after
planning pins what its record names too.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from memlife.model import Link, PlanView, RetentionClass, Status, link_of
from memlife.plan import DELETE_ACTIONS, Action, Decision, Reason
from memlife.stores.base import MemoryStore, iter_shard


def read_links(
    store: MemoryStore, ids: Collection[str], known: Mapping[str, Link] | None = None
) -> dict[str, Link]:
    """Links of ``ids``: from ``known`` (records planning read whole), else the store's fast
    path (SQLite reads three columns) where it has one, else its records."""
    if known:
        had = {rid: known[rid] for rid in ids if rid in known}
        rest = [rid for rid in ids if rid not in known]
        return had | read_links(store, rest) if rest else had
    if not ids:
        return {}
    fast = getattr(store, "links_many", None)
    if fast is not None:
        got: dict[str, Link] = fast(sorted(ids))
        return got
    from memlife.apply.appliers.base import get_many

    return {rid: link_of(r) for rid, r in get_many(store, sorted(ids)).items()}


def held_superseded(
    store: MemoryStore,
    shards: Iterable[tuple[str, str]],
    paged: dict[tuple[str, str], list[str]] | None = None,
) -> list[str]:
    """Ids of held, superseded records to walk down from for these (actor, namespace)
    shards, read now (a hold placed after planning). SQLite reads its index, for every
    namespace of the actor (a held record elsewhere may name a replacement here: an
    import keeps such a link). Another store pages each shard's superseded records, once
    per ``paged`` (the run's deletions come in batches of 100: one listing a shard)."""
    fast = getattr(store, "held_superseded_ids", None)
    wanted = list(dict.fromkeys(shards))
    if fast is not None:
        return [rid for actor in dict.fromkeys(a for a, _ in wanted) for rid in fast(actor)]
    paged = {} if paged is None else paged
    for shard in wanted:
        if shard not in paged:
            paged[shard] = [r.id for page in iter_shard(store, *shard, statuses=[Status.superseded])
                            for r in page.records if r.retention_class == RetentionClass.legal_hold]  # fmt: skip
    return [rid for shard in wanted for rid in paged[shard]]


def pinned_by_a_hold(
    store: MemoryStore,
    current: Mapping[str, Link],
    held_sources: Iterable[str] = (),
    known: Mapping[str, Link] | None = None,
) -> set[str]:
    """Those of ``current`` (records about to be deleted) that a held record reaches along
    "replaced by" links; ``held_sources``: ids of held records to walk down from; ``known``:
    links already read."""
    seen: dict[str, Link] = dict(current)
    names: dict[str, set[str]] = {}  # record -> the records it names as its replacement
    level = [rid for rid, link in current.items() if link.supersedes]
    while level:  # up: each record's sources that name it
        wanted = {s for r in level for s in seen[r].supersedes} - seen.keys()
        seen.update(read_links(store, wanted, known))
        up = []
        for rid in level:
            for sid in seen[rid].supersedes:
                source = seen.get(sid)
                if (
                    source is not None
                    and source.replaced_by == rid
                    and rid not in names.get(sid, ())
                ):
                    names.setdefault(sid, set()).add(rid)
                    if not source.held and source.supersedes:
                        up.append(sid)
        level = up
    down = list(held_sources)
    seen.update(read_links(store, set(down) - seen.keys(), known))
    while down:  # down: from held records through their replacements
        nxt = []
        for rid in down:
            link = seen.get(rid)
            by = link.replaced_by if link is not None else None
            if by is not None and by not in names.get(rid, ()):
                names.setdefault(rid, set()).add(by)
                nxt.append(by)
        seen.update(read_links(store, set(nxt) - seen.keys(), known))
        down = nxt
    pinned: set[str] = set()
    todo = [rid for rid, link in seen.items() if link.held]
    while todo:  # every record a held record reaches: the same answer in any order
        for nxt_id in names.get(todo.pop(), ()):
            if nxt_id not in pinned:
                pinned.add(nxt_id)
                todo.append(nxt_id)
    return pinned & current.keys()


def hold_pinned(
    store: MemoryStore,
    views: Iterable[PlanView],
    decisions: list[Decision],
    known: Mapping[str, Link] | None = None,
) -> list[Decision]:
    """``decisions`` with each planned delete of a pinned replacement made a hold
    (``DELETE_DEFERRED``, ``HELD_SOURCE``). Reads the links of the delete candidates and
    of the shard's held, superseded records, when there are delete candidates, unless
    ``known`` (what planning read) has them."""
    deletes = [d.id for d in decisions if d.action in DELETE_ACTIONS]
    if not deletes:
        return decisions
    # the store's fast path gives plain strings: compare by value
    held: list[str] = []
    shards: set[tuple[str, str]] = set()
    for v in views:
        shards.add((v.actor_id, v.namespace))
        if v.status == Status.superseded and v.retention_class == RetentionClass.legal_hold:
            held.append(v.id)
    if getattr(store, "held_superseded_ids", None) is not None:  # every namespace, cheaply
        held += held_superseded(store, shards)
    pinned = pinned_by_a_hold(store, read_links(store, deletes, known), held, known)
    for d in decisions:
        if d.id in pinned and d.action in DELETE_ACTIONS:
            d.action = Action.hold
            d.reasons += [Reason.DELETE_DEFERRED, Reason.HELD_SOURCE]
    return decisions
