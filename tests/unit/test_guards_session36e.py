"""Session 36e mutation audit of the nightly run's appliers (memlife/apply/appliers/*.py:
write, supersede, update, status, reactivate, restore, purge, quarantine, hold,
hold_release, review, delete) and memlife/apply/groups.py, deletions.py, answers.py,
stage_cache.py. Each test holds one guard a mutant showed untested: its docstring names the
guard and the mutant it kills. One test holds a real bug found on the way (a restore behind a
moved chain, resumed after a crash past its write, was failed NOT_QUARANTINED; fixed).
Real SQLite stores and journals in tmp_path (one test on AgentCore against its fake service),
operations driven through the executor's lifecycle (``run_lifecycle``) as a night drives
them; faults only at boundaries (a store's own answer, memlife.faults checkpoints, a model
stand-in); no mocks of memlife logic."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.apply import Executor, Tally
from memlife.apply.lifecycle import run_lifecycle
from memlife.audit import FileSink
from memlife.journal import Journal, Operation, OpKind, OpState, Outcome, open_journal
from memlife.model import MemoryRecord, Status
from memlife.stores.sqlite import SqliteStore
from tests.unit.test_guards_session33 import NS, POLICY, T0, held, rec

Env = tuple[SqliteStore, Journal, FileSink]


def stored(store: SqliteStore, rid: str) -> MemoryRecord:
    got = store.get(rid)
    assert got is not None
    return got


@pytest.fixture()
def env(home: Path) -> Iterator[Env]:
    store = SqliteStore(home / "memlife.db")
    yield store, open_journal(store), FileSink(home / "receipts")
    store.close()


def executor(env: Env, key: str = "run-a") -> Executor:
    store, journal, sink = env
    return Executor(run_id=f"run-{key}", run_key=key, policy=POLICY, cutoff=T0, store=store,
                    journal=journal, sink=sink)  # fmt: skip


def plan(ex: Executor, kind: OpKind, r: MemoryRecord, reasons: list[str], **kw: Any) -> Operation:
    (op,) = ex.journal.plan(
        [ex.new_op(kind, r.actor_id, r.namespace, r.id, reasons, r.sha256, **kw)]
    )
    return op


def run_one(ex: Executor, op: Operation) -> Operation:
    (done,) = run_lifecycle(ex, [op], Tally())
    return done


def superseded_by(r: MemoryRecord, by: str, **kw: Any) -> MemoryRecord:
    return r.model_copy(
        update={
            "status": Status.superseded,
            "provenance": r.provenance.model_copy(update={"replaced_by": by}),
        }
        | kw  # fmt: skip
    )


# -- appliers/base.py: removed_by_another, settled ---------------------------------------------


def test_a_source_gone_is_not_excused_by_another_tenants_delete_of_its_id(env: Env) -> None:
    """Guard: ``(other.actor_id, other.namespace) == (op.actor_id, op.namespace)`` in
    removed_by_another (ids are reused across actors). u-1's m-a, planned for a supersede,
    vanished by no operation of ours; u-2's record then took the id and u-2's delete removed
    it. Mutant: the scope comparison dropped -> u-2's delete excuses u-1's missing source,
    the supersede is journaled skipped and no one hears that u-1's record went missing."""
    store = env[0]
    a, r = rec("m-a"), rec("m-r", "Likes green tea.")
    store.put_many([a, r])
    ex = executor(env)
    op = plan(ex, OpKind.supersede, a, ["SAME_SUBJECT"], replacement="m-r")
    store.delete_many(["m-a"])  # gone by other means (another tool): no operation of u-1's
    theirs = rec("m-a", "Plays the cello.", actor_id="u-2", namespace="/users/u-2/facts",
                 expires_at=T0 - timedelta(days=1))  # fmt: skip
    store.put_many([theirs])
    other = executor(env, "run-b")
    gone = run_one(other, plan(other, OpKind.delete, theirs, ["HARD_EXPIRED"]))
    assert (gone.state, gone.outcome) == (OpState.RECEIPTED, Outcome.deleted)
    done = run_one(ex, op)
    assert (done.state, done.last_error) == (OpState.FAILED, "RECORD_MISSING")


def test_a_source_gone_is_not_excused_by_a_delete_done_before_it_was_planned(env: Env) -> None:
    """Guard: ``other.updated_at >= since`` in removed_by_another. u-1's earlier m-a was
    deleted (receipted) before tonight's supersede of the new m-a was planned; the new m-a
    then vanished by no operation. Mutant: the time condition dropped -> the old delete
    excuses the new record's disappearance: journaled skipped, nothing reported."""
    store = env[0]
    old = rec("m-a", "Likes coffee.", expires_at=T0 - timedelta(days=1))
    store.put_many([old])
    before = executor(env, "run-b")
    gone = run_one(before, plan(before, OpKind.delete, old, ["HARD_EXPIRED"]))
    assert (gone.state, gone.outcome) == (OpState.RECEIPTED, Outcome.deleted)
    a, r = rec("m-a"), rec("m-r", "Likes green tea.")  # the id taken again, same scope
    store.put_many([a, r])
    ex = executor(env)
    op = plan(ex, OpKind.supersede, a, ["SAME_SUBJECT"], replacement="m-r")
    store.delete_many(["m-a"])  # gone by other means (another tool)
    done = run_one(ex, op)
    assert (done.state, done.last_error) == (OpState.FAILED, "RECORD_MISSING")


def test_a_source_our_own_delete_removed_after_planning_is_skipped_not_failed(env: Env) -> None:
    """Guard: ``Outcome.skipped if gone`` in set_status: a delete of the record's own scope,
    done after the supersede was planned, removed it: nothing is left to change and nothing
    failed. Mutant: always RECORD_MISSING -> a terminal failure listed for an operator for a
    record whose deletion is receipted."""
    store = env[0]
    a, r = rec("m-a", expires_at=T0 - timedelta(days=1)), rec("m-r", "Likes green tea.")
    store.put_many([a, r])
    ex = executor(env)
    op = plan(ex, OpKind.supersede, a, ["SAME_SUBJECT"], replacement="m-r")
    other = executor(env, "run-b")
    gone = run_one(other, plan(other, OpKind.delete, a, ["HARD_EXPIRED"]))
    assert (gone.state, gone.outcome) == (OpState.RECEIPTED, Outcome.deleted)
    done = run_one(ex, op)
    assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.skipped)


