"""A group withdrawn on the rerun takes back the replacement its killed attempt wrote.

The night dies right after its first replacement write; before the rerun a source is held
(or restated), so the rerun withdraws the group (apply/group_resume.py). The replacement the
killed attempt wrote must not stay active beside its still-active sources: it goes by a
delete of its own, journaled and receipted; one held since stays (invariant 1); a crash
in the take-back is finished by the next run, once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memlife.faults import InjectedFault, inject
from memlife.holds import place_hold
from memlife.model import RetentionClass, Status
from memlife.stores.sqlite import SqliteStore
from tests.support.gate import NOW
from tests.support.lifecycle import (
    check_invariants,
    journaled_deletes,
    operation_receipts,
    snapshot,
)
from tests.unit.test_guards_session38e import night, seed_scenario

WITHDRAWN = "CONSOLIDATION_WITHDRAWN"


def killed_after_write(home: Path) -> tuple[str, str, list[str], dict[str, dict]]:
    """The cases file, the replacement the killed night left, its sources, the seed."""
    cases = seed_scenario(home)
    before = snapshot(home / "memlife.db")
    with inject("after_replacement_write"), pytest.raises(InjectedFault):
        night(cases)
    (rid,) = [i for i in snapshot(home / "memlife.db") if i.startswith("r-")]
    store = SqliteStore(home / "memlife.db")
    try:
        written = store.get(rid)
        assert written is not None and written.status is Status.active
        return cases, rid, list(written.provenance.supersedes), before
    finally:
        store.close()


def hold(home: Path, ids: list[str]) -> None:
    store = SqliteStore(home / "memlife.db")
    try:
        place_hold(store, ids=ids, now=NOW)
    finally:
        store.close()


def withdrawal_receipts(home: Path, rid: str) -> list[dict]:
    return [
        o for o in operation_receipts(home / "receipts").values()
        if o["record_id"] == rid and o["action"] == "delete"
    ]  # fmt: skip


def test_the_withdrawn_groups_replacement_is_deleted_under_its_own_receipt(home: Path) -> None:
    cases, rid, sources, before = killed_after_write(home)
    hold(home, sources[:1])
    summary = night(cases)
    assert summary.status == "success"
    after = snapshot(home / "memlife.db")
    assert rid not in after, "the withdrawn group's replacement stayed in the store"
    assert all(after[s]["status"] == Status.active.value for s in sources)
    (receipt,) = withdrawal_receipts(home, rid)
    assert receipt["outcome"] == "deleted" and WITHDRAWN in receipt["reason_codes"]
    assert summary.other["consolidation_withdrawn_removed"] == 1
    check_invariants(before, snapshot(home / "memlife.db"), home / "receipts")


def test_a_replacement_held_since_stays_when_its_group_is_withdrawn(home: Path) -> None:
    cases, rid, sources, before = killed_after_write(home)
    hold(home, [rid, sources[0]])
    summary = night(cases)
    assert summary.status == "success"
    after = snapshot(home / "memlife.db")
    assert after[rid]["retention_class"] == RetentionClass.legal_hold.value
    assert withdrawal_receipts(home, rid) == []
    assert summary.other["consolidation_withdrawn_kept_held"] == 1


def test_a_crash_in_the_take_back_is_finished_once_by_the_next_run(home: Path) -> None:
    cases, rid, sources, before = killed_after_write(home)
    hold(home, sources[:1])
    # the night's first delete is the take-back's (the seeded erasure deleted before it died)
    with inject("after_delete"), pytest.raises(InjectedFault):
        night(cases)
    assert rid in journaled_deletes(home / "memlife.db")  # it died in the take-back
    summary = night(cases)
    assert summary.status == "success"
    assert rid not in snapshot(home / "memlife.db")
    receipts = withdrawal_receipts(home, rid)
    assert [r["outcome"] for r in receipts] in (["deleted"], ["already_absent"]), receipts
    check_invariants(before, snapshot(home / "memlife.db"), home / "receipts")
