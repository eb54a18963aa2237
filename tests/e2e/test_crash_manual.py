"""Crash at every step of erase, purge, restore and hold release, then rerun the same request:
the run converges, every operation is receipted, and the run receipt's counts are the journal's."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife import faults
from memlife.apply.counts import journal_counts, lifecycle_from_journal
from memlife.audit import FileSink
from memlife.faults import InjectedFault
from memlife.journal import OpState, open_journal
from memlife.model import MemoryRecord, RetentionClass, Status
from memlife.policy import load_policy
from memlife.receipts import operation_key
from memlife.stores.sqlite import SqliteStore

T = datetime(2026, 11, 1, 12, tzinfo=UTC)
POLICY = load_policy("policies/default.yaml")
IDS = ["m-1", "m-2", "m-3"]


def rec(rid: str, **kw: object) -> MemoryRecord:
    base = dict(id=rid, actor_id="u-1", namespace="/users/u-1/facts", memory_type="semantic",
                content=f"Fact number {rid}.", created_at=T - timedelta(days=100), subject="cats",
                owner="team")  # fmt: skip
    return MemoryRecord.model_validate({**base, **kw})


def setup(store: SqliteStore, action: str) -> dict[str, MemoryRecord]:
    from memlife.quarantine import snapshot

    changed = T - timedelta(days=60)
    if action == "erase":
        store.put_many([rec(i) for i in IDS] + [rec("m-keep", subject="dogs")])
    elif action in ("purge", "restore"):
        store.put_many(
            [rec(i, status=Status.pending_delete, status_changed_at=changed) for i in IDS]
        )
        before = {i: store.get(i) for i in IDS}
        with pytest.MonkeyPatch.context() as mp:  # quarantined 40 days before T, by the clock
            mp.setattr("memlife.quarantine.utcnow", lambda: T - timedelta(days=40))
            snapshot(store, IDS)
        store.set_status(IDS, Status.quarantined, at=T - timedelta(days=40))
        return before  # type: ignore[return-value]
    else:
        store.put_many([rec(i, retention_class=RetentionClass.legal_hold) for i in IDS])
    return {i: store.get(i) for i in IDS}  # type: ignore[misc]


def act(store: SqliteStore, action: str, sink: FileSink) -> dict:
    from memlife.erase import erase, release_hold
    from memlife.quarantine import purge, restore

    kw = dict(policy=POLICY, receipts=sink, now=T)
    if action == "erase":
        return erase(store, "u-1", subject="cats", **kw)
    if action == "purge":
        return purge(store, 30, **kw)
    if action == "restore":
        return restore(store, IDS, **kw)
    return release_hold(store, IDS, **kw)


POINTS = {"erase": "after_delete", "purge": "after_delete", "restore": "after_supersede",
          "hold_release": "after_supersede"}  # fmt: skip
EXPECTED = {"erase": ("deleted", 3), "purge": ("deleted", 3), "restore": ("restored", 3),
            "hold_release": ("released", 3)}  # fmt: skip


@pytest.mark.parametrize("action", list(POINTS))
@pytest.mark.parametrize("step", ["apply", "before_receipt", "after_receipt"])
def test_crash_then_rerun_converges_with_journal_counts(home: Path, action: str, step: str) -> None:
    store = SqliteStore(home / "memlife.db")
    sink = FileSink(home / "receipts")
    try:
        before = setup(store, action)
        point, skip = (POINTS[action], 0) if step == "apply" else (step, 1)
        with faults.inject(point, skip=skip), pytest.raises(InjectedFault):
            act(store, action, sink)
        out = act(store, action, sink)  # the same request again, at the same time: the same run
        assert out["status"] == "success", out
        journal = open_journal(store)
        ops = journal.by_run(out["run_id"])
        assert ops and all(o.state is OpState.RECEIPTED for o in ops)
        assert all(sink.get(operation_key(o.operation_id)) is not None for o in ops)
        receipt = json.loads(Path(out["receipt"]).read_text())
        jc = journal_counts(ops)
        key, n = EXPECTED[action]
        assert jc.get(key, 0) + jc.get("already_absent", 0) == n, jc
        assert receipt["journal_counts"] == jc
        for k, v in lifecycle_from_journal(jc).items():
            assert receipt["counts"].get(k, 0) == v, (k, receipt["counts"], jc)
        assert receipt["counts"].get("failed", 0) == 0
        if action in ("erase", "purge"):
            assert all(store.get(i) is None for i in IDS)
        elif action == "restore":
            assert {i: store.get(i) for i in IDS} == before  # exactly as before quarantine
        else:
            assert all(store.get(i).retention_class is RetentionClass.standard for i in IDS)
            assert sorted(out["released"]) == IDS
    finally:
        store.close()


def test_the_same_erase_command_after_a_kill_before_its_receipt_finishes_it(home: Path) -> None:
    """Session 28 review: `erase --id X --yes` killed after the delete, before the receipt,
    left the erasure APPLIED with no receipt; rerunning the same command (the record gone)
    stopped at "nothing matched" (exit 1) and receipted nothing (invariant 2). It finishes
    the erasure now, preview included, and says so."""
    import os
    import subprocess
    import sys

    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("m-1"), rec("m-keep", subject="dogs")])
    env = {**os.environ, "MEMLIFE_HOME": str(home)}
    cmd = [sys.executable, "-m", "memlife", "erase", "--actor", "u-1", "--id", "m-1"]
    killed = subprocess.run([*cmd, "--yes"], env={**env, "MEMLIFE_FAULT": "before_receipt",
                            "MEMLIFE_FAULT_MODE": "kill"}, capture_output=True, text=True)  # fmt: skip
    assert killed.returncode != 0
    with SqliteStore(home / "memlife.db") as store:
        (op,) = open_journal(store).for_record("m-1")
        assert store.get("m-1") is None and op.state is OpState.APPLIED
    preview = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert preview.returncode == 0 and "UNFINISHED_ERASURE" in preview.stderr, preview.stderr
    again = subprocess.run([*cmd, "--yes"], env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert "finished earlier erasures: m-1" in again.stderr
    with SqliteStore(home / "memlife.db") as store:
        (op,) = open_journal(store).for_record("m-1")
        assert op.state is OpState.RECEIPTED and store.get("m-keep") is not None
    assert FileSink(home / "receipts").get(operation_key(op.operation_id)) is not None
    # the killed attempt's run is sealed by the run that finished it (session 29)
    listed = subprocess.run([sys.executable, "-m", "memlife", "receipts", "list", "--json"],
                            env=env, capture_output=True, text=True)  # fmt: skip
    runs = [r["run_id"] for r in json.loads(listed.stdout)]
    assert len(runs) == 2
    for run_id in runs:
        verify = subprocess.run([sys.executable, "-m", "memlife", "receipts", "verify", run_id],
                                env=env, capture_output=True, text=True)  # fmt: skip
        assert verify.returncode == 0, (run_id, verify.stdout)