class StatusQuotaAfterOne(SqliteStore):
    """A status batch of several records stops after the first (AgentCore's quota, 402):
    the first is written, the store's error carries that as its ``partial``."""

    def set_status_unless_held(self, ids: Any, status: Status, **kw: Any) -> Any:
        from memlife.errors import StoreError

        if len(ids) < 2:
            return super().set_status_unless_held(ids, status, **kw)
        partial = super().set_status_unless_held(ids[:1], status, **kw)
        exc = StoreError("quota exceeded", "SERVICE_QUOTA_EXCEEDED")
        exc.partial = partial  # type: ignore[attr-defined]
        raise exc


def test_a_supersede_batch_stopped_part_way_claims_only_what_the_store_did(home: Path) -> None:
    """Guard: ``done = set(res.succeeded) if stop is not None`` in settled. The batch of two
    supersedes stops after m-a. Mutant: every op not failed counts as done -> m-b, still
    active, is journaled (and receipted) superseded: a receipt for a change never made."""
    store = StatusQuotaAfterOne(home / "memlife.db")
    try:
        env = (store, open_journal(store), FileSink(home / "receipts"))
        a, b = rec("m-a"), rec("m-b", "Likes tea a lot.")
        store.put_many(
            [a, b, rec("m-r", "Likes green tea.", provenance={"supersedes": ["m-a", "m-b"]})]
        )
        ex = executor(env)
        ops = ex.journal.plan([ex.new_op(OpKind.supersede, "u-1", NS, x.id, ["SAME_SUBJECT"],
                                         x.sha256, replacement="m-r") for x in (a, b)])  # fmt: skip
        done = {o.record_id: o for o in run_lifecycle(ex, ops, Tally())}
        assert (done["m-a"].state, done["m-a"].outcome) == (OpState.RECEIPTED, Outcome.superseded)
        assert done["m-b"].state is OpState.FAILED
        assert done["m-b"].last_error == "SERVICE_QUOTA_EXCEEDED"
        assert stored(store, "m-b").status is Status.active
    finally:
        store.close()


# -- appliers/status.py: set_status, _repoint --------------------------------------------------


def test_a_supersede_of_a_source_another_replacement_took_since_is_refused(env: Env) -> None:
    """Guards: the done-already test comparing ``replaced_by`` with the op's replacement, and
    ``current.status is not Status.active`` -> STALE ("superseded elsewhere"). m-a, planned
    for a supersede by m-r, was superseded by m-s since. Mutants: the replaced_by comparison
    dropped (found 'done already' and journaled superseded by m-r, which it is not), or the
    active check dropped (m-a re-pointed from m-s to m-r over another decision)."""
    store = env[0]
    a = rec("m-a")
    store.put_many([a, rec("m-r", "Likes green tea."), rec("m-s", "Likes oolong tea.")])
    ex = executor(env)
    op = plan(ex, OpKind.supersede, a, ["SAME_SUBJECT"], replacement="m-r")
    store.set_status(["m-a"], Status.superseded, replaced_by="m-s", at=T0)
    done = run_one(ex, op)
    assert (done.state, done.last_error) == (OpState.FAILED, "STALE_PRECONDITION")
    assert stored(store, "m-a").provenance.replaced_by == "m-s"


def test_re_pointing_leaves_a_listed_source_that_points_elsewhere(env: Env) -> None:
    """Guard: ``if chain.get(s.provenance.replaced_by or "") != top: continue`` in _repoint.
    R1 lists S1 and S2 as its sources, but S2 was since superseded by X (a reviewer's
    decision). R1 is superseded by R2: S1 follows to R2. Mutant: everything listed is moved
    -> S2 is taken from X and put behind R2, a decision it was never part of."""
    store = env[0]
    s1, s2 = superseded_by(rec("S1"), "R1"), superseded_by(rec("S2", "Likes tea a lot."), "X")
    r1 = rec("R1", "Likes green tea.", provenance={"supersedes": ["S1", "S2"]})
    store.put_many([s1, s2, r1, rec("X", "Likes oolong."),
                    rec("R2", "Likes green tea daily.", provenance={"supersedes": ["R1"]})])  # fmt: skip
    ex = executor(env)
    done = run_one(ex, plan(ex, OpKind.supersede, r1, ["SAME_SUBJECT"], replacement="R2"))
    assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.superseded)
    assert stored(store, "S1").provenance.replaced_by == "R2"
    assert stored(store, "S2").provenance.replaced_by == "X"


@pytest.fixture(scope="module")
def harness() -> Iterator[Any]:
    from tests.fakes.agentcore import AgentCoreHarness

    h = AgentCoreHarness()
    yield h
    h.close()


def test_re_pointing_never_rewrites_a_held_source_on_a_store_without_its_own_check(
    harness: Any, home: Path
) -> None:
    """Guard: ``if not is_held(s)`` in _repoint. On AgentCore the status write checks no
    hold (no set_status_unless_held): the read is the only guard. S1 (held) hangs from R1;
    R1 is superseded by R2. Mutant: the held S1 is moved to R2 (invariant 1)."""
    from memlife.journal import SqliteJournal

    store = harness.store()
    env = (store, SqliteJournal.at(home / "journal.db"), FileSink(home / "receipts"))
    s1 = held(superseded_by(rec("S1"), "R1"))
    r1 = rec("R1", "Likes green tea.", provenance={"supersedes": ["S1"]})
    store.put_many([s1, r1, rec("R2", "Likes green tea daily.", provenance={"supersedes": ["R1"]})])
    ex = executor(env)
    done = run_one(ex, plan(ex, OpKind.supersede, r1, ["SAME_SUBJECT"], replacement="R2"))
    assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.superseded)
    now = store.get("S1")
    assert now is not None and now.held and now.provenance.replaced_by == "R1"


