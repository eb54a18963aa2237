"""Guards left untested by the thirty-sixth audit (session 38): the window between an
applier's read of a record and its write. Online writers (an import with its own ids, the
LangGraph store, online forget) take no lifecycle lease, so they can change a record at any
moment of a nightly run. Each race is forced deterministically, as in
tests/unit/test_hold_writes_as_read.py: a SqliteStore subclass runs another writer (its own
connection on the same file) right AFTER the applier's read (``get_many`` or ``get``).
Operations are driven through the executor's lifecycle (``run_lifecycle``) as a night
drives them; no mocks of memlife logic. Tests marked xfail(strict) show real bugs."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.apply import Executor, Tally
from memlife.apply.lifecycle import run_lifecycle
from memlife.audit import FileSink
from memlife.journal import Journal, Operation, OpKind, OpState, Outcome, open_journal
from memlife.model import MemoryRecord, RetentionClass, Status
from memlife.stores.sqlite import SqliteStore
from tests.unit.test_guards_session33 import POLICY, T0, rec

NS2 = "/users/u-2/facts"
Race = Callable[[SqliteStore], None]


class RacedStore(SqliteStore):
    """Runs ``race`` (another writer, its own connection) once, right after the first read
    an APPLIER makes (a frame of memlife/apply/appliers/ called get_many or get) naming
    ``rid``: between that applier's read and its write."""

    race: Race | None = None
    rid: str = ""
    readers: tuple[str, ...] = ("memlife.apply.appliers.",)

    def _after_read(self, ids: Sequence[str]) -> None:
        caller = sys._getframe(2).f_globals.get("__name__", "")
        if self.race is None or self.rid not in ids:
            return
        if not caller.startswith(self.readers):
            return
        fn, self.race = self.race, None
        with SqliteStore(self.path) as other:
            fn(other)

    def get_many(self, ids: Sequence[str]) -> dict[str, MemoryRecord]:
        got = super().get_many(ids)
        self._after_read(ids)
        return got

    def get(self, record_id: str) -> MemoryRecord | None:
        got = super().get(record_id)
        self._after_read([record_id])
        return got


Env = tuple[RacedStore, Journal, FileSink]


@pytest.fixture()
def env(home: Path) -> Iterator[Env]:
    store = RacedStore(home / "memlife.db")
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


def stored(store: SqliteStore, rid: str) -> MemoryRecord:
    got = store.get(rid)
    assert got is not None
    return got


THEIRS = rec("m-a", "Bob plays the cello.", actor_id="u-2", namespace=NS2)


def taken_over(other: SqliteStore) -> None:
    """An import with its own ids: u-1's m-a went, u-2's record took the id."""
    other.delete_many(["m-a"])
    other.put_many([THEIRS])


def rewritten(other: SqliteStore) -> None:
    """The LangGraph store's put: m-a's text changed (conditional on the text read)."""
    now = stored(other, "m-a")
    res = other.put_if_unchanged(now.model_copy(update={"content": "Likes coffee now."}),
                                 now.sha256)  # fmt: skip
    assert res.succeeded == ["m-a"]


def forgotten(other: SqliteStore) -> None:
    """Online forget (u-1's own): m-a marked pending_delete."""
    res = other.set_status_unless_held(["m-a"], Status.pending_delete, actor="u-1")
    assert res.succeeded == ["m-a"]


def arm(store: RacedStore, race: Race, rid: str = "m-a") -> None:
    store.rid, store.race = rid, race


def assert_raced(store: RacedStore) -> None:
    assert store.race is None, "the race never ran: the applier did not read m-a"


# -- appliers/review.py: verify writes the whole record read back ------------------------------


@pytest.mark.parametrize("race", [taken_over, rewritten, forgotten])
def test_a_verify_writes_only_its_stamp_on_the_row_as_read(env: Env, race: Race) -> None:
    """Attacks ``ex.store.put_many([r.model_copy(...)])`` in
    ``memlife/apply/appliers/review.py::Review.apply``: after the read, u-2's record took
    the id / the text was rewritten / the record was forgotten. The whole record read is
    written back: u-2's record becomes u-1's again, the new text reverts, the forget is
    undone (pending_delete -> active)."""
    store = env[0]
    r = rec("m-a", last_verified_at=T0 - timedelta(days=200))
    store.put_many([r])
    ex = executor(env)
    op = plan(ex, OpKind.review, r, ["REVIEW"], payload=json.dumps({"decision": "verify"}))
    arm(store, race)
    run_one(ex, op)
    assert_raced(store)
    after = stored(store, "m-a")
    if race is taken_over:
        assert (after.actor_id, after.content) == ("u-2", THEIRS.content)
    elif race is rewritten:
        assert after.content == "Likes coffee now."
    else:
        assert after.status is Status.pending_delete


