"""Audit 50a (session 50): `memlife run --engine local` SIGKILLed between two SQL statements,
at moments no fault point names, then run again to completion.

The fault points (memlife/fault_points.py) stop a night at the executor's step boundaries.
Here a ``sitecustomize`` module in the child process watches every statement memlife sends
to SQLite and kills the process just before the first one that matches, so the kill lands
inside a step: the records of a delete batch removed and committed, their operations not yet
journaled APPLIED; the review queue half written. What must hold afterwards (invariants 2,
3, 4 and 12): the rerun converges to the night run without a crash (same records, same
operation outcomes, one receipt each, the same counts), `receipts verify` passes, and a third
run changes nothing. No finding: these are controls for moments the fault points miss.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import invoke
from tests.support.replacement_ids import REPLACEMENT, names, of_receipts, renamed

REPO = Path(__file__).resolve().parents[2]
NIGHT = "2026-06-01T00:00:00+00:00"

HOOK = """
import os, re, signal, sqlite3
_pattern = re.compile(os.environ["AUDIT50A_KILL_SQL"])
_skip = [int(os.environ.get("AUDIT50A_KILL_SKIP", "0"))]
_pid = os.getpid()
_connect = sqlite3.connect

def _watch(statement):
    if os.getpid() == _pid and _pattern.search(statement):
        if _skip[0] == 0:
            os.kill(_pid, signal.SIGKILL)
        _skip[0] -= 1

def connect(*args, **kwargs):
    conn = _connect(*args, **kwargs)
    conn.set_trace_callback(_watch)
    return conn

sqlite3.connect = connect
"""


def _env(home: Path, hook: Path | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMLIFE_", "ANTHROPIC_"))}
    env.update(
        MEMLIFE_HOME=str(home),
        MEMLIFE_STORE=f"sqlite:///{home / 'memlife.db'}",
        MEMLIFE_RECEIPTS=f"file://{home / 'receipts'}",
        PYTHONPATH=os.pathsep.join([*([str(hook)] if hook else []), str(REPO)]),
        **extra,
    )
    return env


def _run(home: Path, hook: Path | None = None, **extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "memlife.cli", "run", "--engine", "local", "--now", NIGHT,
           "--eval-cases", str(home / "cases.yaml"), "--allow-future-cutoff", "--json"]  # fmt: skip
    return subprocess.run(cmd, cwd=REPO, env=_env(home, hook, **extra), capture_output=True,
                          text=True, timeout=600)  # fmt: skip


def _state(home: Path) -> dict[str, Any]:
    """Records, operations by (kind, record), operation receipts by (action, record), the
    run's folder: what a night leaves, without the ids that name the store's path."""
    conn = sqlite3.connect(home / "memlife.db")
    try:
        records = {r[0]: r[1:] for r in conn.execute(
            "SELECT id, status, content, retention_class, provenance FROM records")}  # fmt: skip
        ops = sorted(conn.execute(
            "SELECT kind, record_id, state, outcome, replacement_id FROM operations"))  # fmt: skip
        leases = conn.execute("SELECT count(*) FROM leases").fetchone()[0]
    finally:
        conn.close()
    receipts = sorted(
        (j["action"], j["record_id"], j["outcome"])
        for j in (json.loads(p.read_text()) for p in (home / "receipts/operations").glob("*.json"))
    )
    runs = sorted(str(p.relative_to(home / "receipts")) for p in (home / "receipts/runs").rglob("*")
                  if p.is_file() and not p.name.startswith(".tmp-"))  # fmt: skip
    # a replacement's id is keyed by its store's run secret (each copy of the seed makes its
    # own): named by what it supersedes (tests/support/replacement_ids.py)
    docs = [json.loads(p.read_text()) for p in (home / "receipts/operations").glob("*.json")]
    ids = {**of_receipts(docs), **names({i: json.loads(r[3])["supersedes"]
                                         for i, r in records.items() if REPLACEMENT.fullmatch(i)})}  # fmt: skip
    records, ops, receipts = (renamed(records, ids), sorted(renamed(ops, ids)),
                              sorted(renamed(receipts, ids)))  # fmt: skip
    return {"records": records, "ops": ops, "receipts": receipts, "runs": runs, "leases": leases}


def seeded_night(
    factory: pytest.TempPathFactory,
) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    """A 120-record demo store with an evaluation set (the seed every case copies), and a
    copy of it on which the night ran once without a kill: (seed, copy, that run)."""
    base = factory.mktemp("base") / "home"
    env = _env(base)
    for args in (("demo", "-n", "120", "--anchor", NIGHT),
                 ("eval", "init", "-o", str(base / "cases.yaml"), "--now", NIGHT)):  # fmt: skip
        code, out, err = invoke(*args, env=env)
        assert code == 0, out + err
    clean = factory.mktemp("clean") / "home"
    shutil.copytree(base, clean)
    done = _run(clean)
    assert done.returncode == 0, done.stderr[-2000:]
    return base, clean, done


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The seed, and what every rerun must converge to (the night run without a kill)."""
    base, clean, done = seeded_night(tmp_path_factory)
    return {"base": base, "state": _state(clean), "summary": json.loads(done.stdout)}


@pytest.mark.parametrize(
    ("pattern", "skip"),
    [
        # a delete batch: its records removed and committed, no operation journaled APPLIED yet
        (r"^UPDATE operations SET state='APPLIED', outcome=COALESCE\('deleted'", 0),
        # the review queue half written, after every change and receipt of the night
        (r"^INSERT OR IGNORE INTO review_items", 2),
    ],
    ids=["deleted-not-journaled", "review-queue-half-written"],
)
def test_a_night_killed_between_two_statements_converges_on_its_rerun(
    night: dict[str, Any], tmp_path: Path, pattern: str, skip: int
) -> None:
    home = tmp_path / "home"
    shutil.copytree(night["base"], home)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    killed = _run(home, hook, AUDIT50A_KILL_SQL=pattern, AUDIT50A_KILL_SKIP=str(skip))
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]  # the moment was reached
    rerun = _run(home)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    summary = json.loads(rerun.stdout)
    state = _state(home)
    clean = night["state"]
    assert summary["status"] == "success"
    assert summary["lifecycle"] == night["summary"]["lifecycle"]
    assert summary["counts"] == night["summary"]["counts"]
    for part in ("records", "ops", "receipts"):
        assert state[part] == clean[part], part
    assert all(op[2] == "RECEIPTED" for op in state["ops"])  # nothing left in flight
    assert state["leases"] == 0  # the dead holder's lease was taken over, then given back
    code, out, _ = invoke("receipts", "verify", summary["run_id"], env=_env(home))
    assert code == 0, out
    third = _run(home)
    assert third.returncode == 0, third.stderr[-2000:]
    assert json.loads(third.stdout)["lifecycle"] == summary["lifecycle"]
    assert _state(home) == state  # changes nothing, writes no second receipt or run file
