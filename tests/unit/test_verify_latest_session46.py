"""Session 46 (the "Left" entry of audit 45i): `receipts verify latest` while a night is under
way. The night advances the store's run chain when it starts and seals its receipts at the end,
so `latest` named a run with no receipt yet, and a reviewer's check failed with
RUN_RECEIPT_MISSING for as long as the night ran. A live night (its lease held) is skipped for
the run before it, and said so; a killed night (its lease gone) is still reported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife import pipeline
from memlife.model import MemoryRecord
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore

REPO = Path(__file__).resolve().parents[2]
NIGHT = datetime(2026, 6, 1, tzinfo=UTC)


def _seed(db: Path) -> None:
    with SqliteStore(db) as store:
        store.put_many([
            MemoryRecord.model_validate({
                "id": f"m-{i}", "actor_id": "u-1", "namespace": "/users/u-1/facts",
                "memory_type": "semantic", "subject": "city", "content": f"Fact number {i}.",
                "owner": "t", "confidence": 0.9, "source": "user_stated",
                "created_at": NIGHT - timedelta(days=10 + i),
            })
            for i in range(3)
        ])  # fmt: skip


def _verify_latest() -> tuple[int, dict[str, object]]:
    """`memlife receipts verify latest --json` in another process, as a reviewer runs it."""
    done = subprocess.run([sys.executable, "-m", "memlife.cli", "receipts", "verify", "latest",
                           "--json"], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}


def _night(now: datetime) -> str:
    run = run_local(RunConfig(dry_run=False, now=now, allow_future_cutoff=True))
    return str(run.as_json()["run_id"])


def _night_verified_under_way(
    monkeypatch: pytest.MonkeyPatch, now: datetime
) -> tuple[str, tuple[int, dict[str, object]]]:
    """A night at ``now``, and `verify latest` as a reviewer ran it while the night was
    paused after staging (its chain advanced, nothing sealed)."""
    seen: list[tuple[int, dict[str, object]]] = []
    real = pipeline.checkpoint

    def verify_then(point: str) -> None:
        if point == "after_stage" and not seen:
            seen.append(_verify_latest())
        real(point)

    monkeypatch.setattr(pipeline, "checkpoint", verify_then)
    night = _night(now)
    monkeypatch.setattr(pipeline, "checkpoint", real)
    (verified,) = seen
    return night, verified


def test_verify_latest_during_a_night_checks_the_run_before_it(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reviewer runs `receipts verify latest` while the second night is paused after
    staging (its chain advanced, nothing sealed). What must hold: the check passes on the
    first night and names the night under way; once that night ends, `latest` is it."""
    _seed(home / "memlife.db")
    first = _night(NIGHT)
    second, (code, out) = _night_verified_under_way(monkeypatch, NIGHT + timedelta(days=1))
    assert code == 0, out
    assert out["run_id"] == first
    assert {"code": "LATEST_RUN_IN_PROGRESS", "running": second, "verified": first} in out["notes"]
    code, out = _verify_latest()
    assert (code, out["run_id"]) == (0, second), out
    assert not [n for n in out["notes"] if n["code"] == "LATEST_RUN_IN_PROGRESS"]


def test_verify_latest_after_a_killed_night_still_fails(home: Path) -> None:
    """The second night is SIGKILLed before its receipt (its lease dies with it). What must
    hold: `verify latest` names that night and fails (RUN_RECEIPT_MISSING): only a live
    night is skipped."""
    _seed(home / "memlife.db")
    _night(NIGHT)
    killed = subprocess.run([sys.executable, "-m", "memlife.cli", "run", "--engine", "local",
                             "--now", (NIGHT + timedelta(days=1)).isoformat(),
                             "--allow-future-cutoff", "--json"], cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO),
                                 "MEMLIFE_FAULT": "after_stage", "MEMLIFE_FAULT_MODE": "kill"},
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert killed.returncode != 0
    code, out = _verify_latest()
    assert code == 1
    assert "RUN_RECEIPT_MISSING" in {p["code"] for p in out["problems"]}
    assert not [n for n in out.get("notes", []) if n["code"] == "LATEST_RUN_IN_PROGRESS"]


