"""Audit 53gr (session 53): a rerun commits under the gate verdict the night kept.

Since audit 50j a night keeps its gate verdict (``gate.json``, create-only) before its first
change, and a rerun after a kill or a fault reports that verdict as the night's gate
(``blocked`` if either blocked; its own beside it as ``gate_rerun``). But the commit was
handed the rerun's own verdict. When the store changed between the failed attempt and the
rerun (here: the user told the agent the fact again, an import added a record a case names),
the rerun's own gate passed, and the rerun deleted or merged what the night's gate had held
back, under a receipt whose gate says ``blocked`` (or lists the group as uncovered).

What stops it only in part, before the fix: a group the gate *named* as blocking is kept in
the consolidation memo during the commit, so the rerun does not stage it again (control
below); a record the failed attempt already quarantined is planned again and stays in the
gate's "before" view, so the quarantine alone does not change the rerun's verdict (control).

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
from memlife.quarantine import snapshots
from memlife.run_types import RunConfig, RunSummary
from tests.support.cli import invoke
from tests.support.gate import ACTOR, NOW, rec, store_at, ttl_policy, write_cases
from tests.unit.test_gate_staged import seed, tea_case

ALLERGY = rec("m-allergy", "facts", "Is allergic to peanuts; never serve satay.", subject="allergy")
SEAT = rec("m-seat", "preferences", "Prefers a window seat on long flights.", subject="seat")
# the evaluation set names the fact, not the record: whichever record carries it will do
ALLERGY_FACT = {"id": "allergy-kept", "query": "Is the user allergic to any food?",
                "actor_id": ACTOR, "must_retrieve": [{"fact": "allergic to peanuts"}], "k": 3}  # fmt: skip
# the next morning: the user says it again (a new record, after the night's cutoff), and an
# import brings one more record of the night's kind (past the policy's lifetime)
SAID_AGAIN = rec("m-allergy-2", "facts", "Is allergic to peanuts.", subject="allergy", age=-0.1)
IMPORTED = rec("m-old", "preferences", "Liked aisle seats once.", subject="aisle")

MILK = {"id": "milk", "query": "What milk does the user take?", "actor_id": ACTOR,
        "namespace": f"/users/{ACTOR}/preferences", "must_retrieve": ["m-milk"], "k": 3}  # fmt: skip
DOG = {"id": "dog", "query": "What is the name of the dog?", "actor_id": ACTOR,
       "must_retrieve": ["m-dog"], "k": 3}  # fmt: skip
OAT = rec("m-milk", "preferences", "Takes oat milk in everything.", subject="milk", age=-0.1)


def _statuses(home: Path) -> dict[str, str]:
    store = store_at(home)
    try:
        return {r.id: r.status.value for r in store.iter_all()}
    finally:
        store.close()


def _put(home: Path, *records: Any) -> None:
    store = store_at(home)
    store.put_many(list(records))
    store.close()


def _failed_then_rerun(
    home: Path, config: RunConfig, point: str, between: tuple[Any, ...]
) -> tuple[RunSummary, dict[str, Any], dict[str, Any]]:
    """The night fails at ``point`` (after its verdict was kept), ``between`` is written,
    the night is rerun. (the rerun's summary, its receipt, the kept gate.json)."""
    with inject(point), pytest.raises(InjectedFault):
        run_local(config)
    [kept_file] = (home / "receipts").rglob("gate.json")
    kept = json.loads(kept_file.read_text())["gate"]
    assert kept["status"] == "blocked" or kept["uncovered"]["groups"]  # the night held back
    _put(home, *between)
    again = run_local(config)
    assert again.receipt is not None and again.receipt.endswith("receipt.2.json")
    return again, json.loads(Path(again.receipt).read_text()), kept


def _verify(run_id: str) -> tuple[int, set[str]]:
    code, out, _ = invoke("receipts", "verify", run_id, "--json")
    return code, {p["code"] for p in json.loads(out)["problems"]}


def _outcomes_add_up(counts: dict[str, int]) -> None:
    parts = ("retained", "consolidated", "superseded", "deleted", "quarantined", "reviewed",
             "held", "failed")  # fmt: skip
    assert counts["processed"] == sum(counts.get(k, 0) for k in parts), counts


def _quarantine_night(home: Path, tmp_path: Path) -> RunConfig:
    """u-1's semantic records are past a short lifetime: deleting the allergy loses the fact
    the set names, the gate blocks and u-1's deletions go to quarantine, shard by shard."""
    _put(home, ALLERGY, SEAT)
    cases = write_cases(tmp_path / "cases.yaml", [ALLERGY_FACT])
    policy = ttl_policy(tmp_path, 30)
    return RunConfig(dry_run=False, now=NOW, policy=policy, eval_cases=cases, consolidate=False)


def test_a_rerun_does_not_delete_what_the_nights_gate_held_back(home: Path, tmp_path: Path) -> None:
    """The night quarantines the allergy (facts shard) and fails before the seat's shard.
    The user says the allergy again; the rerun's own gate passes (the new record carries the
    fact). Must hold: the night's verdict (blocking actor u-1) governs: nothing of u-1 is
    deleted, the seat and the imported record are quarantined (restorable: snapshotted), and
    the receipt's counts say so."""
    config = _quarantine_night(home, tmp_path)
    again, receipt, kept = _failed_then_rerun(
        home, config, "after_supersede", (SAID_AGAIN, IMPORTED)
    )
    assert kept["blocking_actors"] == [ACTOR]
    assert receipt["gate"] == kept and receipt["gate_rerun"]["status"] != "blocked"
    assert _statuses(home) == {"m-allergy": "quarantined", "m-seat": "quarantined",
                               "m-old": "quarantined", "m-allergy-2": "active"}  # fmt: skip
    counts = receipt["counts"]
    assert receipt["status"] == again.status == "blocked"
    assert counts["deleted"] == 0 and counts["quarantined"] == 3, counts
    assert again.lifecycle["deleted"] == 0
    _outcomes_add_up(counts)
    assert {(i["id"], i["reason"]) for i in receipt["ids_not_deleted"]} == {
        ("m-allergy", "GATE_BLOCKED"), ("m-seat", "GATE_BLOCKED"), ("m-old", "GATE_BLOCKED")}  # fmt: skip
    store = store_at(home)
    try:  # a record only the kept verdict holds back is restorable as one the gate held
        assert set(snapshots(store, ["m-seat", "m-old"])) == {"m-seat", "m-old"}
    finally:
        store.close()
    assert _verify(again.run_id) == (0, set())


def test_control_a_rerun_on_the_unchanged_store_quarantines_as_the_night_did(
    home: Path, tmp_path: Path
) -> None:
    """Control (passes before the fix): nothing written in between. The allergy the failed
    attempt quarantined is planned again and stays in the gate's "before" view, so the
    rerun's own verdict is the night's (no ``gate_rerun``)."""
    config = _quarantine_night(home, tmp_path)
    again, receipt, kept = _failed_then_rerun(home, config, "after_supersede", ())
    assert "gate_rerun" not in receipt and receipt["gate"] == kept
    assert _statuses(home) == {"m-allergy": "quarantined", "m-seat": "quarantined"}
    assert receipt["status"] == "blocked" and receipt["counts"]["quarantined"] == 2
    assert receipt["counts"]["deleted"] == 0
    _outcomes_add_up(receipt["counts"])


def test_a_rerun_does_not_merge_a_group_the_nights_gate_left_uncovered(
    home: Path, tmp_path: Path
) -> None:
    """The set names a preferences record that is not there yet (the case checks nothing:
    what it would judge waits, GATE_UNCOVERED), so the tea/coffee group is withheld. The
    night fails after its groups; an import adds the record; the rerun's own gate covers
    the group and passes. Must hold: the group waits, as the night's gate (the receipt's)
    says; nothing superseded, no replacement written."""
    seed(home)
    cases = write_cases(tmp_path / "cases.yaml", [MILK, DOG])
    config = RunConfig(dry_run=False, now=NOW, eval_cases=cases)
    again, receipt, kept = _failed_then_rerun(home, config, "after_commit_groups", (OAT,))
    [group] = kept["uncovered"]["groups"]
    assert receipt["gate"] == kept and receipt["gate_rerun"]["uncovered"]["groups"] == []
    assert _statuses(home) == {
        "m-tea": "active",
        "m-coffee": "active",
        "m-dog": "active",
        "m-milk": "active",
    }  # fmt: skip  (m-trip: hard expiry, deleted)
    counts = receipt["counts"]
    assert counts["superseded"] == counts["consolidated"] == 0, counts
    assert again.other.get("gate_withheld_groups") == 1 and group not in _statuses(home)
    _outcomes_add_up(counts)
    assert _verify(again.run_id) == (0, set())


def test_control_a_group_the_nights_gate_named_stays_unmerged_by_the_memo(
    home: Path, tmp_path: Path
) -> None:
    """Control (passes before the fix): the gate names the group whose supersede loses the
    green tea; the commit keeps it in the consolidation memo before the failure, so the
    rerun does not stage it again even though a record written in between carries the
    fact and its own gate passes."""
    seed(home)
    cases = write_cases(tmp_path / "cases.yaml", [tea_case("normal")])
    config = RunConfig(dry_run=False, now=NOW, eval_cases=cases)
    guests = rec("m-guests", "facts", "Keeps green tea at home for guests.", subject="guests",
                 age=-0.1)  # fmt: skip
    again, receipt, kept = _failed_then_rerun(home, config, "after_commit_groups", (guests,))
    assert kept["supersedes_blocked"] and kept["blocking_groups"]
    assert receipt["status"] == "blocked" and receipt["counts"]["superseded"] == 0
    assert again.other.get("consolidation_gate_blocked_unchanged") == 1
    assert _statuses(home)["m-tea"] == "active"


def test_the_stricter_verdict_holds_what_either_holds(home: Path) -> None:
    """The rules of ``run_commit.under_kept``, on verdicts alone."""
    from memlife.apply import DeleteItem
    from memlife.run_commit import held_deletions, under_kept

    items = [DeleteItem(f"m-{a}", a, f"/users/{a}/facts", ("LOW_SCORE",), None) for a in "abc"]
    outcomes: list[Any] = [type("O", (), {"deletions": items, "staged": []})()]
    passing = {"configured": True, "blocked": False, "deletions_blocked": False,
               "supersedes_blocked": False, "uncovered": {"deletions": ["m-c"], "groups": []},
               "eval_digest": "d1"}  # fmt: skip
    kept_a = {**passing, "blocked": True, "deletions_blocked": True, "blocking_actors": ["a"],
              "uncovered": {"deletions": [], "groups": ["r-1"]}}  # fmt: skip
    own_b = {**passing, "blocked": True, "deletions_blocked": True, "blocking_actors": ["b"]}

    class NoStore:  # nothing to snapshot: every held record is absent
        def get(self, rid: str) -> None:
            return None

    def held(kept: dict[str, Any], own: dict[str, Any]) -> set[str]:
        out = under_kept(NoStore(), outcomes, own, kept)  # type: ignore[arg-type]
        return {i.id for i in held_deletions(out, items)}

    assert held(kept_a, passing) == {"m-a"}  # the night's blocking actor, though tonight passes
    assert held(kept_a, own_b) == {"m-a", "m-b"}  # each one's actors
    all_held = {**kept_a, "blocking_actors": None}
    assert held(all_held, own_b) == {"m-a", "m-b", "m-c"}  # one naming none holds all
    out = under_kept(NoStore(), outcomes, passing, kept_a)  # type: ignore[arg-type]
    assert out["uncovered"] == {"deletions": ["m-c"], "groups": ["r-1"]}  # both lists
    assert under_kept(NoStore(), outcomes, passing, None) is passing  # type: ignore[arg-type]
