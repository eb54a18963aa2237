"""A supersede batch whose writes all went through, then the re-pointing of its replaced
replacement's sources went wrong (invariant 3 across nights): a quota stop, an item the
store refused, a hold placed on a source meanwhile."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import memlife.apply.appliers.status as status
from memlife.errors import StoreError
from memlife.holds import place_hold
from memlife.model import Status
from memlife.pipeline import RunConfig, RunSummary, run_local
from memlife.stores.base import BatchResult, ItemFailure
from memlife.stores.sqlite import SqliteStore
from tests.support.gate import NOW, rec
from tests.support.lifecycle import gate_cases
from tests.unit.test_gate_staged import COFFEE, TEA, seed

JUICE = rec("m-juice", "preferences", "Drinks orange juice at breakfast.",
            subject="beverage", age=5)  # fmt: skip
WATER = rec("m-water", "preferences", "Now drinks only water; no longer drinks coffee.",
            subject="beverage", age=-1)  # fmt: skip
SOURCES = {TEA.id, COFFEE.id}  # night 1's originals: re-pointed when their replacement goes

Fault = Callable[[SqliteStore, list[str]], BatchResult | None]


def _nights(home: Path, fault: Fault, after_read: Callable[[list[str]], None]) -> dict[str, Any]:
    """Night 1 merges tea and coffee into R1. Night 2 merges R1, juice and water into R2:
    ``after_read(ids)`` runs as another process right after the applier reads records, and
    ``fault`` answers (or raises) in place of the store for a status write that moves tea
    or coffee (the re-pointing to R2), whichever setter makes it. Then night 3, as is."""
    seed(home, [TEA, COFFEE])
    first = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=gate_cases(home / "memlife.db")))
    assert first.lifecycle["superseded"] == 2, first.as_json()
    (r1,) = _pointers(home)
    seed(home, [JUICE, WATER])
    read = status.get_many

    def then_act(store: SqliteStore, ids: list[str]) -> dict:
        found = read(store, ids)
        after_read(ids)
        return found

    def faulty(name: str) -> Callable[..., BatchResult]:
        real = getattr(SqliteStore, name)

        def write(self: SqliteStore, ids: list[str], to: Status, **kw: Any) -> BatchResult:
            if to is Status.superseded and SOURCES & set(ids):
                answer = fault(self, ids)
                if answer is not None:
                    return answer
            result: BatchResult = real(self, ids, to, **kw)
            return result

        return write

    cases = gate_cases(home / "memlife.db")
    with pytest.MonkeyPatch.context() as tonight:  # the home fixture's own patches stay
        tonight.setattr(status, "get_many", then_act)
        for name in ("set_status", "set_status_unless_held"):
            tonight.setattr(SqliteStore, name, faulty(name))
        second = run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=2), eval_cases=cases))
    third = run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=3), eval_cases=cases))
    return {"r1": r1, "second": second, "third": third, "failures": _failures(second)}


def _failures(night: RunSummary) -> dict[str, dict[str, Any]]:
    receipt = json.loads(Path(str(night.receipt)).read_text())
    return {f["record_id"]: f for f in receipt["failures"]}


def _hold(home: Path, record_id: str) -> Callable[[list[str]], None]:
    def hold(ids: list[str]) -> None:
        if record_id in ids:
            with SqliteStore(home / "memlife.db") as other:  # another process
                place_hold(other, ids=[record_id], now=NOW)

    return hold


def _quota(store: SqliteStore, ids: list[str]) -> BatchResult:
    raise StoreError("rate exceeded", "QUOTA_EXCEEDED")


def _refused(store: SqliteStore, ids: list[str]) -> BatchResult:
    """AgentCore answers a changed sidecar per item, without raising."""
    return BatchResult(failed=[ItemFailure(i, "CONFLICT") for i in ids])


def _no_superseded_record_points_to_a_superseded_one(home: Path) -> None:
    with SqliteStore(home / "memlife.db") as store:
        for r in store.iter_all():
            if r.status is Status.superseded and not r.held:
                target = store.get(r.provenance.replaced_by or "")
                assert target is not None and target.status is Status.active, r.id


def _pointers(home: Path) -> set[str | None]:
    with SqliteStore(home / "memlife.db") as store:
        return {store.get(s).provenance.replaced_by for s in SOURCES}  # type: ignore[union-attr]


def test_a_stop_while_re_pointing_keeps_the_batchs_other_results(home: Path) -> None:
    """Before: every op of the batch was journaled QUOTA_EXCEEDED and retryable, the held
    record's refusal too (replayed every night). Now only the supersedes that are not
    claimed wait; the refusal is journaled as the terminal LEGAL_HOLD it is."""
    nights = _nights(home, _quota, _hold(home, JUICE.id))
    failures = nights["failures"]
    assert failures[JUICE.id]["code"] == "LEGAL_HOLD" and not failures[JUICE.id]["retryable"]
    waiting = {r for r, f in failures.items() if f["code"] == "QUOTA_EXCEEDED"}
    assert all(failures[r]["retryable"] and failures[r]["action"] == "supersede" for r in waiting)
    assert waiting == {nights["r1"], WATER.id}  # the group's two supersedes, not the refusal


def test_the_next_night_finds_the_supersede_done_and_re_points(home: Path) -> None:
    """Invariant 3 is whole again after the next night, and the held record untouched."""
    nights = _nights(home, _quota, _hold(home, JUICE.id))
    assert nights["third"].status == "success", nights["third"].as_json()
    _no_superseded_record_points_to_a_superseded_one(home)
    with SqliteStore(home / "memlife.db") as store:
        juice = store.get(JUICE.id)
        assert juice is not None and juice.status is Status.active and juice.held


def test_a_source_the_store_refuses_to_move_leaves_its_supersede_unclaimed(home: Path) -> None:
    """Review of session 21: the store refused the re-pointing item by item (AgentCore: a
    sidecar changed concurrently) without raising; R1's supersede was claimed all the
    same, and no later night went back: tea and coffee pointed to a superseded record
    for good. Now the supersede waits, failed with the item's code, and the next night
    re-points."""
    nights = _nights(home, _refused, lambda ids: None)
    failures = nights["failures"]
    assert {f["code"] for f in failures.values()} == {"CONFLICT"}
    r1 = nights["r1"]
    assert set(failures) == {r1} and failures[r1]["retryable"]
    assert nights["third"].status == "success", nights["third"].as_json()
    _no_superseded_record_points_to_a_superseded_one(home)


def test_a_hold_placed_on_a_source_before_it_is_re_pointed_keeps_its_pointer(
    home: Path,
) -> None:
    """Review of session 21: the re-pointing read the sources, then wrote without the hold
    check: a hold placed in between was rewritten. The held source now keeps what it
    pointed to (a held record is never changed); the other source moves."""
    nights = _nights(home, lambda store, ids: None, _hold(home, TEA.id))
    assert nights["second"].status == "success", nights["second"].as_json()
    with SqliteStore(home / "memlife.db") as store:
        tea, coffee = store.get(TEA.id), store.get(COFFEE.id)
        assert tea is not None and coffee is not None and tea.held
        r1 = store.get(tea.provenance.replaced_by or "")
        assert r1 is not None and r1.status is Status.superseded  # tea was not moved
        assert coffee.provenance.replaced_by == r1.provenance.replaced_by  # coffee was


MILK = rec("m-milk", "preferences", "Switched to oat milk; no longer drinks water.",
           subject="beverage", age=-2)  # fmt: skip


def test_a_replacement_replaced_twice_hands_over_every_source(home: Path) -> None:
    """Review of session 21: night 2 re-pointed tea and coffee to R2, which lists only R1
    and water as its sources; when night 3 superseded R2, only those moved, and tea and
    coffee kept pointing to R2, superseded. Now what points to a replaced record is found
    down the chain of replacements."""
    seed(home, [TEA, COFFEE])
    cases = gate_cases(home / "memlife.db")
    for day, record in ((0, None), (2, WATER), (4, MILK)):
        if record is not None:
            seed(home, [record])
        night = run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=day), eval_cases=cases))
        assert night.status == "success" and night.lifecycle["superseded"] >= 2, night.as_json()
    _no_superseded_record_points_to_a_superseded_one(home)
    assert len(_pointers(home)) == 1  # tea and coffee point to the one active replacement


def test_history_follows_a_record_handed_on_down_the_chain(home: Path) -> None:
    """Session 30 "Left": a record re-pointed when its replacement was superseded gets no
    operation of its own, so `receipts history` still ended at the first replacement while
    the store named the third. Each hand-over is now a row (`handed_on`, via the superseded
    replacement, in the run that superseded it), and the last names what the store names."""
    from typer.testing import CliRunner

    from memlife.cli import app

    seed(home, [TEA, COFFEE])
    cases = gate_cases(home / "memlife.db")
    runs = []
    for day, record in ((0, None), (2, WATER), (4, MILK)):
        if record is not None:
            seed(home, [record])
        night = run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=day), eval_cases=cases))
        runs.append(night.run_id)
    (now_names,) = _pointers(home)
    res = CliRunner().invoke(app, ["receipts", "history", TEA.id, "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["action"] for r in rows] == ["supersede", "handed_on", "handed_on"]
    first, *handed = rows
    assert [r["run_id"] for r in rows] == runs
    assert handed[0]["via"] == first["replacement_id"]
    assert handed[1]["via"] == handed[0]["replacement_id"]
    assert handed[1]["replacement_id"] == now_names  # what the store says now
    table = CliRunner().invoke(app, ["receipts", "history", TEA.id])
    assert table.exit_code == 0 and "handed_on" in table.stdout


def test_a_second_run_before_the_retry_is_due_re_points_the_whole_chain(home: Path) -> None:
    """Review of session 21: R1's supersede by R2 waits for a retry (the quota stopped its
    re-pointing), and a run minutes later supersedes R2 by R3 before the retry is due: tea
    and coffee, still pointing to R1, were never moved (and the retry then ends stale)."""
    seed(home, [TEA, COFFEE])
    cases = gate_cases(home / "memlife.db")
    run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))
    (r1,) = _pointers(home)
    seed(home, [WATER])
    with pytest.MonkeyPatch.context() as tonight:

        def quota(real: Any) -> Any:
            def write(self: SqliteStore, ids: list[str], to: Status, **kw: Any) -> BatchResult:
                if SOURCES & set(ids):
                    raise StoreError("rate exceeded", "QUOTA_EXCEEDED")
                result: BatchResult = real(self, ids, to, **kw)
                return result

            return write

        for name in ("set_status", "set_status_unless_held"):
            tonight.setattr(SqliteStore, name, quota(getattr(SqliteStore, name)))
        stopped = run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=2), eval_cases=cases))
    assert r1 in _failures(stopped) and _pointers(home) == {r1}
    seed(home, [MILK])
    soon = run_local(
        RunConfig(dry_run=False, now=NOW + timedelta(days=2, minutes=1), eval_cases=cases)
    )
    assert soon.status == "success" and soon.lifecycle["superseded"] >= 2, soon.as_json()
    _no_superseded_record_points_to_a_superseded_one(home)
