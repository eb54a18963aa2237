"""Session 45 (audit 45i): an agent's online edits in another process while an apply night is paused
between a group's replacement write and its supersedes (the window audit 43d opened for a
restatement; `group_resume._sources_moved` looks only before the write).

The night merges "Berlin" (older) with "Berlin" (newer, the survivor). Once the replacement
is written, the agent rewrites the newer member (LangGraph `put`: "Lisbon") or forgets it
(`Memory.forget`). The supersede of that member is refused (STALE), the other member is
superseded, and the replacement stays active carrying the claim its source no longer makes.
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
NS = "/users/u-1/facts"
OLD = "The user lives in Berlin."
NEW = "The user lives in Lisbon now."
# by the real clock: the agent's writes read it
NIGHT = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def _policy(tmp_path: Path) -> str:
    data = yaml.safe_load((REPO / "policies/default.yaml").read_text())
    data["version"] = "test-audit45i-ungated"
    data["gate"]["required"] = False  # the night commits without an evaluation set
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _seed(db: Path, newer: str = OLD) -> None:
    with SqliteStore(db) as store:
        store.put_many([
            MemoryRecord.model_validate({
                "id": rid, "actor_id": "u-1", "namespace": NS, "memory_type": "semantic",
                "subject": "city", "content": text, "owner": "t", "confidence": 0.9,
                "source": "user_stated", "created_at": NIGHT - timedelta(days=age),
            })
            for rid, age, text in (("m-1", 100, OLD), ("m-2", 50, newer))
        ])  # fmt: skip


def _in_another_process(code: str) -> None:
    subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=True, cwd=REPO,
                   env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                   timeout=300)  # fmt: skip


def _edit(db: Path) -> None:
    """The agent rewrites m-2 through the LangGraph adapter (a put under its key)."""
    _in_another_process(f"""
        from memlife.integrations.langgraph import MemlifeStore
        store = MemlifeStore({f"sqlite:///{db}"!r})
        store.put(("users", "u-1", "facts"), "m-2", {{"content": {NEW!r}}})
        store.close()
    """)


def _forget(db: Path) -> None:
    _in_another_process(f"""
        from memlife import Memory
        with Memory({f"sqlite:///{db}"!r}) as memory:
            assert memory.forget(["m-2"], actor="u-1") == ["m-2"]
    """)


def _active_texts(db: Path) -> list[str]:
    con = sqlite3.connect(db)
    try:
        return [r[0] for r in con.execute("SELECT content FROM records WHERE status = 'active'")]
    finally:
        con.close()


def _night_raced(monkeypatch: pytest.MonkeyPatch, policy: str, action: object) -> dict[str, object]:
    """The night, with ``action`` run (in another process) right after the replacement write."""
    raced: list[bool] = []
    real = write_applier.checkpoint

    def act_then(point: str) -> None:
        if point == "after_replacement_write" and not raced:  # written, none superseded
            action()  # type: ignore[operator]
            raced.append(True)
        real(point)

    monkeypatch.setattr(write_applier, "checkpoint", act_then)
    night = run_local(RunConfig(dry_run=False, now=NIGHT, policy=policy)).as_json()
    monkeypatch.setattr(write_applier, "checkpoint", real)
    assert raced, "the race did not happen"
    return night


def test_a_member_edited_after_the_replacement_write_keeps_its_new_text(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent rewrites the survivor m-2 to "Lisbon" while the night is paused after the
    replacement ("Berlin", dated as m-2) is written. What must hold: after that night and
    the next, an active record still says "Lisbon" (unraced, the two stay apart), and both
    nights' receipts verify."""
    db = home / "memlife.db"
    _seed(db)
    policy = _policy(tmp_path)
    first = _night_raced(monkeypatch, policy, lambda: _edit(db))
    second = run_local(RunConfig(dry_run=False, now=NIGHT + timedelta(days=1), policy=policy,
                                 allow_future_cutoff=True)).as_json()  # fmt: skip
    for night in (first, second):
        code, out, _ = invoke("receipts", "verify", str(night["run_id"]))
        assert code == 0, out
    assert NEW in _active_texts(db), f"the edit was overwritten: {_active_texts(db)}"


def test_a_member_forgotten_after_the_replacement_write_is_not_served_by_it(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """m-2 says "Lisbon" (newest: the replacement copies it). The agent forgets m-2 while the
    night is paused after the replacement write. What must hold: once the forgotten record's
    grace is over, no active record says "Lisbon" (unraced, m-1 alone stays)."""
    db = home / "memlife.db"
    _seed(db, newer=NEW)
    policy = _policy(tmp_path)
    _night_raced(monkeypatch, policy, lambda: _forget(db))
    run_local(RunConfig(dry_run=False, now=NIGHT + timedelta(days=40), policy=policy,
                        allow_future_cutoff=True))  # fmt: skip
    assert NEW not in _active_texts(db), "forgotten, yet served by the night's replacement"


def test_a_member_edited_after_a_killed_nights_replacement_receipt_keeps_its_new_text(
    home: Path, tmp_path: Path
) -> None:
    """`memlife run` is SIGKILLed right after the replacement's receipt; the agent rewrites
    m-2; the night is run again, then the next. Every step a real process. What must hold:
    an active record still says "Lisbon"."""
    db = home / "memlife.db"
    _seed(db)
    policy = _policy(tmp_path)

    def run(now: datetime, **env: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "memlife.cli", "run", "--engine", "local", "--now",
               now.isoformat(), "--allow-future-cutoff", "--policy", policy, "--json"]  # fmt: skip
        return subprocess.run(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **env},
                              capture_output=True, text=True, timeout=300)  # fmt: skip

    killed = run(NIGHT, MEMLIFE_FAULT="after_receipt", MEMLIFE_FAULT_MODE="kill")
    assert killed.returncode == -9, killed.stderr[-2000:]
    _edit(db)
    rerun = run(NIGHT)
    assert rerun.returncode in (0, 3), rerun.stderr[-2000:]  # 3: finished, not fully
    later = run(NIGHT + timedelta(days=1))
    assert later.returncode == 0, later.stderr[-2000:]
    code, out, _ = invoke("receipts", "verify", json.loads(later.stdout)["run_id"])
    assert code == 0, out
    assert NEW in _active_texts(db), f"the edit was overwritten: {_active_texts(db)}"
