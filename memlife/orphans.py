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

What points to a record is found both ways (session 27): the sources its
``provenance.supersedes`` lists, and the records whose ``replaced_by`` names it
(:func:`pointing_to`). A reviewer's `supersede --by B` and an online status change set
``replaced_by`` on the record only: B, written before, is not rewritten to list it (it may
be held, and a rewrite would race a writer), so a lookup by ``supersedes`` alone missed it
when B was superseded (``status._repoint``) or deleted (here, and a review `delete`:
:func:`followers`).

The night is also the safety net for stores left so: every superseded record of the shard
whose replacement no longer exists (a review delete before session 27, a follower whose
delete failed), or is now another actor's or namespace's record (an id reused, an import's
REPLACEMENT_OUT_OF_SCOPE line: audit 52h), goes as the replacement's own sources do,
``REPLACEMENT_DELETED``, and so does a chain of superseded records ending at a missing one.
A replacement superseded or quarantined in its turn, or pending deletion, still exists: the
record keeps pointing to it (a superseded replacement hands it over when it is superseded,
``status._repoint``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from memlife.model import Link, MemoryRecord, PlanView, Status, is_held
from memlife.pinned import read_links
from memlife.plan import DELETE_ACTIONS, Action, Decision, Reason
from memlife.stores.base import MemoryStore, iter_shard

# statuses that keep a replaced_by (a quarantined record keeps its replacement for restore)
POINTING = (Status.superseded, Status.quarantined)
Shard = tuple[str, str]
# per shard: id -> replaced_by of its superseded and quarantined records (stores without a
# lookup by replaced_by page a shard once, then the writer keeps it current: note_pointers)
Paged = dict[Shard, dict[str, str]]


def sources_follow(
    store: MemoryStore,
    views: Iterable[PlanView],
    decisions: list[Decision],
    known: Mapping[str, Link] | None = None,
    disputed: Collection[str] = frozenset(),
) -> list[Decision]:
    """``decisions`` with each superseded, unheld, undisputed (``disputed``: the shard's
    records a reviewer disputed) record whose replacement is planned for deletion, no
    longer exists, or is another actor's or namespace's record, planned for deletion too
    (module doc). Reads the links of the shard's superseded records, and the records they
    name outside the shard."""
    views = list(views)
    deleting = {d.id for d in decisions if d.action in DELETE_ACTIONS}
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
    here = {v.id for v in views}
    named = {link.replaced_by for link in links.values() if link.replaced_by}
    elsewhere = sorted(named - here)
    scope = {v.id: (v.actor_id, v.namespace) for v in views}
    gone = deleting | (_gone_or_foreign(store, elsewhere, scope, links) if elsewhere else set())
    grew = True
    while grew:  # a chain (an import may link a superseded record to another) follows
        grew = False
        for rid in candidates:
            link = links.get(rid)
            if rid in gone or link is None or link.held or link.replaced_by not in gone:
                continue
            d = by_id[rid]
            d.action = Action.delete_expired
            d.reasons = [Reason.ALREADY_SUPERSEDED, Reason.REPLACEMENT_DELETED]
            gone.add(rid)
            grew = True
    return decisions


def _gone_or_foreign(
    store: MemoryStore, ids: list[str], scope: Mapping[str, Shard], links: Mapping[str, Link]
) -> set[str]:
    """Those of ``ids`` (replacements named from outside the shard's pages) that no longer
    exist, or that are a record of another actor or namespace than every record naming it:
    an id another tenant's record took over, or an import's REPLACEMENT_OUT_OF_SCOPE line.
    Such a replacement serves none of its sources' recall (invariants 3 and 8): the record
    is an orphan as much as one pointing to nothing (audit 52h)."""
    from memlife.apply.appliers.base import get_many

    named_from: dict[str, set[Shard]] = {}
    for sid, link in links.items():
        if link.replaced_by and sid in scope:
            named_from.setdefault(link.replaced_by, set()).add(scope[sid])
    found = get_many(store, ids)
    return {
        rid
        for rid in ids
        if (r := found.get(rid)) is None or (r.actor_id, r.namespace) not in named_from.get(rid, ())
    }


def pointing_to(
    store: MemoryStore, targets: Mapping[str, Shard], paged: Paged | None = None
) -> dict[str, str]:
    """The superseded and quarantined records whose ``replaced_by`` names one of
    ``targets`` (id -> its (actor, namespace)): record id -> the target it names. The
    store's lookup (SQLite: the actor's status index, every namespace) where it has one,
    else each target's shard paged once per ``paged`` (a replacement is always of its
    sources' actor and namespace: invariant 8)."""
    if not targets:
        return {}
    out: dict[str, str] = {}
    fast = getattr(store, "superseded_pointing_to", None)
    if fast is not None:
        by_actor: dict[str, list[str]] = {}
        for rid, (actor, _) in targets.items():
            by_actor.setdefault(actor, []).append(rid)
        for actor, ids in sorted(by_actor.items()):
            found: dict[str, str] = fast(actor, sorted(ids))
            out.update(found)
        return out
    paged = {} if paged is None else paged
    for shard in sorted(set(targets.values())):
        if shard not in paged:
            paged[shard] = {
                r.id: r.provenance.replaced_by
                for page in iter_shard(store, *shard, statuses=list(POINTING))
                for r in page.records
                if r.status in POINTING and r.provenance.replaced_by
            }
        out.update((sid, by) for sid, by in paged[shard].items() if targets.get(by) == shard)
    return out


def note_pointers(paged: Paged | None, shard: Shard, ids: Iterable[str], by: str | None) -> None:
    """Keep ``paged`` (:func:`pointing_to`) current after a write that made ``ids`` point
    to ``by`` (None: they point to nothing now, or are gone)."""
    if paged is None or shard not in paged:
        return
    for rid in ids:
        if by is None:
            paged[shard].pop(rid, None)
        else:
            paged[shard][rid] = by


def followers(store: MemoryStore, record: MemoryRecord) -> list[MemoryRecord]:
    """The superseded records that point to ``record``, directly or down a chain of
    superseded records, nearest first: what goes with it when it is deleted (module doc).
    Held ones included (the caller refuses: a held source pins its replacement)."""
    from memlife.apply.appliers.base import get_many

    out: list[MemoryRecord] = []
    seen = {record.id}
    level = {record.id: record}
    while level:
        scope = {rid: (r.actor_id, r.namespace) for rid, r in level.items()}
        listed = {s for r in level.values() for s in r.provenance.supersedes}
        ids = sorted((set(pointing_to(store, scope)) | listed) - seen)
        found = get_many(store, ids)
        nxt: dict[str, MemoryRecord] = {}
        for sid in ids:
            s = found.get(sid)
            if (
                s is None
                or s.status is not Status.superseded
                or s.provenance.replaced_by not in level
                or (s.actor_id, s.namespace) != scope[s.provenance.replaced_by]
            ):
                continue
            seen.add(sid)
            out.append(s)
            nxt[sid] = s
        level = nxt
    return out