def test_re_pointing_keeps_each_sources_status_time(env: Env) -> None:
    """Guard: ``at = s.status_changed_at or ex.cutoff`` in _repoint: re-pointing is no new
    supersede, so superseded retention still counts from when S1 was superseded. Mutant:
    the run's cutoff -> every night that re-points S1 restarts its retention (a catch-up
    run's cutoff would even move it back)."""
    store = env[0]
    since = T0 - timedelta(days=20)
    s1 = superseded_by(rec("S1"), "R1", status_changed_at=since)
    r1 = rec("R1", "Likes green tea.", provenance={"supersedes": ["S1"]})
    store.put_many([s1, r1, rec("R2", "Likes green tea daily.", provenance={"supersedes": ["R1"]})])
    ex = executor(env)
    done = run_one(ex, plan(ex, OpKind.supersede, r1, ["SAME_SUBJECT"], replacement="R2"))
    assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.superseded)
    now = stored(store, "S1")
    assert (now.provenance.replaced_by, now.status_changed_at) == ("R2", since)


def test_re_pointing_moves_a_quarantined_source_with_its_chain(env: Env) -> None:
    """Guard: ``Status.quarantined`` among the statuses _repoint moves (a quarantined source
    keeps its replacement: a restore puts it back behind it, an erasure of that replacement
    finds it). S1 (quarantined) hangs from R1; R1 is superseded by R2. Mutant: only
    superseded sources move -> S1 keeps naming R1, a superseded record: once retention
    deletes R1, S1's chain ends at nothing (a restore fails REPLACEMENT_MISSING)."""
    store = env[0]
    s1 = superseded_by(rec("S1"), "R1", status=Status.quarantined)
    r1 = rec("R1", "Likes green tea.", provenance={"supersedes": ["S1"]})
    store.put_many([s1, r1, rec("R2", "Likes green tea daily.", provenance={"supersedes": ["R1"]})])
    ex = executor(env)
    done = run_one(ex, plan(ex, OpKind.supersede, r1, ["SAME_SUBJECT"], replacement="R2"))
    assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.superseded)
    now = stored(store, "S1")
    assert (now.status, now.provenance.replaced_by) == (Status.quarantined, "R2")


# -- appliers/delete.py, appliers/purge.py -----------------------------------------------------


class DeletesThrottledOnce(SqliteStore):
    """The store's first batch delete is throttled (a retryable item failure, nothing
    deleted); every later one works. A boundary fault, the store's own answer."""

    throttled = False

    def delete_many(self, ids: Any, **kw: Any) -> Any:
        from memlife.stores.base import BatchResult, ItemFailure

        if not self.throttled:
            self.throttled = True
            return BatchResult(failed=[ItemFailure(i, "THROTTLED", retryable=True) for i in ids])
        return super().delete_many(ids, **kw)


def test_a_retried_delete_whose_record_went_meanwhile_is_already_absent(home: Path) -> None:
    """Guard: ``first = o.attempts == 0 and o.state is OpState.PLANNED`` in delete_records.
    The first attempt was throttled (nothing deleted); another tool removed the record
    before the retry. Mutant: ``first = True`` -> the retry journals and receipts
    ``deleted`` for a deletion this run never made (invariant 2)."""
    store = DeletesThrottledOnce(home / "memlife.db")
    try:
        env = (store, open_journal(store), FileSink(home / "receipts"))
        r = rec("m-exp", expires_at=T0 - timedelta(days=1))
        store.put_many([r])
        ex = executor(env)
        first = run_one(ex, plan(ex, OpKind.delete, r, ["HARD_EXPIRED"]))
        assert (first.state, first.last_error) == (OpState.FAILED, "THROTTLED")
        assert first.next_retry_at is not None and store.get("m-exp") == r
        SqliteStore.delete_many(store, ["m-exp"])  # gone by other means before the retry
        done = run_one(ex, first)
        assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.already_absent)
    finally:
        store.close()


def test_a_purged_records_snapshot_never_reaches_another_tenants_record_of_its_id(
    env: Env,
) -> None:
    """Guard: Purge.settle's ``forget_snapshots``. u-1's S (snapshot taken, quarantined) is
    purged; u-2's record then takes the id S and is quarantined by another tool (no
    snapshot of its own). Mutant: u-1's snapshot outlives S -> restoring u-2's S writes
    u-1's provenance (source event, policy) onto it: tenants mixed."""
    from memlife.quarantine import snapshots

    store = env[0]
    _quarantined(store, rec("S", provenance={"source_event": "evt-u1"}), None)
    ex = executor(env)
    gone = run_one(ex, plan(ex, OpKind.purge, stored(store, "S"), ["QUARANTINE_EXPIRED"]))
    assert (gone.state, gone.outcome) == (OpState.RECEIPTED, Outcome.deleted)
    assert snapshots(store, ["S"]) == {}
    theirs = rec("S", "Plays the cello.", actor_id="u-2", namespace="/users/u-2/facts",
                 status=Status.quarantined, provenance={"source_event": "evt-u2"})  # fmt: skip
    store.put_many([theirs])
    later = executor(env, "run-b")
    done = run_one(later, plan(later, OpKind.restore, theirs, ["OPERATOR_RESTORE"]))
    assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.restored)
    now = stored(store, "S")
    assert (now.status, now.provenance.source_event) == (Status.active, "evt-u2")


# -- appliers/reactivate.py --------------------------------------------------------------------


def test_a_reactivate_never_touches_a_source_held_since_planning(env: Env) -> None:
    """Guard: ``elif is_held(r)`` in the reactivate applier (its write is the plain
    ``set_status``, which checks no hold). Mutant: the check removed -> the held source is
    made active again, a change to a record under legal hold (invariant 1)."""
    store = env[0]
    src = superseded_by(rec("m-a"), "m-r")
    store.put_many([src, rec("m-r", "Likes green tea.")])
    ex = executor(env)
    op = plan(ex, OpKind.reactivate, src, ["REPLACEMENT_ERASED"], replacement="m-r")
    store.put_many([held(src)])  # the hold lands after the erasure planned the reactivate
    done = run_one(ex, op)
    assert (done.state, done.last_error, done.next_retry_at) == (OpState.FAILED, "LEGAL_HOLD", None)
    assert stored(store, "m-a") == held(src)


