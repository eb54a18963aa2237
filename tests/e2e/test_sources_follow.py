"""Invariant 3 when a replacement is deleted (session 26 review): a reviewer superseded A
by B where B carries an `expires_at`; the night that hard-expired B left A superseded by
nothing. `Memory.forget` of a consolidation's replacement did the same after the grace.
Now the records a deleted replacement supersedes go with it, each with a receipt
(REPLACEMENT_DELETED); a held one still pins its replacement, which then stays."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from memlife.audit import open_sink
from memlife.erase import erase
from memlife.faults import InjectedFault, inject
from memlife.holds import place_hold
from memlife.journal import open_journal
from memlife.model import MemoryRecord, MemoryType, RetentionClass, Status
from memlife.pipeline import RunConfig, run_local
from memlife.review import verify_run
from memlife.review_queue import ReviewQueue, resolve
from memlife.stores.sqlite import SqliteStore
from tests.support.gate import NOW, rec
from tests.support.lifecycle import check_invariants, operation_receipts, snapshot

ROUTER = rec("A", "procedures", "To reset the router, hold the button 10 seconds.",
             subject="router", age=300, mtype=MemoryType.procedural).model_copy(
    update={"owner": None})  # no owner: a review item a reviewer answers  # fmt: skip
MODEM = rec("B", "procedures", "Hold the modem's reset button for 30 seconds instead.",
            subject="modem", age=20, mtype=MemoryType.procedural,
            expires=NOW + timedelta(days=9))  # fmt: skip


def _store(home: Path) -> SqliteStore:
    return SqliteStore(home / "memlife.db")


def _put(home: Path, *records: MemoryRecord) -> None:
    store = _store(home)
    try:
        store.put_many(list(records))
    finally:
        store.close()


def test_a_record_superseded_by_a_reviewer_goes_when_its_replacement_expires(home: Path) -> None:
    _put(home, ROUTER, MODEM)
    run_local(RunConfig(dry_run=False, now=NOW))
    store = _store(home)
    try:
        items = [i for i in ReviewQueue.for_store(store).list() if i.record_id == "A"]
        assert items, ReviewQueue.for_store(store).list()
        item = items[0]  # any of its findings: the reviewer answers with a supersede
        done = resolve(store, item.item_id, "supersede", "ana@example.com", by="B")
        assert done["status"] == "success", done
        assert store.get("A").status is Status.superseded
    finally:
        store.close()
    before = snapshot(home / "memlife.db")
    later = NOW + timedelta(days=10)  # B's expiry has passed
    dry = run_local(RunConfig(dry_run=True, now=later))
    assert dry.counts["delete_expired"] == 2, dry.counts  # the dry run says what apply does
    night = run_local(RunConfig(dry_run=False, now=later))
    assert night.status == "success" and night.lifecycle["deleted"] == 2, night.lifecycle
    after = snapshot(home / "memlife.db")
    assert "A" not in after and "B" not in after
    receipts = home / "receipts"
    check_invariants(before, after, receipts)
    reasons = {o["record_id"]: o["reason_codes"] for o in operation_receipts(receipts).values()
               if o["action"] == "delete"}  # fmt: skip
    assert reasons["A"] == ["ALREADY_SUPERSEDED", "REPLACEMENT_DELETED"], reasons
    store = _store(home)
    try:
        assert verify_run(open_sink(), store, open_journal(store), night.run_id).ok
    finally:
        store.close()


def test_the_sources_of_a_forgotten_replacement_go_after_the_grace(home: Path) -> None:
    """A replacement R of two sources, forgotten online (pending delete); past the grace, R
    and both sources are deleted: the forgotten fact is in none of them any more."""
    r = rec("R", "facts", "Has two cats, Miso and Tofu.", subject="pets", age=5)
    s1 = rec("S1", "facts", "Has a cat named Miso.", subject="pets", age=50)
    s2 = rec("S2", "facts", "Has a cat named Tofu.", subject="pets", age=40)
    _put(home, r, s1, s2)
    store = _store(home)
    try:
        store.set_status(["S1", "S2"], Status.superseded, replaced_by="R", at=NOW)
        store.set_status(["R"], Status.pending_delete, at=NOW)  # what Memory.forget writes
    finally:
        store.close()
    before = snapshot(home / "memlife.db")
    within = run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=1)))
    assert within.lifecycle["deleted"] == 0  # the grace holds the sources too
    night = run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=30)))
    assert night.lifecycle["deleted"] == 3, night.lifecycle
    after = snapshot(home / "memlife.db")
    assert not {"R", "S1", "S2"} & set(after)
    check_invariants(before, after, home / "receipts")


def test_a_held_source_still_keeps_its_replacement(home: Path) -> None:
    held = rec("H", "facts", "Has a cat named Miso.", subject="pets", age=50,
               retention=RetentionClass.legal_hold)  # fmt: skip
    other = rec("S", "facts", "Has a cat named Tofu.", subject="pets", age=40)
    repl = rec("R", "facts", "Has two cats, Miso and Tofu.", subject="pets", age=5,
               expires=NOW + timedelta(days=1))  # fmt: skip
    _put(home, held, other, repl)
    store = _store(home)
    try:
        store.set_status(["H", "S"], Status.superseded, replaced_by="R", at=NOW)
    finally:
        store.close()
    before = snapshot(home / "memlife.db")
    night = run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=2)))
    assert night.lifecycle["deleted"] == 0, night.lifecycle
    after = snapshot(home / "memlife.db")
    assert {"H", "S", "R"} <= set(after)
    check_invariants(before, after, home / "receipts")


# -- the second review of this change: what happens between planning and applying --------
def _expiring_replacement(home: Path) -> None:
    """R (replacing S1 and S2, listed as its sources) expires; the night after its expiry
    plans R, S1 and S2 for deletion."""
    s1 = rec("S1", "facts", "Has a cat named Miso.", subject="pets", age=50)
    s2 = rec("S2", "facts", "Has a cat named Tofu.", subject="pets", age=40)
    r = rec("R", "facts", "Has two cats, Miso and Tofu.", subject="pets", age=5,
            expires=NOW + timedelta(days=9))  # fmt: skip
    r = r.model_copy(
        update={"provenance": r.provenance.model_copy(update={"supersedes": ["S1", "S2"]})}
    )
    _put(home, s1, s2, r)
    store = _store(home)
    try:
        store.set_status(["S1", "S2"], Status.superseded, replaced_by="R", at=NOW)
    finally:
        store.close()


def _crash_after_planning(later: object) -> None:
    with inject("after_journal_write"), pytest.raises(InjectedFault):
        run_local(RunConfig(dry_run=False, now=later))


def _statuses(home: Path) -> dict[str, str | None]:
    store = _store(home)
    try:
        return {i: (r.status.value if (r := store.get(i)) else None) for i in ("S1", "S2", "R")}
    finally:
        store.close()


def test_a_source_an_erasure_made_active_again_is_not_deleted_by_the_rerun(home: Path) -> None:
    """The night crashed after journaling R's, S1's and S2's deletes; an erasure of S1 then
    withdrew R and made S2 active again. The rerun replayed S2's delete and removed an
    active record. A delete planned for a superseded record now wants it still superseded."""
    _expiring_replacement(home)
    later = NOW + timedelta(days=10)
    _crash_after_planning(later)
    store = _store(home)
    try:
        erase(store, "u-1", ids=["S1"], now=later)
    finally:
        store.close()
    assert _statuses(home) == {"S1": None, "S2": "active", "R": None}
    rerun = run_local(RunConfig(dry_run=False, now=later))
    assert rerun.status == "success", rerun.lifecycle
    assert _statuses(home)["S2"] == "active"


def test_a_hold_placed_on_the_replacement_keeps_its_sources(home: Path) -> None:
    """A hold placed on R between planning and applying keeps R; its sources, which would
    point to nothing only if R went, are kept too (before, they were deleted with receipts
    saying their replacement was deleted)."""
    _expiring_replacement(home)
    later = NOW + timedelta(days=10)
    _crash_after_planning(later)
    store = _store(home)
    try:
        place_hold(store, actor="u-1", ids=["R"], now=later)
    finally:
        store.close()
    run_local(RunConfig(dry_run=False, now=later))
    assert _statuses(home) == {"S1": "superseded", "S2": "superseded", "R": "active"}


def test_a_disputed_source_waits_for_its_reviewer(home: Path) -> None:
    _put(home, ROUTER, MODEM)
    run_local(RunConfig(dry_run=False, now=NOW))
    store = _store(home)
    try:
        (item, *_) = [i for i in ReviewQueue.for_store(store).list() if i.record_id == "A"]
        assert resolve(store, item.item_id, "dispute", "ana@example.com")["status"] == "success"
        store.set_status(["A"], Status.superseded, replaced_by="B", at=NOW)  # an import did it
    finally:
        store.close()
    night = run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=10)))
    assert night.lifecycle["deleted"] == 1  # B, its expiry past; A waits for its reviewer
    store = _store(home)
    try:
        assert store.get("A") is not None and store.get("B") is None
    finally:
        store.close()