def test_the_live_run_is_read_from_the_dynamodb_lease_item() -> None:
    """On AWS state the lease is a DynamoDB item (memlife/state/lease.py). What must hold: a
    night holding it is the live run, a given-back lease names none, and a lease of another
    store never names this store's run."""
    from types import SimpleNamespace

    from memlife import lease
    from memlife.journal.dynamodb import DynamoJournal
    from memlife.stores import store_identity
    from tests.support.aws_state import aws_state

    store = SimpleNamespace(url="agentcore://mem-1?region=us-east-1")
    other = SimpleNamespace(url="agentcore://mem-2?region=us-east-1")
    with aws_state("inprocess") as (_, state):
        journal = state.part("journal", DynamoJournal)
        assert lease.live_run(journal, store) is None
        identity = store_identity(store.url)
        held = lease.acquire(lease.DynamoBackend(state, identity), "run-46", "lifecycle",
                             store=identity)  # fmt: skip
        try:
            assert lease.live_run(journal, store) == "run-46"
            assert lease.live_run(journal, other) is None
        finally:
            held.release()
        assert lease.live_run(journal, store) is None


def test_an_expired_or_absent_sqlite_lease_names_no_live_run(tmp_path: Path) -> None:
    """The SQLite lease row of a holder whose expiry passed (a clock, a stalled beat), and a
    journal with no lease table yet. What must hold: neither names a live run; a live row
    of another process on this host does. (Kills dropping either check of live_run.)"""
    import sqlite3
    import threading
    from types import SimpleNamespace

    from memlife import lease
    from memlife.model import utcnow

    con = sqlite3.connect(tmp_path / "j.db")
    journal = SimpleNamespace(connection=con, lock=threading.RLock())
    assert lease.live_run(journal, object()) is None  # no leases table
    con.execute("CREATE TABLE leases (name TEXT PRIMARY KEY, owner TEXT, run_id TEXT, "
                "purpose TEXT, acquired_at TEXT, heartbeat_at TEXT, expires_at TEXT)")  # fmt: skip
    me = f"{lease.HOST_ID}:{os.getpid()}:x"
    past, future = utcnow() - timedelta(seconds=5), utcnow() + timedelta(minutes=5)
    row = (lease.NAME, me, "run-old", "lifecycle", past.isoformat(), past.isoformat())
    con.execute("INSERT INTO leases VALUES (?, ?, ?, ?, ?, ?, ?)", (*row, past.isoformat()))
    assert lease.live_run(journal, object()) is None
    con.execute("UPDATE leases SET expires_at=?", (future.isoformat(),))
    assert lease.live_run(journal, object()) == "run-old"


def test_verify_latest_with_another_runs_lease_held_verifies_the_latest(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that is not the latest holds the lease (this process) while a reviewer asks
    for the latest. What must hold: the latest itself is verified, with no note. And the
    store's only run, still under way, exits 1 saying so. (Kills comparing the live run
    with anything but the latest, and an unreachable 'nothing finished' refusal.)"""
    _seed(home / "memlife.db")
    only, (code, out) = _night_verified_under_way(monkeypatch, NIGHT)  # nothing before it
    assert code == 1 and "problems" not in out, out  # refused: nothing finished to verify
    from memlife import lease

    with SqliteStore(home / "memlife.db") as store:
        held = lease.for_store(store, "run-not-the-latest", "dry-run")
        try:
            code, out = _verify_latest()
        finally:
            held.release()
    assert (code, out["run_id"]) == (0, only), out
    assert not [n for n in out["notes"] if n["code"] == "LATEST_RUN_IN_PROGRESS"]
