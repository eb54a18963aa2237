"""A supersede batch whose writes all went through, then stopped (a quota) while its
replaced replacement's sources were being re-pointed (invariant 3 across nights)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import memlife.apply.appliers.status as status
from memlife.errors import StoreError
from memlife.holds import place_hold
from memlife.model import Status
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.gate import NOW, rec
from tests.support.lifecycle import gate_cases
from tests.unit.test_gate_staged import COFFEE, TEA, seed

JUICE = rec("m-juice", "preferences", "Drinks orange juice at breakfast.",
            subject="beverage", age=5)  # fmt: skip
WATER = rec("m-water", "preferences", "Now drinks only water; no longer drinks coffee.",
            subject="beverage", age=-1)  # fmt: skip


def _second_night(home: Path) -> dict[str, Any]:
    """Night 1 merges tea and coffee into R1. Night 2 merges R1, juice and water into R2;
    another process holds juice right after the applier read the group, and the quota
    stops the re-pointing of tea and coffee to R2 once the group's writes are done."""
    seed(home, [TEA, COFFEE])
    first = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=gate_cases(home / "memlife.db")))
    assert first.lifecycle["superseded"] == 2, first.as_json()
    seed(home, [JUICE, WATER])
    read, write = status.get_many, SqliteStore.set_status

    def then_hold(store: SqliteStore, ids: list[str]) -> dict:
        found = read(store, ids)
        if JUICE.id in ids:
            with SqliteStore(home / "memlife.db") as other:
                place_hold(other, ids=[JUICE.id], now=NOW)
        return found

    def quota_on_repoint(self: SqliteStore, ids: list[str], to: Status, **kw: Any) -> Any:
        if to is Status.superseded and {TEA.id, COFFEE.id} & set(ids):
            raise StoreError("rate exceeded", "QUOTA_EXCEEDED")
        return write(self, ids, to, **kw)

    cases = gate_cases(home / "memlife.db")
    with pytest.MonkeyPatch.context() as tonight:  # the home fixture's own patches stay
        tonight.setattr(status, "get_many", then_hold)
        tonight.setattr(SqliteStore, "set_status", quota_on_repoint)
        second = run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=2), eval_cases=cases))
    receipt = json.loads(Path(str(second.receipt)).read_text())
    return {"summary": second, "failures": {f["record_id"]: f for f in receipt["failures"]},
            "cases": cases}  # fmt: skip


def test_a_stop_while_re_pointing_keeps_the_batchs_other_results(home: Path) -> None:
    """Before: every op of the batch was journaled QUOTA_EXCEEDED and retryable, the held
    record's refusal too (replayed every night). Now only the supersede that is not
    claimed waits; the refusal is journaled as the terminal LEGAL_HOLD it is."""
    night = _second_night(home)
    failures = night["failures"]
    assert failures[JUICE.id]["code"] == "LEGAL_HOLD" and not failures[JUICE.id]["retryable"]
    waiting = {r for r, f in failures.items() if f["code"] == "QUOTA_EXCEEDED"}
    assert all(failures[r]["retryable"] and failures[r]["action"] == "supersede" for r in waiting)
    with SqliteStore(home / "memlife.db") as store:
        (r1,) = {store.get(s).provenance.replaced_by for s in (TEA.id, COFFEE.id)}  # not moved
        assert waiting == {r1, WATER.id}  # the group's two supersedes, not the refusal
        assert {store.get(r).status for r in waiting} == {Status.superseded}  # written


def test_the_next_night_finds_the_supersede_done_and_re_points(home: Path) -> None:
    """Invariant 3 is whole again after the next night: no superseded record points to a
    superseded one, and the held record was never touched."""
    night = _second_night(home)
    third = run_local(
        RunConfig(dry_run=False, now=NOW + timedelta(days=3), eval_cases=night["cases"])
    )
    assert third.status == "success", third.as_json()
    with SqliteStore(home / "memlife.db") as store:
        for r in store.iter_all():
            if r.status is Status.superseded:
                target = store.get(r.provenance.replaced_by or "")
                assert target is not None and target.status is Status.active, r.id
        juice = store.get(JUICE.id)
        assert juice is not None and juice.status is Status.active and juice.held
