"""Finishing a journaled consolidation group: its replacement written and receipted before
any original is superseded (invariant 3), as a unit after a crash (apply/resume.py).

Before the write, a source that moved since the group was read (changed, held, no longer
active, restated) withdraws the group, and a replacement the killed attempt wrote before
it died is taken back under a receipted delete of its own. So does a source edited or
forgotten after the write, up to the supersedes' own write (appliers/status.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from memlife.apply.appliers.base import get_many, is_held, stale
from memlife.apply.lifecycle import end_terminally, retryable, run_lifecycle
from memlife.apply.tally import Tally
from memlife.consolidate.replacement import outlives
from memlife.journal import Operation, OpKind, OpState, Outcome
from memlife.model import MemoryRecord, Status
from memlife.plan import Reason

if TYPE_CHECKING:
    from memlife.apply.executor import Executor


def resume_group(ex: Executor, planned: list[Operation], tally: Tally) -> None:
    write = [o for o in planned if o.kind is OpKind.write_replacement]
    rest = [o for o in planned if o.kind is OpKind.supersede]
    if not write and rest:  # resumed supersedes: their write may be finished or terminal
        write = [
            o
            for o in ex.journal.for_record(rest[0].replacement_id or "")
            if o.kind is OpKind.write_replacement and o.run_id == rest[0].run_id
        ]
    if write and not rest:  # a write requeued alone: its supersedes, however they ended
        rest = [
            o
            for o in ex.journal.for_record(write[0].record_id)
            if o.kind is OpKind.supersede and o.run_id == write[0].run_id
        ]
    if _sources_moved(ex, write, rest):
        # a source changed, was held or left active since the group was read (a rerun
        # after a crash, an edit during the gate): the replacement would carry a claim its
        # sources no longer make (invariant 6). Withdrawn, nothing written: the next night
        # regroups what the records say now
        tally.counts["consolidation_withdrawn_changed"] += 1
        _take_back(ex, write, tally)
        for ops in (write, rest):
            run_lifecycle(ex, ops, tally, lambda b: {o.operation_id: Outcome.skipped for o in b})
        return
    # the write's payload goes with its receipt (a content-free journal): kept here so the
    # replacement can still be taken back, should a source move before the first supersede
    payloads = {o.operation_id: o.payload for o in write if o.payload}
    done = run_lifecycle(ex, write, tally)
    if any(o.outcome is Outcome.skipped for o in done):  # an erasure took a source: withdrawn
        tally.counts["consolidation_withdrawn_erased"] += 1
        run_lifecycle(ex, rest, tally, lambda ops: {o.operation_id: Outcome.skipped for o in ops})
        return
    if any(o.state is OpState.FAILED and o.next_retry_at is None for o in done):
        # the replacement will never be written: its supersedes end here, once, not nightly
        end_terminally(ex, rest, "REPLACEMENT_NOT_WRITTEN", tally)
        return
    if any(o.state is not OpState.RECEIPTED and o.state is not OpState.APPLIED for o in done):
        return  # replacement not durable yet: never supersede without it
    if rest and _none_superseded(ex, rest):
        ex.withdrawable.add(rest[0].replacement_id or "")
    run_lifecycle(ex, rest, tally)
    if rest and rest[0].replacement_id in ex.withdrawn:
        # a source edited or forgotten while the replacement was written (or while a killed
        # night waited for its rerun): the supersede applier superseded none of the group,
        # checked and written in one transaction (appliers/status.py). Withdrawn as before
        # the write
        tally.counts["consolidation_withdrawn_changed"] += 1
        _take_back(ex, [replace(o, payload=payloads.get(o.operation_id)) for o in done], tally)


def _none_superseded(ex: Executor, rest: list[Operation]) -> bool:
    """No supersede of the group tried yet, or each only failed retryably (the retry
    queue's), and none journaled superseded: the whole group can still be withdrawn."""
    if not all(o.state is OpState.PLANNED or retryable(o) for o in rest):
        return False
    run, replacement = rest[0].run_id, rest[0].replacement_id or ""
    return not any(
        o.kind is OpKind.supersede and o.run_id == run and o.outcome is Outcome.superseded
        for o in ex.journal.for_record(replacement)
    )


def _sources_moved(ex: Executor, write: list[Operation], rest: list[Operation]) -> bool:
    """Before a replacement is written: is any source still to supersede no longer the
    active, unheld record with the content the group was built from?"""
    if not any(o.state is OpState.PLANNED or retryable(o) for o in write):
        return False  # written already: each supersede re-checks its own source
    if any(_ended(o) and o.outcome is not Outcome.superseded for o in rest):
        return True  # a supersede of this run already ended otherwise (an earlier group)
    todo = [o for o in rest if o.state is OpState.PLANNED]
    current = get_many(ex.store, [o.record_id for o in todo])
    payload = next((o.payload for o in write if o.payload), None)
    replacement = MemoryRecord.model_validate_json(payload) if payload else None
    ttl = ex.policy.ttl_days()
    for o in todo:
        r = current.get(o.record_id)
        if r is None or r.status is not Status.active or stale(o, r) is not None:
            return True
        if replacement is not None and outlives(r, replacement, ttl):  # restated since
            return True
    return False


WITHDRAWN = Reason.CONSOLIDATION_WITHDRAWN.value  # on the delete of a withdrawn replacement


def _take_back(ex: Executor, write: list[Operation], tally: Tally) -> None:
    """A killed attempt may have written the replacement before it died: a withdrawn group
    leaves none behind (DESIGN 7: a replacement is seen only once committed; else it stays
    active, naming as superseded sources that are not, and is consolidated again). It goes
    by a delete of its own, journaled and receipted (no delete without a receipt), planned
    once: a rerun after a crash here finds it pending. Only our record as written goes (its
    shard, content and sources, not restated since); one under a hold since stays
    (invariant 1), as does one the user restated (``remember`` told them it is kept)."""
    for o in write:
        current = ex.store.get(o.record_id)
        if current is None or not _as_written(current, o):
            continue
        if is_held(current):
            tally.counts["consolidation_withdrawn_kept_held"] += 1
            continue
        if _restated_since(current, o):  # the user said it again since: theirs now, kept
            tally.counts["consolidation_withdrawn_kept_restated"] += 1
            continue
        pending = [
            p for p in ex.journal.for_record(current.id)
            if p.kind is OpKind.delete and WITHDRAWN in p.reasons and not _ended(p)
        ]  # fmt: skip
        ops = pending or ex.plan(
            [ex.new_op(OpKind.delete, current.actor_id, current.namespace, current.id, [WITHDRAWN],
                       current.sha256, key_ids=[o.operation_id, WITHDRAWN])]
        )  # fmt: skip
        done = run_lifecycle(ex, ops, tally)
        removed = sum(1 for d in done if d.outcome in (Outcome.deleted, Outcome.already_absent))
        tally.counts["consolidation_withdrawn_removed"] += removed


def _as_written(current: MemoryRecord, o: Operation) -> bool:
    """Whether ``current`` is the replacement ``o`` wrote: by its payload (shard, content,
    sources), or, once the receipt took the payload (a rerun after a crash), by its shard
    and content hash."""
    if o.payload:
        ours = MemoryRecord.model_validate_json(o.payload)
        return (current.actor_id, current.namespace, current.content) == (
            ours.actor_id, ours.namespace, ours.content,
        ) and set(current.provenance.supersedes) == set(ours.provenance.supersedes)  # fmt: skip
    return (current.actor_id, current.namespace, current.sha256) == (
        o.actor_id, o.namespace, o.content_sha256,
    ) and bool(current.provenance.supersedes)  # fmt: skip


def _restated_since(current: MemoryRecord, o: Operation) -> bool:
    """By the payload (``_restated``), or without it, verified again after the write."""
    if o.payload:
        return _restated(current, MemoryRecord.model_validate_json(o.payload))
    seen = current.last_verified_at
    return seen is not None and o.updated_at is not None and seen > o.updated_at


def _restated(current: MemoryRecord, ours: MemoryRecord) -> bool:
    """Whether the replacement as written was restated since (online ``remember`` found it
    the record that says the text: verified again, made lasting, its deadline moved)."""
    return (current.last_verified_at, current.memory_type, current.expires_at) != (
        ours.last_verified_at, ours.memory_type, ours.expires_at,
    )  # fmt: skip


def _ended(o: Operation) -> bool:
    return o.state is OpState.RECEIPTED or (o.state is OpState.FAILED and not retryable(o))
