"""Session 47 (audit 47k): a real `memlife run` SIGKILLed right after it wrote a group's replacement
(before any supersede of that group), a legal hold placed on one of the group's sources
before the rerun, then the night rerun with the same cutoff.

The rerun's resume withdraws the group (a source is held now) and deletes the replacement
before it reads the store. `rerun_counts.carried_over` then counts that replacement among
"the records the run removed before this attempt read the store", i.e. as a record the
first attempt read: `processed` says 61 for a 60-record night (the session 10 finding,
"processed 2275 for a 2,000-record night", by another path).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.support.cli import invoke

REPO = Path(__file__).resolve().parents[2]
NIGHT = "2026-06-01T00:00:00+00:00"


def _run(home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "memlife.cli", "run", "--engine", "local", "--now", NIGHT,
           "--eval-cases", str(home / "cases.yaml"), "--allow-future-cutoff", "--json"]  # fmt: skip
    return subprocess.run(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **env},
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def test_a_replacement_withdrawn_by_the_rerun_is_not_counted_as_processed(home: Path) -> None:
    """The adversary kills the night after its first replacement write and holds one of that
    group's sources before the rerun. What must hold: the hold wins (the source untouched,
    the replacement withdrawn), and the rerun's `processed` is the 60 records the night read,
    not 61."""
    assert invoke("demo", "-n", "60", "--anchor", NIGHT)[0] == 0
    code, out, err = invoke("eval", "init", "-o", str(home / "cases.yaml"), "--now", NIGHT)
    assert code == 0, out + err
    killed = _run(home, MEMLIFE_FAULT="after_replacement_write", MEMLIFE_FAULT_MODE="kill")
    assert killed.returncode == -9, killed.stderr[-2000:]
    con = sqlite3.connect(home / "memlife.db")
    try:
        (source,) = con.execute(
            "SELECT record_id FROM operations WHERE kind = 'supersede' AND state = 'PLANNED'"
            " ORDER BY record_id LIMIT 1"
        ).fetchone()
    finally:
        con.close()
    code, out, err = invoke("hold", "place", "--id", source)
    assert code == 0, out + err
    rerun = _run(home)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    night = json.loads(rerun.stdout)
    assert night["status"] == "success"
    code, out, _ = invoke("receipts", "verify", night["run_id"])
    assert code == 0, out
    assert night["lifecycle"]["processed"] == 60, night["lifecycle"]
