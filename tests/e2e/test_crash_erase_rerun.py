"""A night is killed after it superseded two records, before its journal knew; the operator
then erases them (their subject); the same night is run again (session 26 review). The
rerun found the records gone and counted each supersede a terminal failure
(RECORD_MISSING): status partial_failure, exit 3, and two operations for `ops failed` to
resolve, for records an erasure removed with its own receipts. A delete in that situation
was already receipted `already_absent`; a status change is now `skipped` the same way
(invariant 4: an already-removed record is no failure). A record gone with no removal on
record is still a failure."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from memlife.audit import open_sink
from memlife.erase import erase
from memlife.faults import InjectedFault, inject
from memlife.journal import OpKind, OpState, Outcome, open_journal
from memlife.pipeline import RunConfig, run_local
from memlife.review import verify_run
from memlife.stores.sqlite import SqliteStore
from tests.support.gate import NOW, rec, write_cases

ACTOR = "u-1"
TEA = rec("m-tea", "preferences", "Drinks only green tea, never coffee.", subject="beverage",
          age=300)  # fmt: skip
COFFEE = rec("m-coffee", "preferences",
             "Switched to black coffee every morning; no longer drinks tea.",
             subject="beverage", age=20)  # fmt: skip
DOG = rec("m-dog", "facts", "Has a dog named Rex.", subject="pet", age=30)


def night(cases: str):  # noqa: ANN201 - the run summary
    return run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))


def crash_after_supersede(home: Path, tmp_path: Path) -> str:
    """Seed, then a night killed right after its supersede batch (the store changed, the
    journal not yet): the cases file."""
    store = SqliteStore(home / "memlife.db")
    store.put_many([TEA, COFFEE, DOG])
    store.close()
    cases = write_cases(tmp_path / "cases.yaml", [
        {"id": "dog", "query": "What is the dog called?", "actor_id": ACTOR,
         "must_retrieve": ["m-dog"], "impact": "high"},
    ])  # fmt: skip
    with inject("after_supersede"), pytest.raises(InjectedFault):
        night(cases)
    store = SqliteStore(home / "memlife.db")
    try:
        assert {store.get(i).status.value for i in ("m-tea", "m-coffee")} == {"superseded"}
        journal = open_journal(store)
        pending = [o for i in ("m-tea", "m-coffee") for o in journal.for_record(i)
                   if o.kind is OpKind.supersede]  # fmt: skip
        assert pending and all(o.state is not OpState.RECEIPTED for o in pending)
    finally:
        store.close()
    return cases


@pytest.fixture()
def crashed(home: Path, tmp_path: Path) -> str:
    return crash_after_supersede(home, tmp_path)


def assert_gone_unrecorded_is_a_failure(home: Path, cases: str) -> None:
    """m-tea removed behind memlife's back after the crash: the rerun names it a failure."""
    store = SqliteStore(home / "memlife.db")
    try:
        store.delete_many(["m-tea"])  # removed behind memlife's back: no operation says so
    finally:
        store.close()
    rerun = night(cases)
    assert rerun.status == "partial_failure" and rerun.lifecycle["failed"] >= 1, rerun.lifecycle
    store = SqliteStore(home / "memlife.db")
    try:
        failed = open_journal(store).terminal_failures()
        assert [(o.record_id, o.last_error) for o in failed] == [("m-tea", "RECORD_MISSING")]
    finally:
        store.close()


def test_records_erased_between_a_crash_and_its_rerun_are_no_failures(
    home: Path, crashed: str
) -> None:
    store = SqliteStore(home / "memlife.db")
    try:
        erase(store, ACTOR, subject="beverage", policy="policies/default.yaml", now=NOW)
        assert store.get("m-tea") is None and store.get("m-coffee") is None
    finally:
        store.close()
    rerun = night(crashed)
    assert rerun.status == "success", (rerun.status, rerun.lifecycle)
    assert rerun.lifecycle.get("failed", 0) == 0
    store = SqliteStore(home / "memlife.db")
    try:
        journal = open_journal(store)
        ops = [o for o in journal.by_run(rerun.run_id) if o.kind is OpKind.supersede]
        assert {(o.record_id, o.state, o.outcome) for o in ops} == {
            ("m-tea", OpState.RECEIPTED, Outcome.skipped),
            ("m-coffee", OpState.RECEIPTED, Outcome.skipped),
        }
        assert journal.terminal_failures() == []
        assert verify_run(open_sink(), store, journal, rerun.run_id).ok
    finally:
        store.close()


def test_a_record_gone_with_no_removal_on_record_is_still_a_failure(
    home: Path, crashed: str
) -> None:
    assert_gone_unrecorded_is_a_failure(home, crashed)


def test_an_earlier_records_removal_under_the_same_id_says_nothing_of_this_one(
    home: Path, tmp_path: Path
) -> None:
    """An earlier m-tea of the same scope expired and was deleted on an earlier night; the
    id was used again. After the crash the new m-tea vanishes with no removal on record:
    the old delete must not pass for "removed by another" (it would make the gap a
    success, and a delete of this record `already_absent`, invariant 2)."""
    old = rec("m-tea", "preferences", "Likes oolong.", subject="oldtea", age=400,
              expires=NOW - timedelta(days=40))  # fmt: skip
    store = SqliteStore(home / "memlife.db")
    store.put_many([old])
    store.close()
    assert (
        run_local(RunConfig(dry_run=False, now=NOW - timedelta(days=30))).lifecycle["deleted"] == 1
    )
    assert_gone_unrecorded_is_a_failure(home, crash_after_supersede(home, tmp_path))
