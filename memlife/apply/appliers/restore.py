"""restore: bring a quarantined record back exactly as it was (its snapshot), never just `active`."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from memlife.apply.appliers.base import (
    BaseApplier,
    as_read,
    get_many,
    keeping,
    put_as_read,
    record_missing,
    stale,
)
from memlife.apply.registry import Result, register
from memlife.faults import checkpoint
from memlife.journal import Operation, OpKind, Outcome
from memlife.model import MemoryRecord, Provenance, Status
from memlife.stores.base import BatchResult, ItemFailure

if TYPE_CHECKING:
    from memlife.apply.executor import Executor
    from memlife.apply.tally import Tally


@register
class Restore(BaseApplier):
    kind = OpKind.restore
    checkpoint = "after_supersede"

    def apply(self, ex: Executor, ops: list[Operation], tally: Tally) -> dict[str, Result]:
        from memlife.state.side import side_tables

        out: dict[str, Result] = {}
        current = get_many(ex.store, [o.record_id for o in ops])
        snaps = side_tables(ex.store).snapshots([o.record_id for o in ops])
        with keeping(out):
            for o in ops:
                r = current.get(o.record_id)
                snap = snaps.get(o.record_id)
                if r is None:
                    out[o.operation_id] = record_missing(o)
                    continue
                if r.status is not Status.quarantined:
                    # Done already (a crash after the write, snapshot kept until the receipt)?
                    done = snap is not None and _restored(ex, r, snap[0], snap[2])
                    out[o.operation_id] = (
                        Outcome.restored
                        if done
                        else ItemFailure(o.record_id, "NOT_QUARANTINED", retryable=False)
                    )
                    continue
                refused = stale(o, r)
                if refused is not None:
                    out[o.operation_id] = refused
                    continue
                if snap is not None:
                    status, changed, prov = snap
                    before = Provenance.model_validate_json(prov)
                    if status == Status.superseded.value:
                        head = _active_head(ex, r.provenance.replaced_by or before.replaced_by, r)
                        if head is None:
                            # superseded by a record no longer there (erased, deleted) or now
                            # another actor's: restoring would point at nothing (invariant 3)
                            out[o.operation_id] = ItemFailure(
                                o.record_id, "REPLACEMENT_MISSING", retryable=False
                            )
                            continue
                        before = before.model_copy(update={"replaced_by": head})
                    back = r.model_copy(
                        update={
                            "status": Status(status),
                            "status_changed_at": datetime.fromisoformat(changed)
                            if changed
                            else None,
                            "provenance": before,
                        }
                    )
                    failure = put_as_read(ex, back, r)
                    res = BatchResult(failed=[failure] if failure else [])
                elif head := _active_head(ex, r.provenance.replaced_by, r):
                    # no snapshot (another tool, a migrated store), but it names what replaced
                    # it: back behind that replacement, never served as current again; its
                    # status time no earlier than the quarantine's (a restore --now months
                    # back would start superseded retention then: superseded_since.py)
                    at = max(r.status_changed_at or ex.cutoff, ex.cutoff)
                    res = ex.store.set_status([o.record_id], Status.superseded,
                                              replaced_by=head, at=at, **as_read(ex, {r.id: r}))  # fmt: skip
                else:  # quarantined without a snapshot or a replacement: back to active
                    res = ex.store.set_status([o.record_id], Status.active, at=ex.cutoff,
                                              **as_read(ex, {r.id: r}))  # fmt: skip
                checkpoint(self.checkpoint)
                out[o.operation_id] = res.failed[0] if res.failed else Outcome.restored
        return out

    def settle(self, ex: Executor, ops: list[Operation]) -> None:
        from memlife.state.side import side_tables

        side_tables(ex.store).forget_snapshots([o.record_id for o in ops])


def _restored(ex: Executor, r: MemoryRecord, status: str, snapshot: str) -> bool:
    """Whether ``r`` is as a restore from its snapshot left it: the snapshot's status and
    provenance, but for ``replaced_by``, which the restore moves to the active end of the
    snapshot's chain (a replacement superseded in its turn since the quarantine)."""
    before = Provenance.model_validate_json(snapshot)
    if r.status.value != status:
        return False
    if r.provenance.model_copy(update={"replaced_by": before.replaced_by}) != before:
        return False
    now, then = r.provenance.replaced_by, before.replaced_by
    return now == then or (now is not None and then is not None and _succeeds(ex, now, then, r))


def _succeeds(ex: Executor, later: str, earlier: str, r: MemoryRecord) -> bool:
    """Whether ``later`` replaced ``earlier``, directly or along a chain of replacements in
    ``r``'s actor and namespace: each replacement lists what it supersedes, so the chain is
    read from ``later`` back even when ``earlier`` itself is gone (retention deleted it)."""
    seen: set[str] = set()
    todo = [later]
    while todo and len(seen) < 64:
        rid = todo.pop()
        if rid in seen:
            continue
        seen.add(rid)
        rec = ex.store.get(rid)
        if rec is None or (rec.actor_id, rec.namespace) != (r.actor_id, r.namespace):
            continue
        if earlier in rec.provenance.supersedes:
            return True
        todo.extend(rec.provenance.supersedes)
    return False


def _active_head(ex: Executor, replaced_by: str | None, r: MemoryRecord) -> str | None:
    """The active record at the end of ``replaced_by``'s chain, in ``r``'s actor and
    namespace (a replacement superseded in its turn hands its sources on); None when the
    chain ends at nothing (erased, deleted), leaves the scope or loops."""
    seen: set[str] = set()
    while replaced_by is not None and replaced_by not in seen and len(seen) < 64:
        seen.add(replaced_by)
        repl = ex.store.get(replaced_by)
        if repl is None or (repl.actor_id, repl.namespace) != (r.actor_id, r.namespace):
            return None
        if repl.status is Status.active:
            return repl.id
        if repl.status is not Status.superseded:
            return None
        replaced_by = repl.provenance.replaced_by
    return None
