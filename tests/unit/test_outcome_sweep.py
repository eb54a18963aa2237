"""A killed night's child outcomes and sealing key are removed (memlife/outcome_sweep.py, session 44).

A night planned in processes has its children stage replacement texts in sealed outcome
files under ``$MEMLIFE_HOME/reports/<run>/<attempt>/outcomes/``, sealed by
``run-keys/<run>.<attempt>``. A parent SIGKILLed after its children staged never removes
them, and its rerun is another attempt: the texts stayed on disk, past an erasure of the
records they were merged from.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memlife import lease
from memlife.erase import erase
from memlife.outcome_sweep import MARKER, sweep_local, sweep_remote
from memlife.pipeline import RunConfig, run_local
from memlife.stores import store_identity
from memlife.stores.sqlite import SqliteStore
from tests.support.aws_state import aws_state
from tests.support.lifecycle import gate_cases
from tests.unit.test_erasure_stale_outcomes import ACTOR, MARKED, NOW, everywhere, records

REPO = Path(__file__).resolve().parents[2]
CANARY = "zqx-outcome-canary-43o"  # in the marked records' text (test_erasure_stale_outcomes)
APPLY = "20261101T120000Z-apply-0123456789"
DRY = "20261101T120000Z-dry-0123456789"


def killed_night(home: Path) -> Path:
    """A gated apply night planned in two processes, its parent SIGKILLed after the gate
    (the children have sealed their outcomes); returns the store's file."""
    db = home / "memlife.db"
    with SqliteStore(db) as s:
        s.put_many(records())
    script = (
        "from datetime import datetime, UTC\n"
        "from memlife.pipeline import RunConfig, run_local\n"
        f"run_local(RunConfig(dry_run=False, now=datetime({NOW.year}, {NOW.month}, {NOW.day}, "
        f"{NOW.hour}, tzinfo=UTC), eval_cases={str(gate_cases(db))!r}, workers=2))\n"
    )
    env = {**os.environ, "MEMLIFE_FAULT": "after_gate", "MEMLIFE_FAULT_MODE": "kill",
           "PYTHONPATH": str(REPO)}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=REPO, timeout=600)
    assert done.returncode == -9  # killed outright: no failure path ran
    staged = everywhere(home / "reports", CANARY)
    assert any(p.endswith(".pickle") for p in staged)  # the children staged the merge
    assert list((home / "run-keys").iterdir())  # and sealed it
    return db


def test_an_erasure_after_a_killed_night_leaves_no_staged_copy(home: Path) -> None:
    """The adversary SIGKILLs a night after its children staged the merge of the marked
    records, then erases them: no file under MEMLIFE_HOME may hold their text after."""
    db = killed_night(home)
    with SqliteStore(db) as s:
        result = erase(s, ACTOR, subject="city", now=NOW)
    assert result["status"] == "success" and len(result["erased"]) == 2 * len(MARKED)
    assert everywhere(home, CANARY) == []
    assert not list((home / "run-keys").iterdir())  # the dead attempt's key went with it


def test_the_rerun_of_a_killed_night_removes_its_leftovers(home: Path) -> None:
    """The rerun (same cutoff: the same run id, a new attempt) finishes and leaves no
    staged text of the killed attempt and no sealing key behind."""
    db = killed_night(home)
    config = RunConfig(dry_run=False, now=NOW, eval_cases=gate_cases(db), workers=2)
    assert run_local(config).status == "success"
    assert list((home / "reports").glob("*/*/outcomes")) == []
    assert not list((home / "run-keys").iterdir())


def attempt(home: Path, run_id: str, name: str, marker: dict[str, str] | None) -> Path:
    """An attempt's leftovers as a killed parent leaves them: outcomes, its key, its marker."""
    folder = home / "reports" / run_id / name
    (folder / "outcomes").mkdir(parents=True)
    (folder / "outcomes" / "0.pickle").write_bytes(b"sealed")
    (folder / "parts").mkdir()
    if marker is not None:
        (folder / MARKER).write_text(json.dumps(marker))
    (home / "run-keys").mkdir(exist_ok=True)
    (home / "run-keys" / f"{run_id}.{name}").write_bytes(b"k" * 32)
    return folder


