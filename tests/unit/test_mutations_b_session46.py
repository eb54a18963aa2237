"""Session 46 (audit 46f): mutation survivors in what session 46 changed (the group's supersedes checked
and written together, the per-actor ledger erase, verify latest during a night, the probe).
Each test names the mutation it kills (file, function, change). Real SQLite stores and
journals; the only hook is the supersede applier's own read (as
test_supersede_window_session46 does), standing for another process's write in between.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from memlife.apply import Tally
from memlife.apply.appliers import status as status_applier
from memlife.apply.group_resume import resume_group
from memlife.apply.lifecycle import run_lifecycle
from memlife.journal import OpKind, Outcome
from memlife.ledger import AccessLedger
from memlife.model import RetentionClass, Status
from memlife.stores.sqlite import SqliteStore
from tests.unit.test_guards_session33 import rec
from tests.unit.test_guards_session36e import _group, env, executor, plan  # noqa: F401
from tests.unit.test_ledger import T0, ledger  # noqa: F401  (ledger: a fixture)

Move = Callable[[SqliteStore], None]


def _raced_at_the_write(env: Any, monkeypatch: pytest.MonkeyPatch, move: Move) -> Any:  # noqa: F811
    """m-a, m-b merged into m-r; the write carried out (then a crash); the group resumed,
    ``move`` run right after the supersede applier's read (another process's write before
    the supersedes' own): its operations by (record, kind)."""
    store = env[0]
    srcs = [rec("m-a"), rec("m-b", "Likes tea a lot.")]
    store.put_many(srcs)
    ex = executor(env)
    planned = _group(ex, srcs)
    finished = run_lifecycle(ex, planned[:1], Tally())
    real, raced = status_applier.get_many, []

    def read_then_move(s: Any, ids: list[str]) -> Any:
        found = real(s, ids)
        if not raced and "m-b" in ids:
            move(store)
            raced.append(True)
        return found

    monkeypatch.setattr(status_applier, "get_many", read_then_move)
    resume_group(ex, [*finished, *planned[1:]], Tally())
    assert raced, "the race did not happen"
    return {(o.record_id, o.kind): o for o in ex.journal.by_run(ex.run_id)}


def _edit_b(store: SqliteStore) -> None:
    store.put_many([rec("m-b", "Likes coffee now.")])


def _rescope_b(store: SqliteStore) -> None:
    store.put_many([rec("m-b", "Likes tea a lot.", namespace="/users/u-1/other")])


