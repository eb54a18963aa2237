"""Invariant 3 through a reviewer's decisions (session 27 review, finding 1).

A reviewer's `supersede --by B` sets A's replaced_by only: B does not list A among its
sources. So a reviewer's `delete` of B left A superseded by nothing (1a), a reviewer's
`delete` of a consolidation's replacement left its sources so (1b), and B superseded in
its turn (a night's merge, or a reviewer) left A pointing to a superseded record (1c);
no night repaired it and `receipts verify` passed. Now what points to a record is found
by ``supersedes`` and by ``replaced_by``: it is handed over when the record is superseded,
and goes with it (receipted, REPLACEMENT_DELETED) when it is deleted; a held source
refuses the delete, and a night deletes a superseded record whose replacement is gone."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.audit import open_sink
from memlife.journal import open_journal
from memlife.model import MemoryRecord, MemoryType, RetentionClass, Status
from memlife.pipeline import RunConfig, run_local
from memlife.review import verify_run
from memlife.review_queue import ReviewError, ReviewQueue, resolve
from memlife.stores.sqlite import SqliteStore
from tests.support.gate import NOW, rec
from tests.support.lifecycle import check_invariants, operation_receipts, snapshot


def _unowned(r: MemoryRecord) -> MemoryRecord:
    return r.model_copy(update={"owner": None})  # no owner: a review item a reviewer answers


P = MemoryType.procedural  # procedures have no default owner: an unowned one is reviewed
AISLE = _unowned(rec("A", "procedures", "To reset the router, hold the button 10 seconds.",
                     subject="router", age=300, mtype=P))  # fmt: skip
WINDOW = _unowned(rec("B", "procedures", "Hold the modem's reset button for 30 seconds.",
                      subject="modem", age=20, mtype=P))  # fmt: skip
EXIT_ROW = rec("C", "procedures", "Unplug the hub for a minute to reset it.", subject="hub",
               age=2, mtype=P)  # fmt: skip


def _store(home: Path) -> SqliteStore:
    return SqliteStore(home / "memlife.db")


def _put(home: Path, *records: MemoryRecord) -> None:
    store = _store(home)
    try:
        store.put_many(list(records))
    finally:
        store.close()


def _resolve(home: Path, record_id: str, decision: str, **kw: Any) -> dict[str, Any]:
    """A reviewer's decision on one open item of ``record_id`` (what `review resolve` calls)."""
    store = _store(home)
    try:
        items = [i for i in ReviewQueue.for_store(store).list() if i.record_id == record_id]
        assert items, f"no open review item on {record_id}"
        done = resolve(store, items[0].item_id, decision, "ana@example.com", **kw)
        assert done["status"] == "success", done
        return done
    finally:
        store.close()


def _verified(home: Path, run_id: str) -> None:
    store = _store(home)
    try:
        report = verify_run(open_sink(), store, open_journal(store), run_id)
        assert report.ok, report
    finally:
        store.close()


def _invariant_3(home: Path) -> None:
    """Every superseded record points to an existing, active record of its own scope."""
    records = snapshot(home / "memlife.db")
    for rid, r in records.items():
        if r["status"] == Status.superseded.value:
            by = records.get(r["provenance"]["replaced_by"] or "")
            assert by is not None and by["status"] == Status.active.value, (rid, r["provenance"])
            assert (by["actor_id"], by["namespace"]) == (r["actor_id"], r["namespace"])


def _delete_reasons(home: Path, run_id: str) -> dict[str, list[str]]:
    return {o["record_id"]: o["reason_codes"] for o in operation_receipts(home / "receipts").values()
            if o["action"] == "delete" and o["run_id"] == run_id and o["outcome"] == "deleted"}  # fmt: skip