def test_a_reactivate_leaves_a_source_another_replacement_took_since(env: Env) -> None:
    """Guard: ``r.provenance.replaced_by != o.replacement_id`` in the reactivate applier.
    Mutant: only the status is checked -> a source now superseded by another (active)
    replacement is made active beside it: two current versions of one fact."""
    store = env[0]
    src = superseded_by(rec("m-a"), "m-r")
    store.put_many([src, rec("m-r", "Likes green tea."), rec("m-s", "Likes oolong tea.")])
    ex = executor(env)
    op = plan(ex, OpKind.reactivate, src, ["REPLACEMENT_ERASED"], replacement="m-r")
    now = superseded_by(rec("m-a"), "m-s")  # another night's consolidation took it meanwhile
    store.put_many([now])
    done = run_one(ex, op)
    assert (done.state, done.last_error) == (OpState.FAILED, "STALE_PRECONDITION")
    assert stored(store, "m-a") == now


def test_a_reactivate_leaves_a_source_quarantined_since(env: Env) -> None:
    """Guard: ``r.status is not Status.superseded`` in the reactivate applier. Mutant: only
    the replacement is compared -> a source the gate quarantined (it keeps its
    ``replaced_by``) is made active, served again although the gate held it back."""
    store = env[0]
    src = superseded_by(rec("m-a"), "m-r")
    store.put_many([src, rec("m-r", "Likes green tea.")])
    ex = executor(env)
    op = plan(ex, OpKind.reactivate, src, ["REPLACEMENT_ERASED"], replacement="m-r")
    store.set_status(["m-a"], Status.quarantined, replaced_by="m-r", at=T0)
    done = run_one(ex, op)
    assert (done.state, done.last_error) == (OpState.FAILED, "STALE_PRECONDITION")
    assert stored(store, "m-a").status is Status.quarantined


def test_a_reactivate_found_done_after_a_crash_is_receipted_not_failed(env: Env) -> None:
    """Guard: the applier's 'already active with no replacement: done' branch (a crash after
    the write, before the journal knew). Mutant: the branch removed -> the rerun finds the
    record not superseded and journals a terminal STALE_PRECONDITION for a change it made."""
    store = env[0]
    src = superseded_by(rec("m-a"), "m-r")
    store.put_many([src, rec("m-r", "Likes green tea.")])
    ex = executor(env)
    op = plan(ex, OpKind.reactivate, src, ["REPLACEMENT_ERASED"], replacement="m-r")
    store.set_status(["m-a"], Status.active, replaced_by=None, at=T0)  # the crashed attempt
    done = run_one(ex, op)
    assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.restored)
    assert stored(store, "m-a").status is Status.active


# -- appliers/restore.py -----------------------------------------------------------------------


def _quarantined(store: SqliteStore, r: MemoryRecord, replaced_by: str | None) -> None:
    """``r`` snapshotted as it is, then quarantined keeping ``replaced_by`` (status.py)."""
    from memlife.quarantine import snapshot

    store.put_many([r])
    assert snapshot(store, [r.id]) == 1
    store.set_status([r.id], Status.quarantined, replaced_by=replaced_by, at=T0)


def test_a_restore_of_a_record_rewritten_since_planning_is_refused(env: Env) -> None:
    """Guard: ``stale(o, r)`` in the restore applier. S (quarantined, snapshot: active) was
    rewritten by another tool after the restore was planned. Mutant: no precondition -> the
    new text is made active on the strength of a restore decided for the old one."""
    store = env[0]
    _quarantined(store, rec("S"), None)
    ex = executor(env)
    op = plan(ex, OpKind.restore, stored(store, "S"), ["OPERATOR_RESTORE"])
    store.put_many([stored(store, "S").model_copy(update={"content": "Likes coffee."})])
    done = run_one(ex, op)
    assert (done.state, done.last_error) == (OpState.FAILED, "STALE_PRECONDITION")
    assert stored(store, "S").status is Status.quarantined


def test_a_restore_never_puts_a_record_behind_another_tenants_record_of_its_replacements_id(
    env: Env,
) -> None:
    """Guard: the scope check in restore's _active_head. S was superseded by R and then
    quarantined; R went and u-2's record took the id R. Mutant: _active_head checks only
    that R exists -> S comes back superseded by u-2's record (a chain across tenants)."""
    store = env[0]
    _quarantined(store, superseded_by(rec("S"), "R"), "R")
    store.put_many([rec("R", "Plays the cello.", actor_id="u-2", namespace="/users/u-2/facts")])
    ex = executor(env)
    done = run_one(ex, plan(ex, OpKind.restore, stored(store, "S"), ["OPERATOR_RESTORE"]))
    assert (done.state, done.last_error) == (OpState.FAILED, "REPLACEMENT_MISSING")
    assert stored(store, "S").status is Status.quarantined


def test_a_restore_follows_the_replacement_the_record_points_to_now(env: Env) -> None:
    """Guard: ``r.provenance.replaced_by or before.replaced_by`` in the restore applier: a
    quarantined source is re-pointed with its chain (status.py _repoint), so what it names
    now is newer than its snapshot. S's snapshot names R; R was superseded by R2 (S moved
    to R2) and then deleted. Mutant: only the snapshot's R is followed -> the chain ends at
    nothing and the restore fails REPLACEMENT_MISSING although R2 is active."""
    store = env[0]
    _quarantined(store, superseded_by(rec("S"), "R"), "R2")
    store.put_many([rec("R2", "Likes green tea.", provenance={"supersedes": ["R"]})])
    ex = executor(env)
    done = run_one(ex, plan(ex, OpKind.restore, stored(store, "S"), ["OPERATOR_RESTORE"]))
    assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.restored)
    s = stored(store, "S")
    assert (s.status, s.provenance.replaced_by) == (Status.superseded, "R2")


def test_a_restore_of_a_record_taken_out_of_quarantine_otherwise_is_not_claimed(
    env: Env,
) -> None:
    """Guard: ``r.provenance == <snapshot's provenance>`` in the restore applier's done-already
    test. S (snapshot: superseded by R) was taken out of quarantine by another tool after the
    restore was planned, and put behind X instead. Mutant: the status alone compared -> the
    restore is receipted as done although S is not as its snapshot says (a receipt for a
    change no one made)."""
    store = env[0]
    _quarantined(store, superseded_by(rec("S"), "R"), "R")
    store.put_many([rec("R", "Likes green tea."), rec("X", "Likes oolong.")])
    ex = executor(env)
    op = plan(ex, OpKind.restore, stored(store, "S"), ["OPERATOR_RESTORE"])
    store.set_status(["S"], Status.superseded, replaced_by="X", at=T0)
    done = run_one(ex, op)
    assert (done.state, done.last_error) == (OpState.FAILED, "NOT_QUARANTINED")
    assert stored(store, "S").provenance.replaced_by == "X"