# -- appliers/update.py: the imported record written over whatever holds the id now ------------


@pytest.mark.parametrize("race", [taken_over, forgotten])
def test_an_update_writes_only_over_the_row_it_checked(env: Env, race: Race) -> None:
    """Attacks ``ex.store.put_many([new])`` in ``memlife/apply/appliers/update.py::
    Update.apply`` (scope, hold and tombstones checked on the read, not at the write):
    after the read u-2's record took the id (it is replaced by u-1's import) / u-1 forgot
    the record (the forget is undone: active again)."""
    store = env[0]
    old = rec("m-a", "Likes tea.")
    store.put_many([old])
    ex = executor(env)
    new = rec("m-a", "Likes green tea.")
    op = plan(ex, OpKind.update, old, ["IMPORT_UPDATE"], payload=new.to_json())
    arm(store, race)
    run_one(ex, op)
    assert_raced(store)
    after = stored(store, "m-a")
    if race is taken_over:
        assert (after.actor_id, after.content) == ("u-2", THEIRS.content)
    else:
        assert after.status is Status.pending_delete


# -- appliers/status.py: supersede and quarantine write set_status_unless_held, no actor --------


@pytest.mark.parametrize("kind", [OpKind.supersede, OpKind.quarantine])
def test_a_status_change_never_lands_on_another_actors_record_that_took_the_id(
    env: Env, kind: OpKind
) -> None:
    """Attacks ``_setter(ex)`` in ``memlife/apply/appliers/status.py::set_status``: the
    write is ``set_status_unless_held(ids, ...)`` with no ``actor``, so the scope ``stale``
    checked on the read is not checked at the write. After the read u-2's record took the
    id m-a: u-2's record is superseded by u-1's m-r (a chain across tenants) / quarantined."""
    store = env[0]
    a, r = rec("m-a"), rec("m-r", "Likes green tea.")
    store.put_many([a, r])
    ex = executor(env)
    kw: dict[str, Any] = {"replacement": "m-r"} if kind is OpKind.supersede else {}
    op = plan(ex, kind, a, ["SAME_SUBJECT"], **kw)
    arm(store, taken_over)
    run_one(ex, op)
    assert_raced(store)
    after = stored(store, "m-a")
    assert after.actor_id == "u-2"
    assert (after.status, after.provenance.replaced_by) == (Status.active, None)


def test_a_supersede_of_a_record_forgotten_after_the_read_is_not_written(env: Env) -> None:
    """Attacks the write of ``memlife/apply/appliers/status.py::set_status`` after a forget
    (pending_delete) landed between its read and its write: the forget is overwritten
    (superseded: kept for the superseded retention instead of the forget's grace)."""
    store = env[0]
    a, r = rec("m-a"), rec("m-r", "Likes green tea.")
    store.put_many([a, r])
    ex = executor(env)
    op = plan(ex, OpKind.supersede, a, ["SAME_SUBJECT"], replacement="m-r")
    arm(store, forgotten)
    run_one(ex, op)
    assert_raced(store)
    assert stored(store, "m-a").status is Status.pending_delete


# -- appliers/delete.py, erase.py, purge.py: delete_many by id, no scope at the write ------------


@pytest.mark.parametrize("kind", [OpKind.delete, OpKind.erase])
def test_a_delete_never_removes_another_actors_record_that_took_the_id(
    env: Env, kind: OpKind
) -> None:
    """Attacks ``ex.store.delete_many(ids)`` in ``memlife/apply/appliers/delete.py::
    delete_records`` and ``erase.py::Erase.apply``: the scope is checked on the read only
    (erase: not at all). After the read u-2's record took the id: it is deleted, and u-1's
    receipt says deleted for it."""
    store = env[0]
    a = rec("m-a", expires_at=T0 - timedelta(days=1))
    store.put_many([a])
    ex = executor(env)
    op = plan(ex, kind, a, ["HARD_EXPIRED"] if kind is OpKind.delete else ["ERASE_REQUEST"])
    arm(store, taken_over)
    run_one(ex, op)
    assert_raced(store)
    assert stored(store, "m-a").actor_id == "u-2"