def _quiet_nights(home: Path, *days: int) -> None:
    """Later nights change no record and delete nothing more."""
    before = snapshot(home / "memlife.db")
    for day in days:
        night = run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=day)))
        assert night.status == "success" and night.lifecycle["deleted"] == 0, night.lifecycle
    after = snapshot(home / "memlife.db")
    assert {k: v["status"] for k, v in after.items()} == {k: v["status"] for k, v in before.items()}
    assert {k: v["provenance"] for k, v in after.items()} == {
        k: v["provenance"] for k, v in before.items()
    }


def test_a_reviewers_delete_of_a_replacement_takes_what_it_replaced(home: Path) -> None:
    """1a: A superseded by B by a reviewer, then B deleted by a reviewer: A goes with B, in
    the same manual run, with the night's reason; verified; nothing more afterwards."""
    _put(home, AISLE, WINDOW, EXIT_ROW)
    run_local(RunConfig(dry_run=False, now=NOW))
    _resolve(home, "A", "supersede", by="B")
    before = snapshot(home / "memlife.db")
    done = _resolve(home, "B", "delete")
    after = snapshot(home / "memlife.db")
    assert "A" not in after and "B" not in after and "C" in after
    check_invariants(before, after, home / "receipts")
    _invariant_3(home)
    reasons = _delete_reasons(home, done["run_id"])
    assert reasons["A"] == ["ALREADY_SUPERSEDED", "REPLACEMENT_DELETED"], reasons
    assert reasons["B"][0] == "REVIEW_DELETE", reasons
    _verified(home, done["run_id"])
    _quiet_nights(home, 1, 2)
    _invariant_3(home)


def test_a_reviewers_delete_of_a_consolidations_replacement_takes_its_sources(
    home: Path,
) -> None:
    """1b: R replaced S1 and S2 (a night's consolidation); a reviewer deletes R."""
    r = _unowned(
        rec("R", "procedures", "Has two cats, Miso and Tofu.", subject="pets", age=5, mtype=P)
    )
    r = r.model_copy(update={"provenance": r.provenance.model_copy(update={"supersedes": ["S1", "S2"]})})  # fmt: skip
    s1 = rec("S1", "procedures", "Has a cat named Miso.", subject="pets", age=50, mtype=P)
    s2 = rec("S2", "procedures", "Has a cat named Tofu.", subject="pets", age=40, mtype=P)
    _put(home, r, s1, s2)
    store = _store(home)
    try:
        store.set_status(["S1", "S2"], Status.superseded, replaced_by="R", at=NOW)
    finally:
        store.close()
    run_local(RunConfig(dry_run=False, now=NOW))
    before = snapshot(home / "memlife.db")
    done = _resolve(home, "R", "delete")
    after = snapshot(home / "memlife.db")
    assert not {"R", "S1", "S2"} & set(after)
    check_invariants(before, after, home / "receipts")
    assert set(_delete_reasons(home, done["run_id"])) == {"R", "S1", "S2"}
    _verified(home, done["run_id"])
    _quiet_nights(home, 1)


def test_a_reviewers_supersede_is_handed_over_when_its_replacement_is_superseded(
    home: Path,
) -> None:
    """1c, by a reviewer: A superseded by B, then B superseded by C: A points to C."""
    _put(home, AISLE, WINDOW, EXIT_ROW)
    run_local(RunConfig(dry_run=False, now=NOW))
    first = _resolve(home, "A", "supersede", by="B")
    before = snapshot(home / "memlife.db")
    done = _resolve(home, "B", "supersede", by="C")
    after = snapshot(home / "memlife.db")
    assert after["A"]["provenance"]["replaced_by"] == "C"
    assert after["B"]["provenance"]["replaced_by"] == "C"
    check_invariants(before, after, home / "receipts")
    _invariant_3(home)
    _verified(home, done["run_id"])
    # the earlier run's supersede was handed over, not undone: verify follows the chain
    _verified(home, first["run_id"])
    _quiet_nights(home, 1)


