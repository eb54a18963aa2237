"""Audit 53r2: a rerun under the kept verdict (audit 53gr), attacked with what the store
gains between the failed attempt and the rerun.

53gr's ``run_commit.under_kept`` unions the kept verdict's ``uncovered`` lists with the
rerun's own, by id: the night's deletion ids and replacement ids. But the kept verdict held
them by *scope*: a case that checked nothing (a must-retrieve record absent, GATE_UNCOVERED)
holds every judgement of its actor and namespace (``run_commit.unseen_by``). Between the
attempts an import brings a record dated before the cutoff (the import contract carries
``created_at``) that makes the case check something; the rerun's own gate passes, and:

* a third statement of the withheld tea/coffee group makes it another group (another
  replacement id, not in the kept list): the rerun supersedes the group the night's gate
  (its receipt's) withheld;
* a record of that scope past the policy's lifetime is a new deletion id: the rerun
  deletes it, where the night's verdict held every judgement there.

Real components: the SQLite store, the local engine, real MiniLM, the extractive
consolidator, receipts in a folder; the failure is an injected fault (memlife/faults.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memlife.faults import InjectedFault, inject
from memlife.pipeline import run_local
from memlife.run_types import RunConfig, RunSummary
from tests.support.gate import NOW, rec, ttl_policy, write_cases
from tests.unit.test_gate_rerun_session53gr import DOG, MILK, OAT, _put, _statuses, _verify
from tests.unit.test_gate_staged import seed

# said again, dated before the night's cutoff (an import of another device's history)
TEA_AGAIN = rec("m-tea-2", "preferences", "Drinks green tea every afternoon.",
                subject="beverage", age=1)  # fmt: skip
SEAT = rec("m-seat", "preferences", "Prefers a window seat on long flights.", subject="seat")
IMPORTED = rec("m-old", "preferences", "Liked aisle seats once.", subject="aisle")
RECENT_DOG = rec("m-dog", "facts", "Has a dog named Rex.", subject="pet", age=5)


def _failed_then_rerun(
    home: Path, config: RunConfig, point: str, between: tuple[Any, ...]
) -> tuple[RunSummary, dict[str, Any], dict[str, Any]]:
    with inject(point), pytest.raises(InjectedFault):
        run_local(config)
    [kept_file] = (home / "receipts").rglob("gate.json")
    kept = json.loads(kept_file.read_text())["gate"]
    assert [u["case"] for u in kept["uncovered_cases"]] == ["milk"]  # the night held a scope
    _put(home, *between)
    again = run_local(config)
    assert again.receipt is not None and again.receipt.endswith("receipt.2.json")
    return again, json.loads(Path(again.receipt).read_text()), kept


def test_a_rerun_does_not_merge_the_withheld_group_grown_by_an_import(
    home: Path, tmp_path: Path
) -> None:
    seed(home)
    cases = write_cases(tmp_path / "cases.yaml", [MILK, DOG])
    config = RunConfig(dry_run=False, now=NOW, eval_cases=cases)
    again, receipt, kept = _failed_then_rerun(home, config, "after_commit_groups",
                                              (OAT, TEA_AGAIN))  # fmt: skip
    assert kept["uncovered"]["groups"] and receipt["gate"] == kept
    assert receipt["gate_rerun"]["uncovered"]["groups"] == []  # its own gate passed
    statuses = _statuses(home)
    assert {k: statuses[k] for k in ("m-tea", "m-coffee", "m-tea-2")} == {
        "m-tea": "active", "m-coffee": "active", "m-tea-2": "active"}  # fmt: skip
    assert receipt["counts"]["superseded"] == receipt["counts"]["consolidated"] == 0
    assert _verify(again.run_id) == (0, set())


def test_a_rerun_does_not_delete_in_the_scope_the_kept_verdict_held(
    home: Path, tmp_path: Path
) -> None:
    _put(home, SEAT, RECENT_DOG)
    cases = write_cases(tmp_path / "cases.yaml", [MILK, DOG])
    policy = ttl_policy(tmp_path, 30)  # the seat (100 days) is past its lifetime: judgement
    config = RunConfig(dry_run=False, now=NOW, policy=policy, eval_cases=cases,
                       consolidate=False)  # fmt: skip
    again, receipt, kept = _failed_then_rerun(home, config, "after_commit_groups",
                                              (OAT, IMPORTED))  # fmt: skip
    assert kept["uncovered"]["deletions"] == ["m-seat"]
    statuses = _statuses(home)
    assert statuses["m-seat"] == statuses.get("m-old") == "active"  # both wait: GATE_UNCOVERED
    assert receipt["counts"]["deleted"] == 0, receipt["counts"]
    assert {i["id"] for i in receipt["ids_not_deleted"]} == {"m-seat", "m-old"}


def test_control_a_statement_said_after_the_cutoff_leaves_the_group_as_it_was(
    home: Path, tmp_path: Path
) -> None:
    """Control (passes before the fix): the same statement said after the cutoff joins no
    group of this night, the withheld group keeps its id, and 53gr holds it."""
    seed(home)
    cases = write_cases(tmp_path / "cases.yaml", [MILK, DOG])
    config = RunConfig(dry_run=False, now=NOW, eval_cases=cases)
    later = TEA_AGAIN.model_copy(update={"created_at": NOW.replace(hour=3),
                                         "last_verified_at": NOW.replace(hour=3)})  # fmt: skip
    _, receipt, _ = _failed_then_rerun(home, config, "after_commit_groups", (OAT, later))
    statuses = _statuses(home)
    assert statuses["m-tea"] == statuses["m-coffee"] == "active"
    assert receipt["counts"]["superseded"] == 0


def test_the_kept_scope_holds_a_judgement_of_any_id(home: Path, tmp_path: Path) -> None:
    """``under_kept`` on verdicts alone: a case the kept verdict could not check holds what
    this attempt judges in its scope, whatever the id; another scope goes ahead; a kept
    verdict that ran no case at all holds every judgement, as ``uncovered`` does."""
    from memlife.apply import DeleteItem
    from memlife.policy import load_policy
    from memlife.run_commit import under_kept

    items = [DeleteItem(f"m-{a}", a, f"/users/{a}/facts", ("LOW_SCORE",), None) for a in "ab"]
    outcomes: list[Any] = [type("O", (), {"deletions": items, "staged": []})()]
    own = {"configured": True, "blocked": False, "deletions_blocked": False, "cases": 2,
           "supersedes_blocked": False, "uncovered": {"deletions": [], "groups": []}}  # fmt: skip
    case = {"case": "c", "actor_id": "a", "namespace": None, "code": "NO_RECORDS"}
    kept = {**own, "cases": 1, "uncovered_cases": [case]}
    ctx: Any = type("C", (), {"policy": load_policy(None)})()

    class NoStore:
        def get(self, rid: str) -> None:
            return None

    out = under_kept(NoStore(), outcomes, own, kept, ctx=ctx)  # type: ignore[arg-type]
    assert out["uncovered"]["deletions"] == ["m-a"]
    none_ran = {**kept, "cases": 0}
    out = under_kept(NoStore(), outcomes, own, none_ran, ctx=ctx)  # type: ignore[arg-type]
    assert out["uncovered"]["deletions"] == ["m-a", "m-b"]
