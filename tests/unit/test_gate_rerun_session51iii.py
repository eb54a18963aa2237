"""Audit 51iii (session 51): the regression gate as a compliance owner relies on it.

A rerun of a night that already completed (the scheduler firing twice, or an operator
rerunning the same ``--now`` after fixing the evaluation set at the same path) commits
nothing (``run_commit.commit_run``) and names the night's receipt. Since audit 47q it
reports that receipt's counts and plan; its status and gate were still its own fresh look
at the store the night left, under whatever set the file now holds. So a blocked night,
rerun after the operator edited the set, printed ``success`` and a passing gate (exit 0,
no ``memlife.run.blocked`` event), while its receipt says ``blocked`` and every held
record is still quarantined.

Real components: the SQLite store, the local engine, real MiniLM, receipts in a folder.
"""

from __future__ import annotations

import json
from pathlib import Path

from memlife.pipeline import run_local
from memlife.run_finish import gate_line
from memlife.run_types import RunConfig
from tests.support.gate import ACTOR, ALLERGY_KEPT, FACTS, NOW, store_at, ttl_policy, write_cases

# a case that passes whatever this night does (the router procedure is never a candidate)
ROUTER = {"id": "router", "query": "How do I reset the router?", "actor_id": ACTOR,
          "must_retrieve": ["m-router"], "k": 3}  # fmt: skip


def _statuses(home: Path) -> dict[str, str]:
    store = store_at(home)
    try:
        return {r.id: r.status.value for r in store.iter_all()}
    finally:
        store.close()


def _blocked_night(home: Path, tmp_path: Path) -> tuple[str, str, dict]:
    """A night whose short semantic TTL would delete the allergy a high-impact case pins:
    the gate blocks, the candidates are quarantined. (policy, cases path, receipt)."""
    store = store_at(home)
    store.put_many(FACTS)
    store.close()
    cases = write_cases(tmp_path / "cases.yaml", [ALLERGY_KEPT])
    policy = ttl_policy(tmp_path, 30)
    first = run_local(RunConfig(dry_run=False, now=NOW, policy=policy, eval_cases=cases))
    assert first.status == "blocked" and first.receipt is not None
    assert _statuses(home)["m-allergy"] == "quarantined"
    return policy, cases, json.loads(Path(first.receipt).read_text())


def test_a_rerun_of_a_blocked_night_after_the_set_is_edited_still_says_blocked(
    home: Path, tmp_path: Path
) -> None:
    """The operator fixes the set (same path) and reruns the blocked night at its cutoff,
    expecting the held deletions to go ahead. The rerun commits nothing (one cutoff is one
    run, and its receipt is final). Must hold: what it reports is the night's outcome, the
    receipt it names (blocked, the night's gate), not "success" with a passing gate while
    the records stay quarantined."""
    policy, cases, receipt = _blocked_night(home, tmp_path)
    write_cases(Path(cases), [ROUTER])  # the edited set: nothing of tonight is judged by it

    again = run_local(RunConfig(dry_run=False, now=NOW, policy=policy, eval_cases=cases))

    assert again.other.get("rerun_of_completed_run") == 1
    assert again.receipt is not None and json.loads(Path(again.receipt).read_text()) == receipt
    assert _statuses(home)["m-allergy"] == "quarantined"  # nothing was committed
    assert again.status == receipt["status"] == "blocked"
    assert again.gate is not None and again.gate["status"] == "blocked"
    assert again.gate == receipt["gate"]
    line = gate_line(again.as_json())
    assert line is not None and line.startswith("gate: BLOCKED"), line


def test_a_plain_double_fire_of_a_blocked_night_says_blocked(home: Path, tmp_path: Path) -> None:
    """Control: the same night fired twice with the set unchanged re-evaluates to the same
    verdict, so the rerun already says blocked."""
    policy, cases, receipt = _blocked_night(home, tmp_path)
    again = run_local(RunConfig(dry_run=False, now=NOW, policy=policy, eval_cases=cases))
    assert again.other.get("rerun_of_completed_run") == 1
    assert again.status == receipt["status"] == "blocked"
    assert again.lifecycle["quarantined"] == receipt["counts"]["quarantined"]