def test_a_reviewers_supersede_is_handed_over_when_a_night_merges_its_replacement(
    offline_home: Path,
) -> None:
    """1c, by a night: A superseded by B; the next night merges B with a duplicate into R
    (offline: the extractive consolidator)."""
    home = offline_home
    # a namespace where deletion is not enforced: a night without an evaluation set merges
    older, newer = (
        r.model_copy(update={"namespace": "/users/u-1/manuals"}) for r in (AISLE, WINDOW)
    )
    _put(home, older, newer)
    run_local(RunConfig(dry_run=False, now=NOW))
    first = _resolve(home, "A", "supersede", by="B")
    dup = rec("D", "manuals", WINDOW.content, subject=WINDOW.subject, age=10, mtype=P)
    _put(home, dup)
    before = snapshot(home / "memlife.db")
    night = run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=1)))
    assert night.status == "success", night.lifecycle
    after = snapshot(home / "memlife.db")
    assert after["B"]["status"] == Status.superseded.value, after["B"]  # the merge happened
    head = after["B"]["provenance"]["replaced_by"]
    assert after["A"]["provenance"]["replaced_by"] == head
    check_invariants(before, after, home / "receipts")
    _invariant_3(home)
    _verified(home, night.run_id)
    _verified(home, first["run_id"])  # handed over by the merge: verify follows the chain


def test_a_held_source_refuses_the_reviewers_delete_of_its_replacement(home: Path) -> None:
    held = _unowned(rec("H", "procedures", "Has a cat named Miso.", subject="pets", age=50,
                        retention=RetentionClass.legal_hold, mtype=P))  # fmt: skip
    repl = _unowned(
        rec("R", "procedures", "Has two cats, Miso and Tofu.", subject="pets", age=5, mtype=P)
    )
    _put(home, held, repl)
    store = _store(home)
    try:
        store.set_status(["H"], Status.superseded, replaced_by="R", at=NOW)
    finally:
        store.close()
    run_local(RunConfig(dry_run=False, now=NOW))
    before = snapshot(home / "memlife.db")
    receipts = sorted(p.name for p in (home / "receipts").rglob("*"))
    store = _store(home)
    try:
        item = next(i for i in ReviewQueue.for_store(store).list() if i.record_id == "R")
        with pytest.raises(ReviewError, match=r"replaces H, under legal hold.*pins"):
            resolve(store, item.item_id, "delete", "ana@example.com")
        assert ReviewQueue.for_store(store).get(item.item_id).state == "open"  # type: ignore[union-attr]
    finally:
        store.close()
    assert snapshot(home / "memlife.db") == before
    assert sorted(p.name for p in (home / "receipts").rglob("*")) == receipts  # no run at all
    _invariant_3(home)


def test_a_night_deletes_a_superseded_record_whose_replacement_is_gone(home: Path) -> None:
    """The safety net: a store left by the old code (B deleted, A still pointing to it)."""
    _put(home, AISLE, WINDOW, EXIT_ROW)
    store = _store(home)
    try:
        store.set_status(["A"], Status.superseded, replaced_by="B", at=NOW)
        store.delete_many(["B"])  # what a reviewer's delete of B did before session 27
    finally:
        store.close()
    before = snapshot(home / "memlife.db")
    dry = run_local(RunConfig(dry_run=True, now=NOW))
    assert dry.counts["delete_expired"] == 1, dry.counts  # the dry run says what apply does
    assert snapshot(home / "memlife.db") == before
    night = run_local(RunConfig(dry_run=False, now=NOW))
    assert night.status == "success" and night.lifecycle["deleted"] == 1, night.lifecycle
    after = snapshot(home / "memlife.db")
    assert "A" not in after and "C" in after
    check_invariants(before, after, home / "receipts")
    assert _delete_reasons(home, night.run_id) == {
        "A": ["ALREADY_SUPERSEDED", "REPLACEMENT_DELETED"]
    }
    _verified(home, night.run_id)
    _quiet_nights(home, 1)
