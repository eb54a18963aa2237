"""Status changes in batches (supersede, quarantine): one read, one set_status per replacement."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING

from memlife.apply.appliers.base import (
    SCOPE_CHANGED,
    STALE,
    as_read,
    get_many,
    is_held,
    record_missing,
    removed_by_another,
    replacement_removed,
    settled,
    stale,
    until_stopped,
    writes_as_read,
)
from memlife.apply.registry import Result
from memlife.consolidate.replacement import outlives
from memlife.errors import ShardStopped
from memlife.faults import checkpoint
from memlife.journal import Operation, Outcome
from memlife.model import MemoryRecord, Status
from memlife.orphans import Paged, note_pointers, pointing_to
from memlife.stores.base import BatchResult, ItemFailure, StoreError

if TYPE_CHECKING:
    from memlife.apply.executor import Executor


def set_status(
    ex: Executor, ops: list[Operation], status: Status, outcome: Outcome, point: str
) -> dict[str, Result]:
    out: dict[str, Result] = {}
    wanted = [o.record_id for o in ops]
    if status is Status.superseded:
        wanted += [o.replacement_id for o in ops if o.replacement_id]
    found = get_many(ex.store, list(dict.fromkeys(wanted)))
    ready: dict[str | None, list[Operation]] = {}
    replaced: list[tuple[MemoryRecord, str]] = []  # (record now superseded, by)
    for o in ops:
        current = found.get(o.record_id)
        if current is None:
            # erased (or deleted) by another operation meanwhile, as a crash and an erasure
            # before the rerun leave it: nothing left to change, and nothing failed
            gone = removed_by_another(ex, o)
            out[o.operation_id] = Outcome.skipped if gone else record_missing(o)
            continue
        repl, target = None, current.provenance.replaced_by
        if status is Status.superseded:
            repl = _handed_to(ex, found.get(o.replacement_id or ""))
            target = repl.id if repl is not None else o.replacement_id
        if current.status is status and current.provenance.replaced_by == target:
            out[o.operation_id] = outcome  # done already (a crash before the journal knew)
            if status is Status.superseded:
                replaced.append((current, target or ""))
            continue
        refused = stale(o, current)
        if refused is None and status is Status.superseded and current.status is not Status.active:
            refused = ItemFailure(o.record_id, STALE, retryable=False)  # superseded elsewhere
        if refused is not None:
            out[o.operation_id] = refused
            continue
        if status is Status.superseded:
            if repl is not None and repl.id == o.record_id != o.replacement_id:
                out[o.operation_id] = Outcome.skipped  # handed on to this very source
                continue
            # invariant 3: the replacement is another record of the source's tenant, and
            # active; or put out of recall online since the plan (forgotten:
            # pending_delete; quarantined; superseded: its sources go down its chain): its
            # sources then follow it, as they would had the night not been killed between
            # its write and these supersedes (written over, it would be active again)
            live = (Status.active, Status.pending_delete, Status.quarantined)
            if (
                repl is None
                or repl.id == o.record_id
                or repl.status not in live
                or (repl.actor_id, repl.namespace) != (current.actor_id, current.namespace)
            ):
                withdrawn = repl is None and replacement_removed(ex, o)
                out[o.operation_id] = (
                    Outcome.skipped
                    if withdrawn
                    else ItemFailure(o.record_id, "REPLACEMENT_MISSING")
                )
                continue
            ours = found.get(o.replacement_id or "")
            if ours is not None and o.record_id in ours.provenance.supersedes:
                if outlives(current, ours, ex.policy.ttl_days()):  # restated since the read
                    out[o.operation_id] = Outcome.skipped  # (remember): kept, as it was told
                    continue
        # a quarantined record keeps what replaced it: a restore (or an erasure of that
        # replacement, SOURCE_OF_ERASED) must still see the chain; other statuses drop it
        keep = current.provenance.replaced_by if status is Status.quarantined else None
        ready.setdefault(repl.id if repl is not None else keep, []).append(o)
    whole = ex.withdrawable - _done(ops, out) if status is Status.superseded else set()
    for replacement_id in whole & _moved(ops, out):
        _withdraw(ex, ops, replacement_id, out, ready)
    for replacement, group in ready.items():
        together = (
            {"together": True} if group[0].replacement_id in whole and writes_as_read(ex) else {}
        )
        write = partial(_setter(ex), [o.record_id for o in group], status,
                        replaced_by=replacement, policy_version=ex.policy.version, at=ex.cutoff,
                        **as_read(ex, {o.record_id: found[o.record_id] for o in group}),
                        **together)  # fmt: skip
        res, stop = until_stopped(write)
        if together and any(f.code in _MOVED for f in res.failed):  # none written
            _withdraw(ex, ops, group[0].replacement_id, out, {})
            continue
        done = settled(out, group, res, stop, outcome)
        for o in group:  # what points where, for a store paged for it (orphans.pointing_to)
            if o.record_id in done:
                note_pointers(_paged(ex), (o.actor_id, o.namespace), [o.record_id], replacement)
        if status is Status.superseded:
            replaced += [
                (found[o.record_id], replacement or "") for o in group if o.record_id in done
            ]
        if stop is not None:  # the rest of the batch waits for the next night
            _hand_over(ex, ops, replaced, out)
            raise ShardStopped(stop, out)
        checkpoint(point)
    stop = _hand_over(ex, ops, replaced, out)
    if stop is not None:  # every write done, the re-pointing stopped (a quota)
        raise ShardStopped(stop, out) from stop
    return out


_MOVED = (STALE, SCOPE_CHANGED)  # a source no longer as the group read it


def _moved(ops: list[Operation], out: dict[str, Result]) -> set[str]:
    """Replacements one of whose sources was edited, moved or put out of recall since the
    group was read."""
    return {o.replacement_id or "" for o in ops
            if isinstance(r := out.get(o.operation_id), ItemFailure) and r.code in _MOVED}  # fmt: skip


def _done(ops: list[Operation], out: dict[str, Result]) -> set[str]:
    """Replacements one of whose sources is superseded by it already."""
    return {o.replacement_id or "" for o in ops if out.get(o.operation_id) is Outcome.superseded}


def _withdraw(
    ex: Executor, ops: list[Operation], replacement_id: str | None, out: dict[str, Result],
    ready: dict[str | None, list[Operation]],
) -> None:  # fmt: skip
    """A source edited or forgotten after its group's replacement was written: superseding
    the others would leave the replacement serving what that source no longer says. None of
    the group is superseded (skipped), and the group resumer takes the replacement back
    (memlife/apply/group_resume.py)."""
    group = {o.operation_id for o in ops if o.replacement_id == replacement_id}
    out.update(dict.fromkeys(group, Outcome.skipped))
    for key in list(ready):
        ready[key] = [o for o in ready[key] if o.operation_id not in group]
        if not ready[key]:
            del ready[key]
    ex.withdrawn.add(replacement_id or "")


def _handed_to(ex: Executor, replacement: MemoryRecord | None) -> MemoryRecord | None:
    """Where ``replacement`` hands its sources: itself, or, superseded online since the plan,
    down its ``replaced_by`` to the first record not superseded (where :func:`_repoint`
    would have moved them had the night not been killed before their supersedes). None
    for a chain that breaks (a record gone, a loop, longer than ``MAX_CHAIN``)."""
    seen: set[str] = set()
    while replacement is not None and replacement.status is Status.superseded:
        nxt = replacement.provenance.replaced_by
        if nxt is None or replacement.id in seen or len(seen) >= MAX_CHAIN:
            return None
        seen.add(replacement.id)
        replacement = ex.store.get(nxt)
    return replacement


def _setter(ex: Executor) -> Callable[..., BatchResult]:
    """The store's status write. A hold placed since the caller's read still wins where the
    store checks it in the write's own transaction (SQLite); elsewhere that read is the
    check."""
    setter: Callable[..., BatchResult] = getattr(
        ex.store, "set_status_unless_held", ex.store.set_status
    )
    return setter


def _hand_over(
    ex: Executor, ops: list[Operation], replaced: list[tuple[MemoryRecord, str]],
    out: dict[str, Result],
) -> StoreError | None:  # fmt: skip
    """Re-point the superseded records' sources, then settle ``out``: a supersede is claimed
    only once everything under it moved (invariant 3). One whose sources did not all move
    becomes failed and retryable with the item's code; if the store stopped (a quota),
    every supersede leaves ``out`` (the caller's ``ShardStopped`` fails it) and the stop is
    returned. Either way the next night finds each one done already and re-points again.
    Every other result stands as it is."""
    try:
        unmoved = _repoint(ex, replaced) if replaced else {}
    except StoreError as exc:
        for op in [op for op, res in out.items() if res is Outcome.superseded]:
            del out[op]
        return exc
    for o in ops:
        if o.record_id in unmoved and out.get(o.operation_id) is Outcome.superseded:
            out[o.operation_id] = ItemFailure(o.record_id, unmoved[o.record_id])
    return None


# Levels of replacements walked down from a replaced record: each night adds one at most.
MAX_CHAIN = 64


def _paged(ex: Executor) -> Paged:
    """The shards paged for :func:`memlife.orphans.pointing_to` this run (stores without a
    lookup by replaced_by), kept current by this module's writes."""
    paged: Paged = vars(ex).setdefault("pointers_paged", {})
    return paged


def _repoint(ex: Executor, replaced: list[tuple[MemoryRecord, str]]) -> dict[str, str]:
    """Invariant 3 across nights: a replacement superseded in its turn hands what points to
    it to the new replacement, so none points to a superseded record. What points to it
    is found down its ``supersedes``, level by level: its sources, and the sources of a
    replacement among them that an earlier night re-pointed to it (they are listed by that
    replacement, not by this one); and, at each level, the records whose ``replaced_by``
    names it (a reviewer's `supersede --by`, an online status change: listed by nobody,
    memlife/orphans.py). Idempotent (a rerun re-points what a crash left); a held record
    is never rewritten, a hold placed since the read included (the store checks it in the
    write, where it can). Returns the replaced records whose sources did not all move:
    id -> the item's code."""
    # (new replacement, status, status time) -> records: re-pointing is no new supersede,
    # so a record keeps its status time (superseded retention counts from it: a catch-up
    # run's cutoff would move it months back, a night's restart it). Sources superseded
    # by one run share its cutoff, so the writes stay few.
    moves: dict[tuple[str, Status, datetime], list[str]] = {}
    hangs_from: dict[str, str] = {}  # record to move -> the replaced record it hangs from
    shard_of: dict[str, tuple[str, str]] = {}
    chain: dict[str, str] = {r.id: r.id for r, _ in replaced}  # superseded -> replaced top
    frontier = {sid: (r.id, by) for r, by in replaced for sid in r.provenance.supersedes}
    level = {r.id: (r, r.id, by) for r, by in replaced}
    seen = set(chain)
    for _ in range(MAX_CHAIN):
        scope = {rid: (r.actor_id, r.namespace) for rid, (r, _, _) in level.items()}
        for sid, named in pointing_to(ex.store, scope, _paged(ex)).items():
            frontier.setdefault(sid, level[named][1:])
        ids = sorted(i for i in frontier if i not in seen)
        if not ids:
            break
        seen.update(ids)
        found = get_many(ex.store, ids)
        below: dict[str, tuple[str, str]] = {}
        level = {}
        for sid in ids:
            top, by = frontier[sid]
            s = found.get(sid)
            # a quarantined source keeps its replacement too (restore puts it back)
            if s is None or s.status not in (Status.superseded, Status.quarantined):
                continue
            if chain.get(s.provenance.replaced_by or "") != top:
                continue  # points elsewhere: not this chain's to move
            chain[sid] = top
            level[sid] = (s, top, by)
            if not is_held(s):
                at = s.status_changed_at or ex.cutoff
                moves.setdefault((by, s.status, at), []).append(sid)
                hangs_from[sid] = top
                shard_of[sid] = (s.actor_id, s.namespace)
            for child in s.provenance.supersedes:
                below.setdefault(child, (top, by))
        frontier = below
    unmoved: dict[str, str] = {}
    for (by, status, at), ids in sorted(moves.items()):
        res = _setter(ex)(ids, status, replaced_by=by, policy_version=ex.policy.version, at=at)
        for rid in res.succeeded:
            note_pointers(_paged(ex), shard_of[rid], [rid], by)
        for f in res.failed:
            if f.code != "LEGAL_HOLD":  # a hold placed meanwhile wins, as the read's check
                unmoved.setdefault(hangs_from[f.id], f.code)
    return unmoved