def test_a_delete_never_removes_a_record_rewritten_since_its_read(env: Env) -> None:
    """Attacks ``ex.store.delete_many(ids)`` in ``delete_records``: ``stale`` compares the
    text on the read; the LangGraph store rewrote it (a new fact, no expiry) after: the new
    fact is deleted on the expiry of the old one."""
    store = env[0]
    a = rec("m-a", expires_at=T0 - timedelta(days=1))
    store.put_many([a])
    ex = executor(env)
    op = plan(ex, OpKind.delete, a, ["HARD_EXPIRED"])

    def renewed(other: SqliteStore) -> None:
        now = stored(other, "m-a")
        fresh = now.model_copy(update={"content": "Likes coffee now.", "expires_at": None})
        assert other.put_if_unchanged(fresh, now.sha256).succeeded == ["m-a"]

    arm(store, renewed)
    run_one(ex, op)
    assert_raced(store)
    assert stored(store, "m-a").content == "Likes coffee now."


# -- appliers/reactivate.py, restore.py -------------------------------------------------------


@pytest.mark.parametrize("race", [taken_over, forgotten])
def test_a_reactivate_writes_only_the_superseded_row_it_read(env: Env, race: Race) -> None:
    """Attacks ``ex.store.set_status`` in ``memlife/apply/appliers/reactivate.py::
    Reactivate.apply``: a plain set_status by id (no hold, actor or status condition).
    After the read u-2's superseded record took the id (made active, its replacement
    dropped) / u-1 forgot the source (the forget undone)."""
    store = env[0]
    src = rec("m-a").model_copy(update={"status": Status.superseded})
    src = src.model_copy(update={"provenance": src.provenance.model_copy(
        update={"replaced_by": "m-r"})})  # fmt: skip
    store.put_many([src])
    ex = executor(env)
    op = plan(ex, OpKind.reactivate, src, ["REPLACEMENT_ERASED"], replacement="m-r")
    theirs = THEIRS.model_copy(update={"status": Status.superseded, "provenance":
        THEIRS.provenance.model_copy(update={"replaced_by": "t-r"})})  # fmt: skip

    def their_superseded(other: SqliteStore) -> None:
        other.delete_many(["m-a"])
        other.put_many([theirs])

    arm(store, their_superseded if race is taken_over else race)
    run_one(ex, op)
    assert_raced(store)
    after = stored(store, "m-a")
    if race is taken_over:
        assert (after.status, after.provenance.replaced_by) == (Status.superseded, "t-r")
    else:
        assert after.status is Status.pending_delete


def _quarantined(store: SqliteStore, r: MemoryRecord) -> None:
    from memlife.quarantine import snapshot

    store.put_many([r])
    assert snapshot(store, [r.id]) == 1
    store.set_status([r.id], Status.quarantined, at=T0)


@pytest.mark.parametrize("race", [taken_over, rewritten, forgotten])
def test_a_restore_writes_only_over_the_quarantined_row_it_read(env: Env, race: Race) -> None:
    """Attacks ``ex.store.put_many([back])`` in ``memlife/apply/appliers/restore.py::
    Restore.apply`` (the snapshot path): the whole record as read is written back. After
    the read u-2's record took the id (replaced by u-1's) / the text was rewritten
    (reverted) / the record was forgotten (undone)."""
    store = env[0]
    _quarantined(store, rec("m-a"))
    ex = executor(env)
    op = plan(ex, OpKind.restore, stored(store, "m-a"), ["OPERATOR_RESTORE"])
    arm(store, race)
    run_one(ex, op)
    assert_raced(store)
    after = stored(store, "m-a")
    if race is taken_over:
        assert (after.actor_id, after.content) == ("u-2", THEIRS.content)
    elif race is rewritten:
        assert after.content == "Likes coffee now."
    else:
        assert after.status is Status.pending_delete


def test_a_restore_without_snapshot_never_lands_on_another_actors_record(env: Env) -> None:
    """Attacks ``ex.store.set_status([o.record_id], Status.active, ...)`` in
    ``memlife/apply/appliers/restore.py::Restore.apply`` (no snapshot, no replacement): a
    plain set_status by id. After the read u-2's quarantined record took the id: it is
    made active (and served) on u-1's operator's restore."""
    store = env[0]
    store.put_many([rec("m-a").model_copy(update={"status": Status.quarantined})])
    ex = executor(env)
    op = plan(ex, OpKind.restore, stored(store, "m-a"), ["OPERATOR_RESTORE"])

    def their_quarantined(other: SqliteStore) -> None:
        other.delete_many(["m-a"])
        other.put_many([THEIRS.model_copy(update={"status": Status.quarantined})])

    arm(store, their_quarantined)
    run_one(ex, op)
    assert_raced(store)
    after = stored(store, "m-a")
    assert (after.actor_id, after.status) == ("u-2", Status.quarantined)