# -- appliers/status.set_status: ``continue`` after the together write withdrew -------------
def test_a_group_withdrawn_at_its_write_claims_no_supersede(
    env: Any,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The adversary rewrites m-b between the applier's read and its write. None of the group
    is written, so no supersede may be journaled as done: each ends skipped, m-a stays active,
    m-r is taken back. (Kills dropping the ``continue`` after ``_withdraw`` in set_status:
    settled() then journals m-a ``superseded`` though the store never wrote it.)"""
    ops = _raced_at_the_write(env, monkeypatch, _edit_b)
    assert ops[("m-a", OpKind.supersede)].outcome is Outcome.skipped
    assert ops[("m-b", OpKind.supersede)].outcome is Outcome.skipped
    assert env[0].get("m-a").status is Status.active
    assert ops[("m-r", OpKind.delete)].outcome is Outcome.deleted


# -- SCOPE_CHANGED as a move: appliers/status._MOVED and stores/sqlite._MOVED --------------
def test_a_member_taken_to_another_namespace_at_the_write_withdraws_the_group(
    env: Any,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The adversary moves m-b to another namespace between the applier's read and its
    write. The group is withdrawn as for an edit: m-a stays active (not superseded into a
    replacement that is taken back), and m-r is deleted. (Kills ``_MOVED = (STALE,)`` in
    appliers/status.py and ``_MOVED = ("STALE_PRECONDITION",)`` in stores/sqlite.py.)"""
    ops = _raced_at_the_write(env, monkeypatch, _rescope_b)
    assert env[0].get("m-a").status is Status.active
    assert ops[("m-a", OpKind.supersede)].outcome is Outcome.skipped
    assert ops[("m-r", OpKind.delete)].outcome is Outcome.deleted
    assert env[0].get("m-r") is None


# -- stores/sqlite._set_status(together=True): only a moved row stops the others ---------------
def test_a_held_member_in_a_together_write_leaves_the_others_written(env: Any) -> None:  # noqa: F811
    """A group's supersedes written together; one member was put under a legal hold. A hold
    is not a move: the held one is refused LEGAL_HOLD, the other is superseded. (Kills
    ``if together and result.failed`` for ``any(f.code in _MOVED ...)`` in _set_status.)"""
    store = env[0]
    a, b = rec("m-a"), rec("m-b", "Likes tea a lot.", retention_class=RetentionClass.legal_hold)
    store.put_many([a, b])
    res = store.set_status_unless_held(["m-a", "m-b"], Status.superseded, replaced_by="m-r",
                                       expect={"m-a": a, "m-b": b}, together=True)  # fmt: skip
    assert res.succeeded == ["m-a"]
    assert [(f.id, f.code) for f in res.failed] == [("m-b", "LEGAL_HOLD")]
    assert store.get("m-a").status is Status.superseded


# -- appliers/status.set_status: ``together`` only for a withdrawable group ----------------
def test_a_batch_not_of_a_group_writes_what_did_not_move(
    env: Any,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two quarantines in one batch; the adversary rewrites m-b between the applier's read
    and its write. m-b's is refused (stale), m-a is still quarantined and journaled so:
    only a group's supersedes stand or fall together. (Kills ``... in whole or
    writes_as_read(ex)`` and dropping ``together and`` before the withdraw in set_status.)"""
    store = env[0]
    store.put_many([rec("m-a"), rec("m-b", "Likes tea a lot.")])
    ex = executor(env)
    ops = [plan(ex, OpKind.quarantine, store.get(i), ["MANUAL"]) for i in ("m-a", "m-b")]
    real = status_applier.get_many

    def read_then_edit(s: Any, ids: list[str]) -> Any:
        found = real(s, ids)
        if "m-b" in ids and store.get("m-b").content != "Likes coffee now.":
            _edit_b(store)
        return found

    monkeypatch.setattr(status_applier, "get_many", read_then_edit)
    done = {o.record_id: o for o in run_lifecycle(ex, ops, Tally())}
    assert store.get("m-a").status is Status.quarantined
    assert done["m-a"].outcome is Outcome.quarantined
    assert done["m-b"].outcome is not Outcome.quarantined


# -- lease.live_run (DynamoDB): an expired lease names no live run -----------------------------
def test_an_expired_dynamodb_lease_names_no_live_run() -> None:
    """A night on AWS state was killed: its lease item stays in the table until it expires.
    Once expired, ``receipts verify latest`` must not skip the killed run as still under
    way: live_run names none. (Kills dropping the ``expires_at < time.time()`` return.)"""
    from types import SimpleNamespace

    from memlife import lease
    from memlife.journal.dynamodb import DynamoJournal
    from memlife.state.dynamodb import key
    from memlife.stores import store_identity
    from tests.support.aws_state import aws_state

    store = SimpleNamespace(url="agentcore://mem-1?region=us-east-1")
    with aws_state("inprocess") as (_, state):
        journal = state.part("journal", DynamoJournal)
        identity = store_identity(store.url)
        held = lease.acquire(lease.DynamoBackend(state, identity), "run-46", "lifecycle",
                             store=identity)  # fmt: skip
        try:
            k = key(f"lease#{lease._identity(store)}", "lease")
            item = state.get(k) or {}
            assert lease.live_run(journal, store) == "run-46"
            state.batch_write([{**item, "expires_at": {"N": "1"}}])  # the holder died long ago
            assert lease.live_run(journal, store) is None
        finally:
            held.release()


# -- ledger.AccessLedger.erase(actor_id=...): the buffer too -----------------------------------
def test_an_actors_erasure_leaves_another_actors_buffered_reads(ledger: AccessLedger) -> None:  # noqa: F811
    """u2 erases its record r1; u1's record of the same id was read too, its rows still
    buffered (not yet flushed). Only u2's row goes. (Kills dropping the actor filter from the
    buffer in AccessLedger.erase, or ``or`` turned ``and`` there.)"""
    ledger.append("u1", "ns", "r1", at=T0)
    ledger.append("u2", "ns", "r1", at=T0)
    assert ledger.erase(["r1"], actor_id="u2") == 1
    ledger.flush()
    assert ledger.access_stats() == {"r1": (T0, 1)}
