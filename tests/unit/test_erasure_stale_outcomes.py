"""Audit 43o (session 43): a failed night's child outcomes outlive an erasure of the text they stage.

An apply run planned in processes (pipeline.plan_in_processes) has its children pickle
their outcomes, staged replacement texts included, under
``$MEMLIFE_HOME/reports/<run>/<attempt>/outcomes/`` (memlife/outcomes.py); the parent
removes them once its receipt is written (run_finish._drop_outcomes). A run that fails
after its children staged never gets there, its rerun is another attempt (another
folder), and `erase` looks under no reports folder: the erased text stays on disk.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife import pipeline
from memlife.erase import erase
from memlife.faults import InjectedFault, checkpoint, inject
from memlife.model import MemoryRecord, MemoryType
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.lifecycle import gate_cases

NOW = datetime(2026, 11, 1, 12, tzinfo=UTC)
MARKER = "zqx-outcome-canary-43o"
ACTOR = "a-000"
# the first 14 shards (the first two parts of a two-process plan, which the child is
# handed before the parent plans anything) hold the erased text: the child stages it
MARKED = [f"/users/{ACTOR}/n{i:02d}" for i in range(14)]


def rec(rid: str, actor: str, ns: str, content: str, age: float, subject: str) -> MemoryRecord:
    return MemoryRecord(
        id=rid,
        actor_id=actor,
        namespace=ns,
        memory_type=MemoryType.semantic,
        content=content,
        subject=subject,
        owner="team-a",
        created_at=NOW - timedelta(days=age),
    )


def records() -> list[MemoryRecord]:
    out = []
    for i, ns in enumerate(MARKED):
        out += [
            rec(f"m-a{i}", ACTOR, ns, f"The user lives in Berlin now ({MARKER}).", 10, "city"),
            rec(f"m-b{i}", ACTOR, ns, "The user lives in Paris.", 100, "city"),
        ]
    # enough shards for two planning processes (pipeline.planning_workers: 50 a process)
    for i in range(1, 100):
        actor = f"a-{i:03d}"
        out.append(rec(f"x-{i}", actor, f"/users/{actor}/facts", f"Likes tea no. {i}.", 5, "tea"))
    return out


def everywhere(root: Path, needle: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def test_an_erasure_after_a_failed_night_leaves_no_staged_copy_in_its_outcomes(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The adversary lets a night planned in two processes fail after its gate (the child
    has pickled the merge of the marked records), erases the marked records, and reruns
    the night to success. The erased text must be in no file under MEMLIFE_HOME, after
    the erasure and after the rerun."""
    db = home / "memlife.db"
    with SqliteStore(db) as s:
        s.put_many(records())
    config = RunConfig(dry_run=False, now=NOW, eval_cases=gate_cases(db), workers=2)
    staged: list[str] = []

    def seen_then_checked(point: str) -> None:  # what the children left, as the run fails
        if point == "after_gate":
            staged.extend(everywhere(home / "reports", MARKER))
        checkpoint(point)

    monkeypatch.setattr(pipeline, "checkpoint", seen_then_checked)
    with inject("after_gate"), pytest.raises(InjectedFault):
        run_local(config)
    assert any(p.endswith(".pickle") for p in staged)  # the child staged the merge
    with SqliteStore(db) as s:
        result = erase(s, ACTOR, subject="city", now=NOW)
        assert result["status"] == "success" and len(result["erased"]) == 2 * len(MARKED)
    assert everywhere(home, MARKER) == []
    assert run_local(config).status == "success"  # nor does the rerun bring it back
    assert everywhere(home, MARKER) == []