# -- appliers/write.py: the replacement's id, read with get, then put_replacement ---------------


def test_a_replacement_write_never_lands_on_another_actors_record_of_its_id(env: Env) -> None:
    """Attacks ``write_replacement(ex.store, record)`` in ``memlife/apply/appliers/write.py::
    WriteReplacement.apply`` (read with ``get``; the store's put_replacement is an UPSERT by
    id with a tombstone check only). After the read u-2's record took the replacement's
    id (an import with its own ids): it is overwritten with u-1's replacement."""
    store = env[0]
    a = rec("m-a")
    store.put_many([a])
    ex = executor(env)
    new = rec("m-r", "Likes green tea.")
    new = new.model_copy(update={"provenance": new.provenance.model_copy(
        update={"supersedes": ["m-a"]})})  # fmt: skip
    op = plan(ex, OpKind.write_replacement, new, ["CONSOLIDATION"], payload=new.to_json())
    theirs = THEIRS.model_copy(update={"id": "m-r"})

    def their_record(other: SqliteStore) -> None:
        other.put_many([theirs])

    arm(store, their_record, rid="m-r")
    run_one(ex, op)
    assert_raced(store)
    after = stored(store, "m-r")
    assert (after.actor_id, after.content) == ("u-2", THEIRS.content)


# -- guards the mutation run showed untested (they hold on unmodified code) --------------------


def retained(other: SqliteStore) -> None:
    """A hold that retains m-a (status retained) placed after the read."""
    other.put_many([stored(other, "m-a").model_copy(update={"status": Status.retained})])


def test_a_hold_on_a_record_taken_over_since_its_read_is_failed_not_claimed(env: Env) -> None:
    """Attacks ``return ItemFailure(was.id, CHANGED, retryable=True)`` in
    ``memlife/apply/appliers/base.py::write_retention``: set_retention wrote nothing (u-2's
    record took the id after the read). Mutant ``return None``: the hold is journaled and
    receipted ``held`` although no hold was placed on anything."""
    store = env[0]
    a = rec("m-a")
    store.put_many([a])
    ex = executor(env)
    op = plan(ex, OpKind.hold, a, ["LEGAL_HOLD"])
    arm(store, taken_over)
    done = run_one(ex, op)
    assert_raced(store)
    assert (done.state, done.last_error) == (OpState.FAILED, "SCOPE_CHANGED")
    after = stored(store, "m-a")
    assert (after.actor_id, after.retention_class) == ("u-2", RetentionClass.standard)


def test_a_hold_placed_after_a_forget_keeps_the_forget(env: Env) -> None:
    """Attacks ``AND status=?`` in ``memlife/stores/sqlite.py::_SET_RETENTION``: u-1 forgot
    m-a after the hold read it. The conditional write must miss (CHANGED), read again and
    hold the row as it is. Mutant: the status condition dropped -> the hold writes the
    status read (active) back: the forget is undone."""
    store = env[0]
    a = rec("m-a")
    store.put_many([a])
    ex = executor(env)
    op = plan(ex, OpKind.hold, a, ["LEGAL_HOLD"])
    arm(store, forgotten)
    done = run_one(ex, op)
    assert_raced(store)
    assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.held)
    after = stored(store, "m-a")
    assert (after.status, after.retention_class) == (
        Status.pending_delete,
        RetentionClass.legal_hold,
    )


def test_a_supersede_of_a_record_deleted_after_its_read_is_record_missing(env: Env) -> None:
    """Attacks ``gone = set(res.missing)`` in ``memlife/apply/appliers/base.py::settled``:
    m-a was deleted after the supersede read it. Mutant ``gone = set()``: the supersede is
    receipted ``superseded`` for a record the store no longer has."""
    store = env[0]
    a, r = rec("m-a"), rec("m-r", "Likes green tea.")
    store.put_many([a, r])
    ex = executor(env)
    op = plan(ex, OpKind.supersede, a, ["SAME_SUBJECT"], replacement="m-r")

    def deleted(other: SqliteStore) -> None:
        assert other.delete_many(["m-a"]).succeeded == ["m-a"]

    arm(store, deleted)
    done = run_one(ex, op)
    assert_raced(store)
    assert (done.state, done.last_error) == (OpState.FAILED, "RECORD_MISSING")
    assert store.get("m-a") is None