def test_a_restore_behind_a_moved_chain_resumed_after_a_crash_is_receipted(env: Env) -> None:
    """Invariant 4 (a rerun after a crash at any step journals the right outcome). S's
    snapshot says superseded by R; R was superseded by R2 meanwhile, so the restore puts S
    behind R2. The run crashes right after that write (checkpoint after_supersede). The
    rerun found S superseded by R2, compared with the snapshot (R) and failed it
    NOT_QUARANTINED, terminally: the restore that happened had no receipt (a real bug the
    audit found). The done check now takes ``replaced_by`` anywhere on the snapshot's chain."""
    from memlife.faults import InjectedFault, inject

    store = env[0]
    _quarantined(store, superseded_by(rec("S"), "R"), "R2")
    store.put_many([rec("R2", "Likes green tea.", provenance={"supersedes": ["R"]})])
    ex = executor(env)
    op = plan(ex, OpKind.restore, stored(store, "S"), ["OPERATOR_RESTORE"])
    with inject("after_supersede"), pytest.raises(InjectedFault):
        run_one(ex, op)
    s = stored(store, "S")
    assert (s.status, s.provenance.replaced_by) == (Status.superseded, "R2")  # it was written
    done = run_one(ex, op)
    assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.restored)


# -- appliers/update.py ------------------------------------------------------------------------


def test_an_update_into_another_namespace_of_the_same_actor_is_refused_by_the_applier(
    env: Env,
) -> None:
    """Guard: ``(old.actor_id, old.namespace) != (new.actor_id, new.namespace)`` in the
    update applier (tenants are actor AND namespace). An update operation whose payload
    moves u-1's record into u-1's other namespace. Mutant: only the actor compared -> the
    record is rewritten into another namespace by an operation scoped to the first."""
    store = env[0]
    old = rec("m-a")
    store.put_many([old])
    ex = executor(env)
    new = rec("m-a", "Likes green tea.", namespace="/users/u-1/work")
    op = plan(ex, OpKind.update, old, ["IMPORT_UPDATE"], payload=new.to_json())
    done = run_one(ex, op)
    assert (done.state, done.last_error) == (OpState.FAILED, "SCOPE_MISMATCH")
    assert stored(store, "m-a") == old


@pytest.mark.parametrize("allow", [False, True])
def test_an_update_of_a_held_record_needs_allow_held(env: Env, allow: bool) -> None:
    """Guard: ``is_held(old) and "ALLOW_HELD" not in o.reasons`` in the update applier (the
    store's upsert checks no hold). m-a was held after the import was planned. Mutants: the
    check removed (a held record rewritten without --allow-held: invariant 1), or
    ALLOW_HELD ignored (an operator's explicit --allow-held refused)."""
    store = env[0]
    old = rec("m-a")
    store.put_many([old])
    ex = executor(env)
    new = held(rec("m-a", "Likes green tea."))
    reasons = ["IMPORT_UPDATE", *(["ALLOW_HELD"] if allow else [])]
    op = plan(ex, OpKind.update, old, reasons, payload=new.to_json())
    store.put_many([held(old)])
    done = run_one(ex, op)
    if allow:
        assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.updated)
        assert stored(store, "m-a") == new
    else:
        assert (done.state, done.last_error) == (OpState.FAILED, "LEGAL_HOLD")
        assert stored(store, "m-a") == held(old)


def test_an_update_never_brings_back_text_erased_for_the_actor(env: Env) -> None:
    """Guard: ``code = refusal(ex.store, new)`` in the update applier (the store's upsert
    checks no tombstone). u-1's m-e was erased after the import was planned; the update
    would write its text into m-a. Mutant: the refusal not asked -> erased content returns
    in an active record (invariant 11)."""
    from memlife import tombstones

    store = env[0]
    old, erased = rec("m-a"), rec("m-e", "Lives at 12 Elm Street.")
    store.put_many([old])
    ex = executor(env)
    new = rec("m-a", "Lives at 12 Elm Street.")
    op = plan(ex, OpKind.update, old, ["IMPORT_UPDATE"], payload=new.to_json())
    tombstones.add(store, [erased])
    done = run_one(ex, op)
    assert (done.state, done.last_error) == (OpState.FAILED, "ERASED_CONTENT")
    assert stored(store, "m-a") == old


# -- appliers/review.py, appliers/write.py -----------------------------------------------------


def test_a_review_decision_other_than_keep_dispute_or_verify_changes_nothing(env: Env) -> None:
    """Guard: ``if decision != "verify"`` -> BAD_DECISION in the review applier. Mutant: the
    check removed -> any decision (a typo, a decision of a newer tool) stamps the record
    verified: its verification freshness, a scoring input, changed by no reviewer's verify."""
    import json

    store = env[0]
    r = rec("m-a", last_verified_at=T0 - timedelta(days=200))
    store.put_many([r])
    ex = executor(env)
    op = plan(ex, OpKind.review, r, ["REVIEW"], payload=json.dumps({"decision": "approve"}))
    done = run_one(ex, op)
    assert (done.state, done.last_error) == (OpState.FAILED, "BAD_DECISION")
    assert stored(store, "m-a") == r