def left(folder: Path) -> bool:
    key = folder.parents[2] / "run-keys" / f"{folder.parent.name}.{folder.name}"
    return (folder / "outcomes").exists() or key.exists()


def test_who_may_remove_an_attempts_leftovers(home: Path) -> None:
    """Only attempts certainly dead go: a dead parent on this host (any mode), or, for the
    holder of a store's lease, that store's apply/retry attempts. Never this process's own,
    another store's, a dry run elsewhere, or an unmarked attempt of another run id."""
    me = store_identity(f"sqlite:///{home / 'memlife.db'}")
    other_host = "elsewhere/ab12cd34/1:4242:feedbeef"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    dead_here = f"{lease.HOST_ID}:{gone.stdout.strip()}:0badc0de"
    ours = attempt(home, APPLY, "a-ours", {"store": me, "owner": other_host, "mode": "apply"})
    killed = attempt(home, APPLY, "a-killed", {"store": me, "owner": other_host, "mode": "apply"})
    other = attempt(home, "20261101T120000Z-apply-99999999", "b",
                    {"store": "sqlite:/else.db", "owner": other_host, "mode": "apply"})  # fmt: skip
    live_here = attempt(home, APPLY, "a-live",
                        {"store": me, "owner": lease.OWNER, "mode": "apply"})  # fmt: skip
    dry = attempt(home, DRY, "d-elsewhere", {"store": me, "owner": other_host, "mode": "dry_run"})
    dry_dead = attempt(
        home, DRY, "d-dead", {"store": "sqlite:/x", "owner": dead_here, "mode": "dry_run"}
    )
    legacy_same = attempt(home, APPLY, "a-legacy", None)
    legacy_other = attempt(home, "20261001T120000Z-apply-0123456789", "old", None)

    assert sweep_local(me, holds_lease=False, ours=(APPLY, "a-ours")) == 1  # the dead dry run
    assert not left(dry_dead) and left(killed) and left(legacy_same)
    assert sweep_local(me, holds_lease=True, ours=(APPLY, "a-ours")) == 2
    assert not left(killed) and not left(legacy_same)
    assert all(left(f) for f in (ours, other, live_here, dry, legacy_other))
    assert (killed / "parts").is_dir()  # the run's report stays: only the outcomes go


def test_a_remote_rerun_removes_its_run_ids_other_attempts(home: Path) -> None:
    """On remote state the rerun of a killed night removes the earlier attempts' outcomes
    (S3) and sealing keys (DynamoDB), not its own, not their reports, not another run's."""
    from memlife.outcomes import _remote_key
    from memlife.run_start import start_run
    from memlife.state.reports import report_prefix

    with aws_state("inprocess") as (url, state):
        ctx = start_run(RunConfig(dry_run=False, now=NOW, state=url))
        bucket = state.settings.parquet_bucket
        keys = []
        for run_id, name in ((ctx.run_id, "killed"), (ctx.run_id, ctx.config.attempt),
                             ("20261002T000000Z-apply-aaaaaaaaaa", "other")):  # fmt: skip
            base = report_prefix(state, run_id, NOW, name)
            for leaf in ("outcomes/0.pickle", "parts/0.jsonl"):
                state.s3.put_object(Bucket=bucket, Key=f"{base}/{leaf}", Body=b"x")
                keys.append(f"{base}/{leaf}")
            _remote_key(state, f"{run_id}.{name}")
        assert sweep_remote(state, ctx) == 1
        listed = state.s3.list_objects_v2(Bucket=bucket).get("Contents", [])
        assert sorted(o["Key"] for o in listed) == sorted(keys[1:])
        from memlife.state.dynamodb import key

        assert state.get(key("outkey", f"{ctx.run_id}.killed")) is None
        assert state.get(key("outkey", f"{ctx.run_id}.{ctx.config.attempt}")) is not None
        assert state.get(key("outkey", "20261002T000000Z-apply-aaaaaaaaaa.other")) is not None


@pytest.fixture(autouse=True)
def _no_stray_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMLIFE_FAULT", raising=False)