@pytest.mark.parametrize("kind", [OpKind.supersede, OpKind.delete])
def test_a_record_retained_after_the_read_is_neither_superseded_nor_deleted(
    env: Env, kind: OpKind
) -> None:
    """Attacks ``row[2] == Status.retained.value`` in ``memlife/stores/sqlite.py::
    _set_status`` (unless_held) and ``AND status!=?`` in ``delete_many``: a hold that
    retains m-a (status retained, class unchanged) landed after the applier's read.
    Mutants: only the class checked -> the retained record is superseded / deleted."""
    store = env[0]
    a = rec("m-a", expires_at=T0 - timedelta(days=1))
    store.put_many([a, rec("m-r", "Likes green tea.")])
    ex = executor(env)
    if kind is OpKind.supersede:
        op = plan(ex, kind, a, ["SAME_SUBJECT"], replacement="m-r")
    else:
        op = plan(ex, kind, a, ["HARD_EXPIRED"])
    arm(store, retained)
    done = run_one(ex, op)
    assert_raced(store)
    assert (done.state, done.last_error) == (OpState.FAILED, "LEGAL_HOLD")
    assert stored(store, "m-a").status is Status.retained


def test_a_dispute_changes_no_record_and_is_reviewed(env: Env) -> None:
    """Attacks ``decision in ("keep", "dispute")`` in ``memlife/apply/appliers/review.py::
    Review.apply``. Mutant ``("keep",)``: a dispute is failed BAD_DECISION, the reviewer's
    decision never receipted."""
    store = env[0]
    r = rec("m-a", last_verified_at=T0 - timedelta(days=200))
    store.put_many([r])
    ex = executor(env)
    op = plan(ex, OpKind.review, r, ["REVIEW"], payload=json.dumps({"decision": "dispute"}))
    done = run_one(ex, op)
    assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.reviewed)
    assert stored(store, "m-a") == r


def test_an_online_forget_never_lands_on_another_actors_record_that_took_the_id(
    env: Env, tmp_path: Path
) -> None:
    """Attacks ``actor is not None and row[3] != actor`` in ``memlife/stores/sqlite.py::
    _set_status``: online ``forget(ids, actor="u-1")`` checks the actor on its read, then
    u-2's record took the id. Mutant: the write-time actor check dropped -> u-2's record
    is forgotten on u-1's request."""
    from memlife.ledger import AccessLedger
    from memlife.online.memory import LongTermMemory

    store = env[0]
    store.put_many([rec("m-a")])
    store.readers = ("memlife.online.",)
    arm(store, taken_over)
    mem = LongTermMemory(store, ledger=AccessLedger(tmp_path / "l"), refresh_seconds=1e9)
    assert mem.forget(["m-a"], actor="u-1") == []
    assert_raced(store)
    after = stored(store, "m-a")
    assert (after.actor_id, after.status) == ("u-2", Status.active)


def test_a_release_of_a_record_taken_over_since_its_read_is_scope_changed(env: Env) -> None:
    """Attacks ``failure.code == CHANGED and again`` in ``memlife/apply/appliers/
    hold_release.py::HoldRelease._release``: u-2's held record took the id after the read;
    the conditional write misses, the release reads again and refuses (SCOPE_CHANGED, not
    retried: u-2's hold is not u-1's to lift). Mutant: no second read -> failed CHANGED,
    retryable, and retried night after night against another tenant's record."""
    from memlife.apply.appliers.hold_release import release_payload

    store = env[0]
    h = rec("m-a", retention_class="legal_hold")
    store.put_many([h])
    ex = executor(env)
    op = plan(ex, OpKind.hold_release, h, ["RELEASE"],
              payload=release_payload(RetentionClass.standard))  # fmt: skip
    theirs = THEIRS.model_copy(update={"retention_class": RetentionClass.legal_hold})

    def their_held(other: SqliteStore) -> None:
        other.put_many([theirs])  # an import's upsert (a held row is not deleted first)

    arm(store, their_held)
    done = run_one(ex, op)
    assert_raced(store)
    assert (done.state, done.last_error) == (OpState.FAILED, "SCOPE_CHANGED")
    after = stored(store, "m-a")
    assert (after.actor_id, after.retention_class) == ("u-2", RetentionClass.legal_hold)