@pytest.mark.parametrize("change", ["rewritten", "id_taken_by_another_actor"])
def test_a_verify_of_a_record_changed_since_the_decision_stamps_nothing(
    env: Env, change: str
) -> None:
    """Guard: ``stale(o, r)`` in the review applier. A reviewer verified m-a; before the
    decision applied, m-a was rewritten, or freed and its id taken by u-2's record.
    Mutant: no precondition -> the new text (or another tenant's record) is stamped
    verified by a reviewer who never saw it."""
    import json

    store = env[0]
    r = rec("m-a", last_verified_at=T0 - timedelta(days=200))
    store.put_many([r])
    ex = executor(env)
    op = plan(ex, OpKind.review, r, ["REVIEW"], payload=json.dumps({"decision": "verify"}))
    if change == "rewritten":
        now = r.model_copy(update={"content": "Likes coffee."})
    else:
        now = r.model_copy(update={"actor_id": "u-2", "namespace": "/users/u-2/facts"})
    store.put_many([now])
    done = run_one(ex, op)
    code = "STALE_PRECONDITION" if change == "rewritten" else "SCOPE_CHANGED"
    assert (done.state, done.last_error) == (OpState.FAILED, code)
    assert stored(store, "m-a") == now


def test_a_replacement_an_erasure_refused_leaves_no_copy_of_its_text_in_the_journal(
    env: Env,
) -> None:
    """Guard: ``ex.journal.forget_payloads([o.record_id])`` in the write applier. The
    replacement's text was erased (tombstoned) after the group was staged; the write is
    refused and withdrawn; the run then crashes before the receipt (which would drop the
    payload with it). Mutant: the payload kept -> the erased text stays in the journal's
    operation row until some later rerun (invariant 11: erased content never returns)."""
    from memlife import tombstones
    from memlife.faults import InjectedFault, inject

    store, journal, _ = env
    erased = rec("m-e", "Lives at 12 Elm Street.")
    repl = rec("m-r", "Lives at 12 Elm Street.", provenance={"supersedes": ["m-e", "m-b"]})
    ex = executor(env)
    op = plan(ex, OpKind.write_replacement, repl, ["CONSOLIDATION"], payload=repl.to_json())
    tombstones.add(store, [erased])
    with inject("before_receipt"), pytest.raises(InjectedFault):
        run_one(ex, op)  # the crash after the journal knew, before the receipt
    kept = journal.get(op.operation_id)
    assert kept is not None and (kept.state, kept.outcome) == (OpState.APPLIED, Outcome.skipped)
    assert not kept.payload
    assert store.get("m-r") is None


# -- groups.py: resume_group, _sources_moved, commit_group, stage_shard ------------------------


def _group(ex: Executor, sources: list[MemoryRecord], payload: bool = True) -> list[Operation]:
    """A consolidation group as commit_group journals it: the write of m-r, then one
    supersede per source, one transaction."""
    repl = rec("m-r", "Likes green tea.", provenance={"supersedes": [s.id for s in sources]})
    return ex.journal.plan([
        ex.new_op(OpKind.write_replacement, "u-1", NS, "m-r", ["CONSOLIDATION"], repl.sha256,
                  payload=repl.to_json() if payload else None),
        *(ex.new_op(OpKind.supersede, "u-1", NS, s.id, ["SAME_SUBJECT"], s.sha256,
                    replacement="m-r") for s in sources),
    ])  # fmt: skip


def test_a_group_whose_source_left_active_before_the_write_is_withdrawn(env: Env) -> None:
    """Guard: ``r.status is not Status.active`` in _sources_moved. m-b was quarantined (same
    text, same scope, no hold) after the group was read. Mutant: only stale() is asked ->
    the replacement is written with m-b's claim while m-b's supersede is refused: a new
    active record carrying what the gate held back."""
    from memlife.apply.group_resume import resume_group

    store = env[0]
    a, b = rec("m-a"), rec("m-b", "Likes tea a lot.")
    store.put_many([a, b])
    ex = executor(env)
    planned = _group(ex, [a, b])
    store.set_status(["m-b"], Status.quarantined, at=T0)
    tally = Tally()
    resume_group(ex, planned, tally)
    assert tally.counts["consolidation_withdrawn_changed"] == 1
    assert store.get("m-r") is None
    assert {o.record_id: o.outcome for o in ex.journal.by_run(ex.run_id)} == dict.fromkeys(
        ("m-r", "m-a", "m-b"), Outcome.skipped
    )


def test_a_group_resumed_after_its_write_supersedes_each_source_on_its_own_check(
    env: Env,
) -> None:
    """Guard: _sources_moved's ``written already`` return. The replacement was written (and
    receipted) before a crash; then m-b was edited. Since session 45 (audit 45i) the group
    is withdrawn after the write too (``_left_since``; since session 46 at the supersedes, appliers/status.py): superseding m-a alone left the
    replacement serving what m-b no longer says. The written replacement is taken back
    under a receipted delete, so it is not served beside m-a either; both stay active."""
    from memlife.apply.group_resume import resume_group

    store = env[0]
    a, b = rec("m-a"), rec("m-b", "Likes tea a lot.")
    store.put_many([a, b])
    ex = executor(env)
    planned = _group(ex, [a, b])
    (written,) = run_lifecycle(ex, planned[:1], Tally())  # then the crash
    assert (written.state, written.outcome) == (OpState.RECEIPTED, Outcome.written)
    store.put_many([b.model_copy(update={"content": "Likes coffee now."})])
    resume_group(ex, [written, *planned[1:]], Tally())
    ops = {(o.record_id, o.kind): o for o in ex.journal.by_run(ex.run_id)}
    assert ops[("m-a", OpKind.supersede)].outcome is Outcome.skipped
    assert ops[("m-b", OpKind.supersede)].outcome is Outcome.skipped
    assert ops[("m-r", OpKind.delete)].outcome is Outcome.deleted  # taken back, receipted
    assert store.get("m-r") is None
    assert stored(store, "m-a").status is Status.active


def test_a_staged_group_of_a_stopped_shard_is_not_committed(env: Env) -> None:
    """Guard: ``staged.shard in ex.stopped`` in commit_group. A store error stopped u-1's
    shard after its groups were staged (and gated). Mutant: the group is journaled and
    carried out on a store that stopped the shard: the run goes on writing where it said
    it stopped (the receipt lists the shard as stopped)."""
    from memlife.apply.groups import StagedGroup, commit_group

    store = env[0]
    a, b = rec("m-a"), rec("m-b", "Likes tea a lot.")
    store.put_many([a, b])
    ex = executor(env)
    repl = rec("m-r", "Likes green tea.", provenance={"supersedes": ["m-a", "m-b"]})
    write = ex.new_op(OpKind.write_replacement, "u-1", NS, "m-r", ["CONSOLIDATION"],
                      repl.sha256, payload=repl.to_json())  # fmt: skip
    sups = [ex.new_op(OpKind.supersede, "u-1", NS, s.id, ["SAME_SUBJECT"], s.sha256,
                      replacement="m-r") for s in (a, b)]  # fmt: skip
    ex.stopped.add(("u-1", NS))
    commit_group(ex, StagedGroup(repl, write, sups), Tally())
    assert ex.journal.by_run(ex.run_id) == []
    assert store.get("m-r") is None and stored(store, "m-a") == a


