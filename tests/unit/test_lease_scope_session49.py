"""Audit 49a (session 49: leases and runs racing each other, state off the worker).

`lease.scoped` gives back, when a manual run ends (erase, hold place, review resolve, an
import's updates), every lease taken while it ran. It compared the process's lease table
before and after, whatever thread took them: in a process running two things at once (an
app's review UI erasing a user's data in one thread while a served flow runs the night of
another store in another, the 44b setting), the erasure's end gave back the night's lease.
The night went on writing with no lease row at all (its fence found no lease of its own in
the table and passed), and any other worker could take the store: two writers (invariant 9).
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife import lease as lease_mod
from memlife.journal import SqliteJournal
from memlife.model import MemoryRecord, utcnow
from memlife.run_start import take_lease
from memlife.run_types import RunConfig
from memlife.stores.sqlite import SqliteStore
from tests.support.lifecycle import CUTOFF
from tests.support.records import good


def _leases(db: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT owner, run_id, purpose FROM leases").fetchall()


def _another_worker_takes(db: Path) -> bool:
    """Another process (another owner) asks for the store's lease, as `memlife run` would."""
    conn = sqlite3.connect(db, check_same_thread=False)
    try:
        now = utcnow()
        ok, _ = SqliteJournal(conn).lease_acquire(
            lease_mod.NAME, "elsewhere/0/0:1:cafe", "night-2", "nightly", now,
            now + timedelta(seconds=120),
        )  # fmt: skip
        return ok
    finally:
        conn.close()


def _store_with_a_record(db: Path) -> None:
    with SqliteStore(db) as store:
        store.put_many([MemoryRecord.model_validate(good("m-1", content="Lives in Oslo."))])


def _erase_in_a_thread(
    monkeypatch: pytest.MonkeyPatch, db: Path, inside: threading.Event, go: threading.Event
) -> tuple[threading.Thread, dict[str, Any]]:
    """An erasure of store X in its own thread, paused once it holds X's lease."""
    import memlife.erase as erase_mod

    real = erase_mod._erase

    def paused(*args: Any, **kwargs: Any) -> Any:
        inside.set()
        go.wait(120)
        return real(*args, **kwargs)

    monkeypatch.setattr(erase_mod, "_erase", paused)
    out: dict[str, Any] = {}

    def work() -> None:
        store = SqliteStore(db)
        try:
            out["result"] = erase_mod.erase(store, "u-1", ids=["m-1"], now=CUTOFF)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            out["error"] = exc
        finally:
            store.close()

    return threading.Thread(target=work), out