def test_a_restore_never_follows_a_chain_through_a_quarantined_replacement(env: Env) -> None:
    """Attacks ``if repl.status is not Status.superseded: return None`` in
    ``memlife/apply/appliers/restore.py::_active_head``: S was superseded by R and
    quarantined; R was then quarantined in its turn (keeping its own replaced_by X, as
    quarantine does). Mutant: the walk goes on through quarantined R -> S comes back
    superseded by X, a record R's quarantine had put out of S's chain."""
    store = env[0]
    s = rec("S").model_copy(update={"status": Status.superseded})
    s = s.model_copy(update={"provenance": s.provenance.model_copy(update={"replaced_by": "R"})})
    _quarantined(store, s)
    r = rec("R", "Likes green tea.").model_copy(update={"status": Status.quarantined})
    r = r.model_copy(update={"provenance": r.provenance.model_copy(update={"replaced_by": "X"})})
    store.put_many([r, rec("X", "Likes white tea.")])
    ex = executor(env)
    done = run_one(ex, plan(ex, OpKind.restore, stored(store, "S"), ["OPERATOR_RESTORE"]))
    assert (done.state, done.last_error) == (OpState.FAILED, "REPLACEMENT_MISSING")
    assert stored(store, "S").status is Status.quarantined


def test_an_erasure_whose_record_went_after_its_read_still_forgets_its_copies(env: Env) -> None:
    """Attacks ``gone = [*res.succeeded, *res.missing]`` in ``memlife/apply/appliers/
    erase.py::Erase.apply``: m-a was deleted after the erasure read it (delete_many finds
    it missing). Its copies must go all the same: here a planned import update that holds
    m-a's text as its payload. Mutant: only what this delete removed counts -> the text
    stays in the journal."""
    store, journal, _ = env
    a = rec("m-a", "Lives at 12 Elm Street.")
    store.put_many([a])
    ex = executor(env)
    upd = plan(ex, OpKind.update, a, ["IMPORT_UPDATE"], payload=a.to_json())
    op = plan(ex, OpKind.erase, a, ["ERASE_REQUEST"])

    def deleted(other: SqliteStore) -> None:
        assert other.delete_many(["m-a"]).succeeded == ["m-a"]

    arm(store, deleted)
    done = run_one(ex, op)
    assert_raced(store)
    assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.already_absent)
    kept = journal.get(upd.operation_id)
    assert kept is not None and not kept.payload


def test_a_held_record_of_the_replacements_id_with_other_text_is_not_claimed_written(
    env: Env,
) -> None:
    """Attacks ``current.content == record.content`` in ``memlife/apply/appliers/write.py::
    WriteReplacement.apply``: a held record under the replacement's id, naming the same
    sources, but with other text. Mutant: only the sources compared -> journaled
    ``written`` (and the supersede of its sources follows) though the replacement's text
    was never stored."""
    store = env[0]
    store.put_many([rec("m-a")])
    new = rec("m-r", "Likes green tea.")
    new = new.model_copy(
        update={"provenance": new.provenance.model_copy(update={"supersedes": ["m-a"]})}
    )
    other = new.model_copy(
        update={"content": "Likes black tea.", "retention_class": RetentionClass.legal_hold}
    )
    store.put_many([other])
    ex = executor(env)
    op = plan(ex, OpKind.write_replacement, new, ["CONSOLIDATION"], payload=new.to_json())
    done = run_one(ex, op)
    assert (done.state, done.last_error) == (OpState.FAILED, "LEGAL_HOLD")
    assert stored(store, "m-r").content == "Likes black tea."


def test_a_refresh_scoped_to_one_actor_never_touches_another_actors_row_of_the_id(
    home: Path,
) -> None:
    """Attacks ``(:actor IS NULL OR (actor_id = :actor AND namespace = :namespace))`` in
    ``memlife/stores/sqlite.py::_REFRESH``: online remember read u-1's m-a ("Likes tea.")
    as the duplicate, then u-2's record with the same words took the id. Mutant: the
    scope condition dropped -> u-1's restatement counts an access on u-2's record (and
    would change its lifetime)."""
    from memlife.stores.sqlite import Refresh

    with SqliteStore(home / "memlife.db") as store:
        mine = rec("m-a")
        theirs = rec("m-a", actor_id="u-2", namespace=NS2, access_count=3)
        store.put_many([theirs])
        change = Refresh(at=T0, confidence=1.0)
        assert not store.refresh_active("m-a", mine.sha256, change, scope=("u-1", mine.namespace))
        assert stored(store, "m-a") == theirs
