"""What appliers share: a base with a no-op settle, batched reads, the hold test."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from memlife.errors import ShardStopped
from memlife.journal import Operation, OpKind, OpState, Outcome
from memlife.model import MemoryRecord, RetentionClass, Status
from memlife.stores.base import BatchResult, ItemFailure, MemoryStore, StoreError

STALE = "STALE_PRECONDITION"
SCOPE_CHANGED = "SCOPE_CHANGED"
CHANGED = "CHANGED"  # the row moved between the read and the write: read it again

if TYPE_CHECKING:
    from memlife.apply.executor import Executor
    from memlife.apply.registry import Result


class BaseApplier:
    kind: OpKind
    checkpoint: str = "after_supersede"

    def settle(self, ex: Executor, ops: list[Operation]) -> None:
        """Nothing to clean up after the receipt, unless a kind says otherwise."""


def is_held(record: MemoryRecord | None) -> bool:
    """``MemoryRecord.held``, for a record that may be gone."""
    return record is not None and record.held


def stale(op: Operation, record: MemoryRecord) -> ItemFailure | None:
    """The precondition every change re-checks against the record as it is now.

    A hold (placed since planning) always wins; a record now in another actor or namespace
    (an id freed and taken again) is not the planned one: SCOPE_CHANGED (invariant 8); a
    changed content hash means the same: STALE_PRECONDITION. Terminal, nothing is done.
    """
    if is_held(record):
        return ItemFailure(op.record_id, "LEGAL_HOLD", retryable=False)
    if (record.actor_id, record.namespace) != (op.actor_id, op.namespace):
        return ItemFailure(op.record_id, SCOPE_CHANGED, retryable=False)
    if op.content_sha256 and record.sha256 != op.content_sha256:
        return ItemFailure(op.record_id, STALE, retryable=False)
    return None


def until_stopped(write: Callable[[], BatchResult]) -> tuple[BatchResult, StoreError | None]:
    """A batched store write that may stop the shard part-way (an AgentCore quota): what
    it did (the error's ``partial``; nothing known otherwise) and the stop. The applier
    maps the result as usual, then raises ``ShardStopped`` with it: a record the store
    did delete is journaled deleted tonight, not ``already_absent`` on the next night."""
    try:
        return write(), None
    except StoreError as exc:
        partial = getattr(exc, "partial", None)
        return (partial if isinstance(partial, BatchResult) else BatchResult()), exc


def settled(
    out: dict[str, Result], ops: Sequence[Operation], res: BatchResult,
    stop: StoreError | None, outcome: Result,
) -> set[str]:  # fmt: skip
    """Each op's result from one batched write into ``out``; the record ids done. Stopped
    part-way (a quota): only what the store says it did is done tonight, the rest is left
    for the caller's ``ShardStopped`` to fail."""
    failed = {f.id: f for f in res.failed}
    gone = set(res.missing)  # deleted between the read and the write: nothing was changed
    done = set(res.succeeded) if stop is not None else {o.record_id for o in ops} - gone
    for o in ops:
        if o.record_id in gone:
            out[o.operation_id] = record_missing(o)
        elif o.record_id in failed or o.record_id in done:
            out[o.operation_id] = failed.get(o.record_id, outcome)
    return done - failed.keys()


def as_read(ex: Executor, records: Mapping[str, MemoryRecord]) -> dict[str, Any]:
    """``expect=`` for a status write or delete: where the store checks it in the write's
    own transaction (SQLite), a row another writer changed since the applier's read (an id
    another actor's record took over, a text rewritten, a forget; writers that take no
    lease) is not written. AgentCore has no conditional write: the read is the check."""
    return {"expect": dict(records)} if writes_as_read(ex) else {}


def writes_as_read(ex: Executor) -> bool:
    """Whether the store checks the row as read in a write's own transaction (one flag for
    every conditional write it has: ``expect=``, ``put_as_read``, ``set_retention``)."""
    return bool(getattr(ex.store, "writes_as_read", False))


def put_as_read(ex: Executor, record: MemoryRecord, was: MemoryRecord) -> ItemFailure | None:
    """``record`` over ``was`` (as read): only while the row is still as read where the
    store can tell (SqliteStore.put_as_read; CHANGED otherwise, retried after a fresh read
    on the next run), else written back whole."""
    if writes_as_read(ex):
        ok = ex.store.put_as_read(record, was)  # type: ignore[attr-defined]  # writes_as_read: SQLite
        return None if ok else ItemFailure(was.id, CHANGED, retryable=True)
    res = ex.store.put_many([record])
    return res.failed[0] if res.failed else None


def write_retention(
    ex: Executor, was: MemoryRecord, retention_class: RetentionClass,
    status: Status | None = None,
) -> ItemFailure | None:  # fmt: skip
    """A hold placed or lifted on ``was`` (the record as read), and ``status`` set: one
    conditional statement where the store has it (``SqliteStore.set_retention``: only
    while the row is as read, nothing else in it written; CHANGED otherwise, retryable),
    else the whole record written back (AgentCore has no conditional write)."""
    if writes_as_read(ex):
        if ex.store.set_retention(was, retention_class, status=status, at=ex.cutoff):  # type: ignore[attr-defined]  # SQLite
            return None
        return ItemFailure(was.id, CHANGED, retryable=True)
    update: dict[str, object] = {"retention_class": retention_class}
    if status is not None and status is not was.status:
        update.update(status=status, status_changed_at=ex.cutoff)
    res = ex.store.put_many([was.model_copy(update=update)])
    return res.failed[0] if res.failed else None


def write_verified(ex: Executor, was: MemoryRecord) -> ItemFailure | None:
    """``was`` (the record as read) marked verified at the run's cutoff: only the
    verification, while the row is as read, where the store can (``SqliteStore.
    verify_as_read``; CHANGED otherwise, retryable): a refresh another writer made since the
    read stays. Else the whole record written back (AgentCore has no conditional write)."""
    if writes_as_read(ex):
        if ex.store.verify_as_read(was, ex.cutoff):  # type: ignore[attr-defined]  # SQLite
            return None
        return ItemFailure(was.id, CHANGED, retryable=True)
    return put_as_read(ex, was.model_copy(update={"last_verified_at": ex.cutoff}), was)


def record_missing(o: Operation) -> ItemFailure:
    """The record an operation names is gone: nothing to apply, and nothing to retry."""
    return ItemFailure(o.record_id, "RECORD_MISSING", retryable=False)


_REMOVALS = (OpKind.delete, OpKind.erase, OpKind.purge)


def removed_by_another(ex: Executor, op: Operation) -> bool:
    """Whether another operation of the record's scope (ids are reused across actors and
    namespaces) removed it, journaled as done after ``op`` was planned: a delete, an
    erasure or a purge. One done before removed an earlier record under the id (``op``
    was planned from a record that was there), and says nothing of this one."""
    return _removed_since(ex, op, op.record_id)


def _removed_since(ex: Executor, op: Operation, record_id: str) -> bool:
    """Whether an operation other than ``op``, of its scope, removed ``record_id`` and was
    journaled as done after ``op`` was planned."""
    since = op.created_at
    return any(
        other.operation_id != op.operation_id
        and other.record_id == record_id  # (for_record also lists operations naming it)
        and (other.actor_id, other.namespace) == (op.actor_id, op.namespace)
        and other.kind in _REMOVALS
        and other.outcome is Outcome.deleted
        and (since is None or (other.updated_at is not None and other.updated_at >= since))
        for other in ex.journal.for_record(record_id)
    )


def replacement_removed(ex: Executor, op: Operation) -> bool:
    """Whether the replacement ``op`` supersedes its record by was removed (erased, deleted,
    purged) by an operation journaled as done after ``op`` was planned: a user's erasure
    between a killed night and its rerun. The group is withdrawn, not failed: the source
    stays as it is and regroups next night (the write applier's answer to an erased
    source)."""
    return bool(op.replacement_id) and _removed_since(ex, op, op.replacement_id or "")


def gone_outcome(ex: Executor, o: Operation, read_there: bool) -> Outcome:
    """A removal that found its record gone: PLANNED by us, never tried and already gone
    when this attempt read it, our own killed attempt deleted it (``deleted``: no other
    receipt will say so), unless an erase, purge or delete journaled by another operation
    took it: theirs is the receipt that says deleted (invariant 2: one deletion, one
    claim). Gone only after this attempt read it (``read_there``): another writer took it
    then, not us. Else ``already_absent``."""
    first = o.attempts == 0 and o.state is OpState.PLANNED and not read_there
    if first and removed_by_another(ex, o):
        first = False
    return Outcome.deleted if first else Outcome.already_absent


@contextmanager
def keeping(out: dict[str, Result]) -> Iterator[dict[str, Result]]:
    """An applier's loop of store writes: one that stops the shard part-way (an AgentCore
    quota) raises ``ShardStopped`` with ``out``, what the batch did before the stop, so
    those are journaled done tonight and the rest failed (not the whole batch failed,
    each found done the next night and receipted a night late)."""
    try:
        yield out
    except StoreError as exc:
        raise ShardStopped(exc, out) from exc


def get_many(store: MemoryStore, ids: Sequence[str]) -> dict[str, MemoryRecord]:
    """One batched read where the store has it: a remote store pays per call."""
    many = getattr(store, "get_many", None)
    if many is not None:
        found: dict[str, MemoryRecord] = many(ids)
        return found
    out = {}
    for rid in ids:
        r = store.get(rid)
        if r is not None:
            out[rid] = r
    return out