def test_an_erasure_in_one_thread_keeps_the_lease_another_threads_night_holds(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adversary: one process, two threads. Thread 1 erases a user's record in store X;
    while it works, thread 2 starts the night of store Y and takes Y's lease. Thread 1's
    erasure ends. Must hold: Y's lease is still the night's (its row, its fence), and
    another worker asking for Y is refused until the night gives it back."""
    x, y = tmp_path / "x.db", tmp_path / "y.db"
    _store_with_a_record(x)
    _store_with_a_record(y)
    inside, go = threading.Event(), threading.Event()
    eraser, out = _erase_in_a_thread(monkeypatch, x, inside, go)
    eraser.start()
    night_store = SqliteStore(y)
    night = None
    try:
        assert inside.wait(120), "the erasure never took its lease"
        night = take_lease(RunConfig(dry_run=False, now=CUTOFF, store=f"sqlite:///{y}"),
                           night_store)  # fmt: skip
        assert night is not None and _leases(y)[0][0] == lease_mod.OWNER
        go.set()
        eraser.join(120)
        assert out.get("result", {}).get("status") == "success", out
        # the night still holds Y: its row is there and no other worker may take it
        assert [row[2] for row in _leases(y)] == ["nightly"]
        assert not _another_worker_takes(y)
        assert night.holds(1)
    finally:
        go.set()
        eraser.join(120)
        if night is not None:
            night.release()
        night_store.close()


def test_control_a_night_taken_before_the_erasure_keeps_its_lease(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control: the night of Y takes its lease before the erasure of X starts; the
    erasure's end leaves it alone (this held before the fix too), and the erasure's own
    lease on X is given back."""
    x, y = tmp_path / "x.db", tmp_path / "y.db"
    _store_with_a_record(x)
    _store_with_a_record(y)
    night_store = SqliteStore(y)
    night = take_lease(RunConfig(dry_run=False, now=CUTOFF, store=f"sqlite:///{y}"), night_store)
    inside, go = threading.Event(), threading.Event()
    eraser, out = _erase_in_a_thread(monkeypatch, x, inside, go)
    try:
        eraser.start()
        assert inside.wait(120)
        go.set()
        eraser.join(120)
        assert out.get("result", {}).get("status") == "success", out
        assert [row[2] for row in _leases(y)] == ["nightly"]
        assert _leases(x) == []  # the erasure gave its own lease back
        assert not _another_worker_takes(y)
    finally:
        go.set()
        eraser.join(120)
        if night is not None:
            night.release()
        night_store.close()


# -- two takes of one store at the same moment, in one process ----------------------------
# Audit 44b made a second thread's take of a store this process already holds a refusal
# (`_same_store`). The check reads the process's lease table under a take lock striped by
# backend connection. The DynamoDB backend's connection is (state object, store), and one
# process holds a state object per spelling of MEMLIFE_STATE (`state.current`, keyed by
# the URL as written: a flow's `state` parameter with its query in another order). Two
# nights of one store taking the lease at once through two spellings took two stripes:
# both read the table before either was in it, the lease item (held per process: `holder
# = :me`) was handed to both, and two writers ran on one store (invariant 9).

STORE = "agentcore://mem-49a@us-east-1"


def _states_on_two_stripes(url: str, first: object) -> Any:
    """A second state object of the same table whose backend key falls on another take
    stripe than ``first``'s (as two spellings of one state URL give, 7 times in 8)."""
    from memlife.state import parse_state_url
    from memlife.state.dynamodb import DynamoState

    stripes = len(lease_mod._TAKING)
    mine = hash((id(first), STORE)) % stripes
    kept = []
    while True:
        other = DynamoState(parse_state_url(url))  # type: ignore[arg-type]
        if hash((id(other), STORE)) % stripes != mine:
            return other
        kept.append(other)  # held: a freed id would come back on the same stripe


def _two_takes_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[list[lease_mod.Lease], list[BaseException]]:
    """Two threads take one store's lease through two state objects of one table; the
    first pauses inside its backend call (its item written, not yet in the process's
    table) until the second reaches the backend, or for at most ten seconds."""
    from memlife.lease import DynamoBackend, LeaseHeld, acquire
    from tests.support.aws_state import aws_state

    leases: list[lease_mod.Lease] = []
    refused: list[BaseException] = []
    with aws_state("inprocess", table="memlife-49a") as (url, state):
        other = _states_on_two_stripes(url, state)
        real = DynamoBackend.lease_acquire
        first_in, second_in = threading.Event(), threading.Event()
        calls: list[int] = []

        def lease_acquire(self: DynamoBackend, *args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            got = real(self, *args, **kwargs)
            if len(calls) == 1:
                first_in.set()
                second_in.wait(10)  # a bounded pause: the outcome, not the time, is asserted
            else:
                second_in.set()
            return got

        monkeypatch.setattr(DynamoBackend, "lease_acquire", lease_acquire)

        def take(s: Any, run_id: str) -> None:
            try:
                leases.append(acquire(DynamoBackend(s, STORE), run_id, "nightly", store=STORE))
            except LeaseHeld as exc:
                refused.append(exc)

        one = threading.Thread(target=take, args=(state, "night-1"))
        two = threading.Thread(target=take, args=(other, "night-2"))
        try:
            one.start()
            assert first_in.wait(60)
            two.start()
            one.join(60)
            two.join(60)
        finally:
            for got in leases:
                while lease_mod._HELD.get(got.key) is got:
                    got.release()
    return leases, refused


def test_two_threads_taking_one_stores_lease_at_once_one_is_refused(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adversary: two nightly runs of one process (a served flow, two schedules firing
    together, one given the state URL spelt otherwise) take one store's DynamoDB lease at
    the same moment. Must hold: one gets it, the other is refused (LeaseHeld)."""
    leases, refused = _two_takes_at_once(monkeypatch)
    assert len(leases) == 1 and len(refused) == 1, (leases, refused)


def test_control_one_state_object_refuses_the_second_thread(home: Path) -> None:
    """Control: the same two takes through one state object (one spelling) were refused
    before the fix too: one backend key, one stripe, the second finds the first's lease."""
    from memlife.lease import DynamoBackend, LeaseHeld, acquire
    from tests.support.aws_state import aws_state

    with aws_state("inprocess", table="memlife-49a-ctl") as (_url, state):
        first = acquire(DynamoBackend(state, STORE), "night-1", "nightly", store=STORE)
        refused: list[BaseException] = []

        def take() -> None:
            try:
                acquire(DynamoBackend(state, STORE), "night-2", "nightly", store=STORE).release()
            except LeaseHeld as exc:
                refused.append(exc)

        t = threading.Thread(target=take)
        t.start()
        t.join(60)
        first.release()
        assert len(refused) == 1
