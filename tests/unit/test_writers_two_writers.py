"""Audit 43d (session 43): an agent's online `remember` (another process, one MEMLIFE_HOME) landing while
the night commits a consolidation: after the replacement is written, before the group's
supersedes (the session 30 fix, `group_resume._sources_moved`, looks only before the write).

The agent restates a fact the night is merging: `remember` refreshes the record and makes
it lasting (semantic, no deadline) and answers that it is kept. The supersede re-checks only
the record's content hash, so it supersedes the restated record anyway by a replacement
built from the members as they were (episodic, the old deadline); the night past that
deadline deletes the replacement and its sources with it: the fact the user had just
restated as lasting is gone.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from memlife.apply.appliers import write as write_applier
from memlife.model import MemoryRecord
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke

REPO = Path(__file__).resolve().parents[2]
NS = "/users/u-1/episodes"
TEXT = "Booked a table at Luigi's for the anniversary dinner."
# by the real clock: the agent's `remember` reads it (an expired record is no duplicate)
NIGHT = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
DEADLINE = NIGHT + timedelta(days=14)
AFTER_DEADLINE = DEADLINE + timedelta(days=1)


def _policy(tmp_path: Path) -> str:
    data = yaml.safe_load((REPO / "policies/default.yaml").read_text())
    data["version"] = "test-audit43d-ungated"
    data["gate"]["required"] = False  # the night commits without an evaluation set
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _seed(db: Path) -> None:
    with SqliteStore(db) as store:
        store.put_many([
            MemoryRecord.model_validate({
                "id": f"m-{i}", "actor_id": "u-1", "namespace": NS, "memory_type": "episodic",
                "subject": "dinner", "content": TEXT, "owner": "t", "confidence": 0.9,
                "source": "user_stated", "created_at": created, "expires_at": DEADLINE,
            })
            for i, created in ((1, NIGHT - timedelta(days=35)), (2, NIGHT - timedelta(days=21)))
        ])  # fmt: skip


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _restate_in_another_process(db: Path) -> str:
    """The agent, in its own interpreter: `remember` the text again, as lasting."""
    script = textwrap.dedent(f"""
        from memlife import Memory
        with Memory({f"sqlite:///{db}"!r}) as m:
            got = m.remember({TEXT!r}, actor="u-1", namespace={NS!r}, subject="dinner",
                             memory_type="semantic")
        print(got.id)
    """)
    out = subprocess.run([sys.executable, "-c", script], check=True, cwd=REPO, env=_env(),
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    return out.stdout.strip().splitlines()[-1]


def _memlife_run(policy: str, now: datetime, **env: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "memlife.cli", "run", "--engine", "local",
           "--now", now.isoformat(), "--allow-future-cutoff", "--policy", policy, "--json"]  # fmt: skip
    return subprocess.run(cmd, cwd=REPO, env={**_env(), **env}, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def _active_with_text(db: Path) -> list[str]:
    con = sqlite3.connect(db)
    try:
        got = con.execute(
            "SELECT id FROM records WHERE status = 'active' AND content = ?", (TEXT,)
        ).fetchall()
    finally:
        con.close()
    return [r[0] for r in got]


# fmt: skip
def test_a_fact_restated_between_the_replacement_write_and_its_supersedes_outlives_the_night(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The night writes the group's replacement; before it supersedes the sources, the agent
    (another process) restates the text as lasting. What must hold: the restated fact is
    still active after the night past the sources' old deadline."""
    db = home / "memlife.db"
    _seed(db)
    policy = _policy(tmp_path)
    restated: list[str] = []
    real = write_applier.checkpoint

    def restate_then(point: str) -> None:
        if point == "after_replacement_write" and not restated:  # written, none superseded
            restated.append(_restate_in_another_process(db))
        real(point)

    monkeypatch.setattr(write_applier, "checkpoint", restate_then)
    run_local(RunConfig(dry_run=False, now=NIGHT, policy=policy))
    monkeypatch.setattr(write_applier, "checkpoint", real)
    assert restated, "the race did not happen"
    run_local(RunConfig(dry_run=False, now=AFTER_DEADLINE, policy=policy))
    assert _active_with_text(db), f"restated as lasting ({restated[0]}), yet deleted"


# fmt: skip
def test_a_fact_restated_after_a_killed_nights_replacement_receipt_outlives_the_rerun(
    home: Path, tmp_path: Path
) -> None:
    """`memlife run` is SIGKILLed right after the replacement's receipt; the agent restates
    the text as lasting; the same night is run again, then the night past the old deadline.
    Every step a real process. What must hold: the restated fact is still active, the later
    night succeeds and both nights' receipts verify."""
    db = home / "memlife.db"
    _seed(db)
    policy = _policy(tmp_path)
    killed = _memlife_run(policy, NIGHT, MEMLIFE_FAULT="after_receipt",
                          MEMLIFE_FAULT_MODE="kill")  # fmt: skip
    assert killed.returncode == -9, killed.stderr[-2000:]
    restated = _restate_in_another_process(db)
    rerun = _memlife_run(policy, NIGHT)
    assert rerun.returncode in (0, 3), rerun.stderr[-2000:]  # 3: finished, not fully
    later = _memlife_run(policy, AFTER_DEADLINE)
    assert later.returncode == 0, later.stderr[-2000:]
    for run in (rerun, later):
        code, out, _ = invoke("receipts", "verify", json.loads(run.stdout)["run_id"])
        assert code == 0, out
    assert _active_with_text(db), f"restated as lasting ({restated}), yet deleted"