class CountingRefusals:
    """A model stand-in (the consolidator boundary) that counts its calls and whose every
    answer is refused by grounding."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def consolidate(self, group: Any) -> Any:
        from memlife.consolidate.base import ConsolidationError

        self.calls += 1
        raise ConsolidationError("UNGROUNDED_CLAIM")


def test_a_stopped_shard_stages_no_more_groups(env: Env) -> None:
    """Guard: ``if (actor, namespace) in ex.stopped: break`` in stage_shard. A store error
    stopped u-1's shard earlier in the run. Mutant: its groups are still read and sent to
    the model (a paid call for nothing: commit_group would not write them), and a refused
    answer starts the group's backoff on a night that never tried to apply it."""
    from memlife.plan import Action, Decision

    store = env[0]
    store.put_many([rec("m-1"), rec("m-2")])  # the same fact twice: a group to merge
    ex = executor(env)
    model = CountingRefusals()
    ex.consolidator = model
    ex.stopped.add(("u-1", NS))
    members = [Decision(i, "u-1", NS, Action.consolidate_candidate, [], group="g")
               for i in ("m-1", "m-2")]  # fmt: skip
    tally = Tally()
    assert ex.stage_shard(members, tally) == []
    assert model.calls == 0 and tally.model_calls == 0
    assert ex.journal.groups_in_review() == [] and tally.counts["consolidation_rejected"] == 0


def test_a_refused_group_is_sent_again_at_the_moment_its_backoff_ends(env: Env) -> None:
    """Guards: ``known["retry_at"] > ex.cutoff`` in _settled (the REFUSED memo) and
    ``seen["next_attempt_at"] > ex.cutoff`` in _backing_off. The model's answer was refused
    once; a run whose cutoff is exactly the end of the backoff sends the group again.
    Mutants: ``>=`` in either -> the group waits one more night than its backoff says."""
    from datetime import datetime as dt

    from memlife.plan import Action, Decision

    store, journal, _ = env
    store.put_many([rec("m-1"), rec("m-2")])  # the same fact twice: a group to merge
    model = CountingRefusals()
    members = [Decision(i, "u-1", NS, Action.consolidate_candidate, [], group="g")
               for i in ("m-1", "m-2")]  # fmt: skip
    first = executor(env, "n1")
    first.consolidator = model
    first.stage_shard(members, Tally())
    assert model.calls == 1
    (row,) = journal.connection.execute(  # type: ignore[attr-defined]
        "SELECT next_attempt_at FROM consolidation_rejections"
    ).fetchall()
    ends = dt.fromisoformat(row[0])
    again = Executor(run_id="run-n2", run_key="n2", policy=POLICY, cutoff=ends, store=store,
                     journal=journal, sink=env[2], consolidator=model)  # fmt: skip
    tally = Tally()
    again.stage_shard(members, tally)
    assert model.calls == 2 and tally.counts["consolidation_backing_off"] == 0


# -- deletions.py ------------------------------------------------------------------------------


def test_a_source_kept_because_its_replacement_stays_is_reported_as_such(env: Env) -> None:
    """Guard: the SOURCE_KEPT / HELD_SOURCE mapping in deletions.delete. S's delete was
    planned for when its replacement R goes, and R stays. Mutant: every skip reported as
    HELD_SOURCE -> the run receipt names a hold that does not exist."""
    from memlife.apply import DeleteItem

    store = env[0]
    s = superseded_by(rec("S"), "R")
    store.put_many([s, rec("R", "Likes green tea.", provenance={"supersedes": ["S"]})])
    tally = Tally()
    item = DeleteItem("S", "u-1", NS, ("ALREADY_SUPERSEDED", "REPLACEMENT_DELETED"), s.sha256)
    executor(env).delete([item], tally)
    assert tally.ids_not_deleted == [{"id": "S", "reason": "SOURCE_KEPT"}]
    assert stored(store, "S") == s


class DeleteQuota(SqliteStore):
    """Every batch delete is refused for quota (AgentCore's 402): a store-level error."""

    def delete_many(self, ids: Any, **kw: Any) -> Any:
        from memlife.errors import StoreError

        raise StoreError("quota exceeded", "SERVICE_QUOTA_EXCEEDED")


def test_a_stopped_shard_lists_every_later_batch_as_not_deleted_and_plans_none(
    home: Path,
) -> None:
    """Guards: ``if (...) in ex.stopped`` before each batch in deletions.delete and its
    ``shard_items[n * MAX_BATCH:]``. 250 expired records (three batches); the first batch
    stops the shard. Mutants: the check removed (batches 2 and 3 are journaled and sent to
    a store that stopped), or only the current batch listed (batch 3's ids are in no list:
    records not deleted that the run receipt does not name)."""
    from memlife.apply import DeleteItem

    store = DeleteQuota(home / "memlife.db")
    try:
        env = (store, open_journal(store), FileSink(home / "receipts"))
        recs = [rec(f"m-{i:03d}", f"Fact {i}.", expires_at=T0 - timedelta(days=1))
                for i in range(250)]  # fmt: skip
        store.put_many(recs)
        tally = Tally()
        ex = executor(env)
        ex.delete([DeleteItem(r.id, "u-1", NS, ("HARD_EXPIRED",), r.sha256) for r in recs], tally)
        reasons = {d["id"]: d["reason"] for d in tally.ids_not_deleted}
        assert len(tally.ids_not_deleted) == 250 and len(reasons) == 250
        assert {reasons[r.id] for r in recs[:100]} == {"SERVICE_QUOTA_EXCEEDED"}
        assert {reasons[r.id] for r in recs[100:]} == {"SHARD_STOPPED"}
        assert len(ex.journal.by_run(ex.run_id)) == 100
    finally:
        store.close()


