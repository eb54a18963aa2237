"""One lifecycle writer per store (invariant 9): two `memlife run` processes on one store."""

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

from memlife.journal import open_journal
from memlife.lease import LeaseHeld, acquire
from memlife.stores.sqlite import SqliteStore
from tests.support.lifecycle import CUTOFF, seed

REPO = Path(__file__).resolve().parents[2]
TTL = "4"


def cli(env: dict, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "memlife.cli",
        "run",
        "--engine",
        "local",
        "--store",
        env["store"],
        "--receipts",
        env["sink"],
        *args,
    ]


@pytest.fixture()
def env(tmp_path: Path) -> dict:
    home = tmp_path / "home"
    db = home / "memlife.db"
    seed(db, records=200)
    proc_env = {**os.environ, "MEMLIFE_HOME": str(home), "MEMLIFE_LEASE_TTL_SECONDS": TTL}
    return {
        "db": db,
        "store": f"sqlite:///{db}",
        "sink": f"file://{home / 'receipts'}",
        "env": proc_env,
        "mark": tmp_path / "holding",
    }


def test_second_writer_exits_4_then_takes_over_a_killed_holder(env: dict) -> None:
    now = CUTOFF.isoformat()
    holder = subprocess.Popen(
        cli(env, "--now", now, "--json"),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={
            **env["env"],
            "MEMLIFE_FAULT": "after_delete",
            "MEMLIFE_FAULT_MODE": "hang",
            "MEMLIFE_FAULT_MARK": str(env["mark"]),
        },
    )
    try:
        deadline = time.monotonic() + 240
        while not env["mark"].exists():  # the holder is mid-run (deleting), lease held
            assert holder.poll() is None, holder.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the holder never reached its deletes"
            time.sleep(0.2)
        time.sleep(float(TTL))  # longer than a TTL: only the heartbeat keeps the lease
        other = (CUTOFF + timedelta(hours=3)).isoformat()
        second = subprocess.run(
            cli(env, "--now", other, "--json"),
            cwd=REPO,
            env=env["env"],
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert second.returncode == 4, second.stderr[-2000:]
        lines = [
            ln for ln in second.stderr.splitlines() if ln.strip() and not ln.startswith("engine:")
        ]
        assert len(lines) == 1 and "Traceback" not in second.stderr, second.stderr
        assert (
            "another run holds the lock: " in lines[0]
            and f"{CUTOFF:%Y%m%dT%H%M%SZ}-apply" in lines[0]
        )
        assert " since " in lines[0] and second.stdout == ""
        receipts = Path(env["sink"][len("file://") :])
        assert len(list(receipts.rglob("manifest.json"))) == 1  # the refused run wrote nothing
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert holder.returncode == -9
    time.sleep(float(TTL) + 0.5)  # the killed holder's lease expires; nobody renews it
    again = subprocess.run(
        cli(env, "--now", now, "--json"),
        cwd=REPO,
        env=env["env"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    result = json.loads(again.stdout)
    assert result["status"] == "success"
    receipt = json.loads(Path(result["receipt"]).read_text())
    assert (
        receipt["lease_taken_over"]["run_id"] == result["run_id"]
    )  # the killed attempt of this run


def test_lease_is_reentrant_in_process_and_released(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    journal = open_journal(store)
    outer = acquire(journal, "run-1", "test")
    inner = acquire(journal, "run-2", "test")
    assert inner is outer and outer.depth == 2
    inner.release()
    row = store.connection.execute("SELECT run_id FROM leases").fetchone()
    assert row is not None  # the outer holder still has it
    outer.release()
    assert store.connection.execute("SELECT COUNT(*) FROM leases").fetchone()[0] == 0
    # a lease row of another owner that has not expired refuses us, naming the holder
    store.connection.execute(
        "INSERT INTO leases VALUES ('lifecycle', 'elsewhere:1:x', 'run-other', 'nightly', "
        "'2026-01-01T00:00:00+00:00', '2026-01-01T00:00:00+00:00', '2999-01-01T00:00:00+00:00')"
    )
    with pytest.raises(LeaseHeld, match="another run holds the lock: run-other since 2026-01-01"):
        acquire(journal, "run-3", "test")
    store.close()


def test_a_writer_whose_lease_was_taken_over_stops_before_its_next_write(tmp_path: Path) -> None:
    """Adversarial review: a run paused past its TTL (a stopped VM) kept writing after
    another run took the lease over; two writers at once (invariant 9)."""
    from memlife.lease import LeaseLost, check_held

    store = SqliteStore(tmp_path / "s.db")
    journal = open_journal(store)
    lease = acquire(journal, "run-paused", "test")
    check_held()  # ours: passes
    # the pause: the lease expired and another writer took it (its row, its owner)
    store.connection.execute(
        "UPDATE leases SET owner='elsewhere:2:y', run_id='run-other', "
        "expires_at='2999-01-01T00:00:00+00:00'"
    )
    lease._confirmed -= lease.ttl.total_seconds()  # the last renewal was before the pause
    with pytest.raises(LeaseLost, match="run-paused"):
        check_held()
    with pytest.raises(LeaseLost):  # sticky: never writes again
        lease.check()
    lease.release()
    store.close()


def test_a_renewal_is_as_old_as_its_asking_not_its_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adversarial review: a pause right after a renewal returned made that renewal look
    fresh, so the fence skipped the next check while another writer held the lease."""
    import memlife.lease as lease_mod
    from memlife.lease import LeaseLost

    clock = [1000.0]
    monkeypatch.setattr(lease_mod.time, "monotonic", lambda: clock[0])
    store = SqliteStore(tmp_path / "s.db")
    lease = acquire(open_journal(store), "run-paused", "test")
    lease._stop.set()  # no heartbeat thread in this test: the fence alone
    lease._confirmed = clock[0]
    renew = lease.backend.lease_renew

    def renew_then_pause(*args: object, **kw: object) -> bool:
        ok = renew(*args, **kw)  # type: ignore[arg-type]
        clock[0] += 2 * lease.ttl.total_seconds()  # paused past the TTL after the answer
        store.connection.execute("UPDATE leases SET owner='elsewhere:2:y'")  # taken over
        return ok

    clock[0] += lease.ttl.total_seconds()  # the last confirmation is old: check() renews
    monkeypatch.setattr(lease.backend, "lease_renew", renew_then_pause)
    lease.check()  # renewed (ours then), but the pause came after
    monkeypatch.setattr(lease.backend, "lease_renew", renew)
    with pytest.raises(LeaseLost):
        lease.check()
    lease.release()
    store.close()


def test_a_dead_pid_is_taken_over_only_in_this_hosts_own_pid_namespace(tmp_path: Path) -> None:
    """Adversarial review: two containers sharing a hostname share a store; a pid of the one
    looks dead from the other, which took over its live lease (two writers). A holder is
    taken over early only when its host id (hostname, boot, PID namespace) is ours and its
    pid is gone; any other waits for the expiry."""
    import memlife.lease as lease_mod

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=30)
    hostname = lease_mod.socket.gethostname()
    assert lease_mod.dead_here(f"{lease_mod.HOST_ID}:{gone.pid}:x")
    assert not lease_mod.dead_here(f"{lease_mod.HOST_ID}:{os.getpid()}:x")  # alive
    if sys.platform == "linux":
        assert lease_mod.HOST_ID != hostname  # boot and PID namespace are part of it
        other_ns = f"{lease_mod.HOST_ID.rpartition('/')[0]}/1:{gone.pid}:x"
        assert not lease_mod.dead_here(other_ns)  # the same hostname, another container
        assert not lease_mod.dead_here(f"{hostname}:{gone.pid}:x")
    store = SqliteStore(tmp_path / "s.db")
    journal = open_journal(store)
    for owner, taken in ((f"{hostname}/other/7:{gone.pid}:x", False),
                         (f"{lease_mod.HOST_ID}:{gone.pid}:x", True)):  # fmt: skip
        store.connection.execute("DELETE FROM leases")
        store.connection.execute(
            "INSERT INTO leases VALUES ('lifecycle', ?, 'run-other', 'nightly', "
            "'2026-01-01T00:00:00+00:00', '2026-01-01T00:00:00+00:00', "
            "'2999-01-01T00:00:00+00:00')", (owner,),
        )  # fmt: skip
        if taken:
            acquire(journal, "run-4", "test").release()
        else:
            with pytest.raises(LeaseHeld):
                acquire(journal, "run-4", "test")
    store.close()


def test_a_lost_lease_on_one_store_stops_its_writes_and_no_other_stores(tmp_path: Path) -> None:
    """A lease kept on one store (taken over while this process held it) fenced every other
    store's writes in the process too: each writer fences on its own store's lease."""
    from memlife import lease as lease_mod
    from memlife.apply.executor import Executor
    from memlife.audit import FileSink
    from memlife.lease import LeaseLost
    from memlife.policy import load_policy

    a, b = SqliteStore(tmp_path / "a.db"), SqliteStore(tmp_path / "b.db")
    lease_a = lease_mod.for_store(a, "run-a", "test")
    lease_b = lease_mod.for_store(b, "run-b", "test")
    a.connection.execute(  # a's lease expired and another writer took it over
        "UPDATE leases SET owner='elsewhere:2:y', run_id='run-other', "
        "expires_at='2999-01-01T00:00:00+00:00'"
    )
    lease_a._confirmed -= lease_a.ttl.total_seconds()
    lease_b._confirmed -= lease_b.ttl.total_seconds()  # b's renewal is due too: it holds

    def fence(store: SqliteStore) -> None:
        ex = Executor(run_id="r", run_key="k", policy=load_policy(), cutoff=CUTOFF, store=store,
                      journal=open_journal(store), sink=FileSink(tmp_path / "receipts"))  # fmt: skip
        assert ex.fence is not None
        ex.fence()

    fence(b)  # b's writer goes on
    with pytest.raises(LeaseLost, match="run-a"):
        fence(a)
    with pytest.raises(LeaseLost, match="run-a"):
        lease_mod.check_held()  # no store named: every lease, as before
    lease_a.release()
    lease_b.release()
    a.close()
    b.close()
