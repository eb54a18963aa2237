"""Audit 53l: a night that lost its lease journals nothing after the writer that took it.

A night paused past its lease's TTL (a stopped VM, a long GC) whose lease an erasure then
took over stops before its next batch of changes (``LeaseLost``: the executor's fence in
``apply/lifecycle.run_lifecycle``). But its commit journals a staged group's plan first
(``commit_group``: ``journal.plan([write, *supersedes])``), and the fence comes only after
that. The write operation's payload is the replacement record, text and all, built from
the members as the night read them before the pause. The erasure that took the lease over
had already forgotten every journal payload naming the erased records and folded the
file, so the erased text came back into the journal after the erasure had finished and
stayed there (a due PLANNED operation) until some later night's retry queue met it.

The erasure here is a real ``memlife erase`` process; the paused night is this process,
its heartbeat stopped and its lease row expired, as 51a's paused night.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife import lease as lease_mod
from memlife.lease import LeaseLost
from memlife.model import MemoryRecord
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore

REPO = Path(__file__).resolve().parents[2]
TTL = "3"  # short: a check past a third of it asks the backend (Lease.check)
DAY = datetime(2026, 11, 1, tzinfo=UTC)
NS = "/users/u-1/billing"  # deletion not enforced: a night consolidates without a gate
TEXT = "Card on file ends in 4821."


@pytest.fixture()
def night_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("MEMLIFE_HOME", str(home))
    monkeypatch.setenv("MEMLIFE_STORE", f"sqlite:///{home / 'memlife.db'}")
    monkeypatch.setenv("MEMLIFE_RECEIPTS", f"file://{home / 'receipts'}")
    monkeypatch.setenv("MEMLIFE_LEASE_TTL_SECONDS", TTL)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    store = SqliteStore(home / "memlife.db")
    try:  # two copies of one fact: the extractive consolidator merges them
        store.put_many([
            MemoryRecord(id=f"m-{i}", actor_id="u-1", namespace=NS, memory_type="semantic",
                         subject="payment card", content=TEXT, owner="team-billing",
                         created_at=DAY + timedelta(days=i), source="user_stated")
            for i in range(2)
        ])  # fmt: skip
    finally:
        store.close()
    return home


def _pause(home: Path) -> None:
    """This night stops beating and its lease row expires, as a process paused past its TTL."""
    for held in list(lease_mod._HELD.values()):
        held._stop.set()
        if held._thread is not None:
            held._thread.join()
        held._confirmed = float("-inf")  # its last renewal is older than any trust it earns
    conn = SqliteStore(home / "memlife.db").connection
    conn.execute("UPDATE leases SET expires_at='2000-01-01T00:00:00+00:00'")
    conn.close()


def _erase_in_another_process(home: Path) -> None:
    """The user's erasure, a real `memlife erase`: it takes the expired lease over."""
    done = subprocess.run(
        [sys.executable, "-m", "memlife.cli", "erase", "--actor", "u-1", "--id", "m-0", "--yes",
         "--store", f"sqlite:///{home / 'memlife.db'}",
         "--receipts", f"file://{home / 'receipts'}"],
        cwd=REPO, capture_output=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-3000:]


def _journal_rows_with_text(home: Path) -> list[tuple[str, str, str]]:
    conn = SqliteStore(home / "memlife.db").connection
    try:
        return conn.execute(
            "SELECT run_id, kind, state FROM operations WHERE instr(payload, ?) > 0", ("4821",)
        ).fetchall()
    finally:
        conn.close()


def _statuses(home: Path) -> dict[str, str]:
    store = SqliteStore(home / "memlife.db")
    try:
        return {r.id: r.status.value for r in store.iter_all()}
    finally:
        store.close()


def test_a_night_that_lost_its_lease_to_an_erasure_journals_no_erased_text(
    night_home: Path,
) -> None:
    def paused_gate(*_: object) -> dict:  # staged (the merge built from TEXT), not committed
        _pause(night_home)
        _erase_in_another_process(night_home)
        assert _journal_rows_with_text(night_home) == []  # the erasure forgot every payload
        return {"blocked": False}

    with pytest.raises(LeaseLost):
        run_local(RunConfig(dry_run=False, now=DAY + timedelta(days=3)), gate=paused_gate)
    assert _statuses(night_home) == {}  # erased: both copies of the text
    # the night stopped before its first change, and before journaling the erased text
    assert _journal_rows_with_text(night_home) == []


def test_control_a_paused_night_nobody_took_over_commits_its_merge(night_home: Path) -> None:
    """A lease that only looked expired (nobody took it) is still this night's: the check
    before the plan renews it, and the merge is journaled and committed as ever."""

    def paused_gate(*_: object) -> dict:
        _pause(night_home)
        return {"blocked": False}

    summary = run_local(RunConfig(dry_run=False, now=DAY + timedelta(days=3)), gate=paused_gate)
    assert summary.lifecycle["superseded"] == 2, summary.lifecycle
    got = _statuses(night_home)
    assert sorted(got.values()) == ["active", "superseded", "superseded"], got


def _ownerless(store: SqliteStore) -> MemoryRecord:
    """m-0 as a procedural record without an owner: a finding for a reviewer (policy)."""
    got = store.get("m-0")
    assert got is not None
    return got.model_copy(update={"owner": None, "memory_type": "procedural"})


def _open_items(home: Path) -> list[tuple[str, str, str | None]]:
    from memlife.review_queue import ReviewQueue

    store = SqliteStore(home / "memlife.db")
    try:
        items = ReviewQueue.for_store(store, create=False).backend.list(("open", "waiting"))
        return sorted((i.record_id, i.state, i.owner) for i in items)
    finally:
        store.close()


def test_a_night_that_lost_its_lease_queues_no_review_of_an_erased_record(
    night_home: Path,
) -> None:
    store = SqliteStore(night_home / "memlife.db")
    try:  # one how-to with no owner: a finding for a reviewer, nothing to merge or delete
        store.delete_many(["m-1"])
        store.put_many([_ownerless(store)])
    finally:
        store.close()

    def paused_gate(*_: object) -> dict:  # the finding is found, not yet queued
        _pause(night_home)
        _erase_in_another_process(night_home)
        return {"blocked": False}

    with pytest.raises(LeaseLost):
        run_local(RunConfig(dry_run=False, now=DAY + timedelta(days=3)), gate=paused_gate)
    assert _statuses(night_home) == {}
    # the erasure closed what was asked about the record; nothing reopens it for a reviewer
    assert _open_items(night_home) == []


def test_control_a_night_holding_its_lease_queues_the_finding(night_home: Path) -> None:
    store = SqliteStore(night_home / "memlife.db")
    try:
        store.delete_many(["m-1"])
        store.put_many([_ownerless(store)])
    finally:
        store.close()
    run_local(RunConfig(dry_run=False, now=DAY + timedelta(days=3)))
    assert {i[0] for i in _open_items(night_home)} == {"m-0"}