# -- stage_cache.py --------------------------------------------------------------------------


def test_a_gated_dry_run_builds_every_group_even_when_the_stage_cache_knows_it(
    home: Path, tmp_path: Path
) -> None:
    """Guard: ``ex.evaluated`` in StageCache.open (only an ungated dry run may count a group
    from the cache: a gated one must build the replacement the gate reads). An ungated dry
    run kept the shard's outcome; a gated dry run of the same, unchanged group follows.
    Mutant: the gated run is answered from the cache -> StagedRefs without replacements,
    and the regression gate evaluates a change set without the consolidation."""
    from memlife.apply.groups import StagedGroup, StagedRef
    from memlife.consolidate.extractive import ExtractiveConsolidator
    from memlife.embed_cache import EmbeddingCache
    from memlife.model import plan_view
    from memlife.plan import Action, Decision
    from tests.e2e.test_dry_run_fast_paths import WordHashEmbedder

    store = SqliteStore(home / "memlife.db")
    cache = EmbeddingCache(WordHashEmbedder(), path=tmp_path / "embeddings.db")  # type: ignore[arg-type]
    try:
        recs = [rec("m-1"), rec("m-2")]  # the same fact twice: a group to merge
        store.put_many(recs)
        views = {r.id: plan_view(r) for r in recs}
        members = [Decision(r.id, "u-1", NS, Action.consolidate_candidate, [], group="g",
                            content_sha256=r.sha256) for r in recs]  # fmt: skip

        def dry(evaluated: bool) -> list[Any]:
            ex = Executor(run_id="run-dry", run_key="dry", policy=POLICY, cutoff=T0,
                          store=store, journal=None, sink=None, dry_run=True,
                          consolidator=ExtractiveConsolidator(), embeddings=cache,
                          evaluated=evaluated)  # fmt: skip
            return ex.stage_shard(members, Tally(), views=views)

        assert [type(s) for s in dry(False)] == [StagedRef]  # counted, and kept
        (gated,) = dry(True)
        assert isinstance(gated, StagedGroup)
        assert sorted(gated.superseded_ids) == ["m-1", "m-2"]
    finally:
        cache.close()
        store.close()


def test_a_source_listed_a_batch_before_its_replacement_still_goes_with_it(env: Env) -> None:
    """Guard: deletions.delete sorting a shard's REPLACEMENT_DELETED items last (the batches
    of 100 are cut after the sort). S (superseded by R, to go when R goes) is listed first,
    R after 100 other expired records. Mutant: no sort -> S is decided in the first batch
    while R still stands and is kept; R goes in the second: S points at nothing (inv. 3)."""
    from memlife.apply import DeleteItem

    store = env[0]
    r = rec("R", "Likes green tea.", expires_at=T0 - timedelta(days=1),
            provenance={"supersedes": ["S"]})  # fmt: skip
    s = superseded_by(rec("S"), "R")
    fillers = [rec(f"m-{i:03d}", f"Fact {i}.", expires_at=T0 - timedelta(days=1))
               for i in range(100)]  # fmt: skip
    store.put_many([r, s, *fillers])
    items = [
        DeleteItem("S", "u-1", NS, ("ALREADY_SUPERSEDED", "REPLACEMENT_DELETED"), s.sha256),
        *(DeleteItem(f.id, "u-1", NS, ("HARD_EXPIRED",), f.sha256) for f in fillers),
        DeleteItem("R", "u-1", NS, ("HARD_EXPIRED",), r.sha256),
    ]
    tally = Tally()
    executor(env).delete(items, tally)
    assert tally.ids_not_deleted == []
    assert store.get("R") is None and store.get("S") is None


def test_records_quarantined_instead_of_deleted_are_listed_as_not_deleted(env: Env) -> None:
    """Guard: deletions.quarantine listing each item in ``ids_not_deleted`` with the gate's
    reason. The gate blocked m-exp's delete: it is quarantined. Mutant: the list not kept ->
    the run receipt names no record the run was asked to delete and did not."""
    from memlife.apply import DeleteItem

    store = env[0]
    r = rec("m-exp", expires_at=T0 - timedelta(days=1))
    store.put_many([r])
    tally = Tally()
    item = DeleteItem("m-exp", "u-1", NS, ("HARD_EXPIRED",), r.sha256)
    executor(env).quarantine([item], tally, "GATE_BLOCKED")
    assert tally.ids_not_deleted == [{"id": "m-exp", "reason": "GATE_BLOCKED"}]
    assert stored(store, "m-exp").status is Status.quarantined


def test_an_answer_accepted_after_a_refusal_clears_the_groups_backoff(env: Env) -> None:
    """Guard (G14, left by the twentieth audit): ``ex.journal.clear_rejection(gkey)`` in
    stage_group once an answer is accepted. The model's answer was refused on night 1; at
    the end of the backoff another model (here the extractive consolidator) is accepted.
    Mutant: the rejection kept -> the group's refusal count and backoff carry on past a
    good answer, and the next refusal of it waits longer, or goes to review, sooner."""
    from datetime import datetime as dt

    from memlife.consolidate.extractive import ExtractiveConsolidator
    from memlife.plan import Action, Decision

    store, journal, _ = env
    store.put_many([rec("m-1"), rec("m-2")])  # the same fact twice: a group to merge
    members = [Decision(i, "u-1", NS, Action.consolidate_candidate, [], group="g")
               for i in ("m-1", "m-2")]  # fmt: skip
    first = executor(env, "n1")
    first.consolidator = CountingRefusals()
    first.stage_shard(members, Tally())
    rows = "SELECT next_attempt_at FROM consolidation_rejections"
    ((ends,),) = journal.connection.execute(rows).fetchall()  # type: ignore[attr-defined]
    again = Executor(run_id="run-n2", run_key="n2", policy=POLICY, cutoff=dt.fromisoformat(ends),
                     store=store, journal=journal, sink=env[2],
                     consolidator=ExtractiveConsolidator())  # fmt: skip
    tally = Tally()
    staged = again.stage_shard(members, tally)
    assert staged and tally.counts["consolidation_rejected"] == 0
    assert journal.connection.execute(rows).fetchall() == []  # type: ignore[attr-defined]
