"""Session 47 (audit 47b): ``lease.live_run`` (what `receipts verify latest` asks about a night under way)
over a lease row whose owner names this host but no process id: an owner written by hand or
by another tool. Real SQLite journal table, as test_verify_latest_session46 builds it."""

from __future__ import annotations

import sqlite3
import threading
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

from memlife import lease
from memlife.model import utcnow


def test_a_live_lease_whose_owner_names_no_pid_is_still_live(tmp_path: Path) -> None:
    """The adversary writes the store's lease row with an owner of this host whose process
    part is no number ("host:worker-7:n"), expiring in five minutes. Nobody can tell that
    holder is gone, so it waits for its expiry: live_run names its run (no crash, not
    named dead). (Kills dropping ``or not pid.isdigit()`` in lease.dead_here: int() then
    raises and `verify latest` fails on the row.)"""
    con = sqlite3.connect(tmp_path / "j.db")
    journal = SimpleNamespace(connection=con, lock=threading.RLock())
    con.execute("CREATE TABLE leases (name TEXT PRIMARY KEY, owner TEXT, run_id TEXT, "
                "purpose TEXT, acquired_at TEXT, heartbeat_at TEXT, expires_at TEXT)")  # fmt: skip
    now, future = utcnow().isoformat(), (utcnow() + timedelta(minutes=5)).isoformat()
    owner = f"{lease.HOST_ID}:worker-7:n"
    con.execute("INSERT INTO leases VALUES (?, ?, ?, ?, ?, ?, ?)",
                (lease.NAME, owner, "run-7", "lifecycle", now, now, future))  # fmt: skip
    assert lease.live_run(journal, object()) == "run-7"
