"""Audit 51a: a night that lost its lease must not act on the night that took it over.

A night paused past its lease's TTL (a stopped VM, a long GC, a host under swap) whose
lease another night then took over stops before its next batch of changes (LeaseLost,
session 10). Its finishing step also writes outside its own run: it seals every run of
the store that has a manifest and no receipt as ABANDONED ("under the run's lease", so
any such run is dead) and compacts the shared access ledger. A paused night that resumed
in that step did both without asking whether it still held the lease: the live night
that had taken over (its manifest written, its receipt not yet) got a ``failure`` receipt
(``ABANDONED``, ``sealed_by`` the paused run), written create-only, for good.

The second night here is a real ``memlife run`` process, stopped mid-run by the fault
hook (``MEMLIFE_FAULT_MODE=hang``) with its heartbeat still beating, as any live night.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from memlife import lease as lease_mod
from memlife.errors import MemlifeError
from memlife.model import MemoryRecord, utcnow
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore

REPO = Path(__file__).resolve().parents[2]
TTL = "3"  # short: a check past a third of it asks the backend (Lease.check)


def _seed(db: Path) -> None:
    """One fresh, owned fact: a night has nothing to change (no fenced write before its
    finishing step)."""
    store = SqliteStore(db)
    try:
        now = utcnow()
        store.put_many([
            MemoryRecord(id="m-1", actor_id="u-1", namespace="/users/u-1/preferences",
                         memory_type="semantic", subject="beverage", content="Drinks green tea.",
                         owner="team-a", created_at=now - timedelta(days=3),
                         last_verified_at=now - timedelta(days=3), source="user_stated")
        ])  # fmt: skip
    finally:
        store.close()


def _pause_this_night_and_start_another(home: Path, cutoff: str, mark: Path) -> subprocess.Popen:
    """What a pause past the TTL looks like from outside: this process stops beating, its
    lease expires, and another night (a real process) takes it over and is under way."""
    for held in list(lease_mod._HELD.values()):
        held._stop.set()  # a stopped process beats no more
        if held._thread is not None:
            held._thread.join()
    db = home / "memlife.db"
    conn = SqliteStore(db).connection
    conn.execute("UPDATE leases SET expires_at='2000-01-01T00:00:00+00:00'")  # expired
    conn.close()
    other = subprocess.Popen(
        [sys.executable, "-m", "memlife.cli", "run", "--engine", "local", "--now", cutoff,
         "--store", f"sqlite:///{db}", "--receipts", f"file://{home / 'receipts'}", "--json"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "MEMLIFE_FAULT": "after_stage", "MEMLIFE_FAULT_MODE": "hang",
             "MEMLIFE_FAULT_MARK": str(mark), "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while not mark.exists():  # the other night holds the lease, its manifest is written
        if other.poll() is not None:
            raise AssertionError(other.stderr.read().decode()[-3000:])
        if time.monotonic() > deadline:
            raise AssertionError("the other night never got under way")
        time.sleep(0.2)
    time.sleep(float(TTL) / 3 + 0.2)  # past the trust a renewal earns: a check now asks
    return other


def _folders(home: Path) -> dict[str, list[str]]:
    return {
        p.parent.name: sorted(q.name for q in p.parent.iterdir())
        for p in (home / "receipts" / "runs").rglob("manifest.json")
    }


@pytest.fixture()
def night_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("MEMLIFE_HOME", str(home))
    monkeypatch.setenv("MEMLIFE_STORE", f"sqlite:///{home / 'memlife.db'}")
    monkeypatch.setenv("MEMLIFE_RECEIPTS", f"file://{home / 'receipts'}")
    monkeypatch.setenv("MEMLIFE_LEASE_TTL_SECONDS", TTL)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    _seed(home / "memlife.db")
    return home


def test_a_night_that_lost_its_lease_never_seals_the_night_that_took_it_over(
    night_home: Path,
) -> None:
    mark = night_home.parent / "other-holding"
    today = utcnow().replace(microsecond=0)
    mine, theirs = today - timedelta(days=2), today - timedelta(days=1)
    other: list[subprocess.Popen] = []

    def paused_gate(*_: object) -> dict:  # this night's gate: where it is paused
        other.append(_pause_this_night_and_start_another(night_home, theirs.isoformat(), mark))
        return {"blocked": False}

    try:
        try:
            run_local(RunConfig(dry_run=False, now=mine), gate=paused_gate)
        except MemlifeError:
            pass  # LeaseLost: stopped before writing outside its own run (the fix)
        live = [rid for rid in _folders(night_home) if rid.startswith(f"{theirs:%Y%m%d}")]
        assert len(live) == 1, _folders(night_home)
        # the other night is live (hanging mid-run, its lease beating): it has no receipt
        sealed = [
            json.loads(p.read_text())
            for p in (night_home / "receipts" / "runs").rglob(f"{live[0]}/receipt*.json")
        ]
        assert sealed == [], [(r["status"], r.get("error"), r.get("sealed_by")) for r in sealed]
    finally:
        for p in other:
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=30)


def test_control_a_night_holding_its_lease_seals_a_killed_night(night_home: Path) -> None:
    """The seal itself stands: a night killed mid-run (its lease gone with it) is sealed
    ABANDONED by the next apply night, which holds the store's lease."""
    mark = night_home.parent / "killed-holding"
    today = utcnow().replace(microsecond=0)
    db = night_home / "memlife.db"
    killed = subprocess.Popen(
        [sys.executable, "-m", "memlife.cli", "run", "--engine", "local",
         "--now", (today - timedelta(days=2)).isoformat(), "--store", f"sqlite:///{db}",
         "--receipts", f"file://{night_home / 'receipts'}", "--json"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "MEMLIFE_FAULT": "after_stage", "MEMLIFE_FAULT_MODE": "hang",
             "MEMLIFE_FAULT_MARK": str(mark), "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not mark.exists():
            assert killed.poll() is None, killed.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
    summary = run_local(RunConfig(dry_run=False, now=today - timedelta(days=1)))
    assert summary.status == "success"
    folders = _folders(night_home)
    dead = [rid for rid in folders if rid.startswith(f"{today - timedelta(days=2):%Y%m%d}")]
    assert len(dead) == 1 and "receipt.json" in folders[dead[0]], folders


def _taken_over(db: Path) -> None:
    """Another process's live lease on ``db`` now (what a takeover after expiry leaves)."""
    conn = SqliteStore(db).connection
    conn.execute("UPDATE leases SET owner='elsewhere:1:x', expires_at='9999-01-01T00:00:00+00:00'")
    conn.close()


def test_seal_abandoned_under_a_lost_lease_seals_nothing(night_home: Path) -> None:
    """Every caller (a night's finish, an erasure, a review decision) seals under the lease
    it took: one that lost it meanwhile must stop, not seal another writer's live run."""
    from memlife.audit import FileSink, dumps, run_prefix
    from memlife.journal import open_journal
    from memlife.lease import for_store
    from memlife.run_abandoned import seal_abandoned
    from memlife.stores import store_identity

    db = night_home / "memlife.db"
    store = SqliteStore(db)
    sink = FileSink(night_home / "receipts")
    day = utcnow().replace(microsecond=0) - timedelta(days=1)
    live = f"{day:%Y%m%dT%H%M%SZ}-apply-0123456789"
    sink.put_new(f"{run_prefix(live, day)}/manifest.json", dumps({
        "run_id": live, "mode": "apply", "cutoff": day.isoformat(),
        "store_identity": store_identity(store.url)}))  # fmt: skip
    held = for_store(store, "erase-x", "manual:erase")
    try:
        held._stop.set()  # paused: no beat
        _taken_over(db)
        held._confirmed -= float(TTL)  # its last renewal is older than the trust it earned
        try:
            seal_abandoned(sink, open_journal(store), store_url=store.url, run_id="erase-x",
                           cutoff=day)  # fmt: skip
        except MemlifeError:
            pass  # LeaseLost (the fix)
        assert not list((night_home / "receipts").rglob(f"{live}/receipt*.json"))
    finally:
        held.release()
        store.close()


def test_control_seal_abandoned_under_a_held_lease_seals_a_dead_run(night_home: Path) -> None:
    from memlife.audit import FileSink, dumps, run_prefix
    from memlife.journal import open_journal
    from memlife.lease import for_store
    from memlife.run_abandoned import seal_abandoned
    from memlife.stores import store_identity

    db = night_home / "memlife.db"
    store = SqliteStore(db)
    sink = FileSink(night_home / "receipts")
    day = utcnow().replace(microsecond=0) - timedelta(days=1)
    dead = f"{day:%Y%m%dT%H%M%SZ}-apply-0123456789"
    sink.put_new(f"{run_prefix(dead, day)}/manifest.json", dumps({
        "run_id": dead, "mode": "apply", "cutoff": day.isoformat(),
        "store_identity": store_identity(store.url)}))  # fmt: skip
    with for_store(store, "erase-x", "manual:erase"):
        got = seal_abandoned(sink, open_journal(store), store_url=store.url, run_id="erase-x",
                             cutoff=day)  # fmt: skip
    store.close()
    assert got == [dead]
    assert list((night_home / "receipts").rglob(f"{dead}/receipt.json"))
