"""Session 35: two guards listed as untested (docs/adversarial-review.md, "Left").

1. A hold release whose record was released by hand to another class between the run's
   read and its applier is a failure (``NOT_HELD``), never a "released" receipt for a class
   the record does not have; released by hand to the class asked for, it is done.
2. ``PREVIOUSLY_DELETED`` names only removals that happened: a delete that failed, found
   the record absent or found it held, and an operation of another kind on the same text,
   name no run.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memlife.erase import release_hold
from memlife.import_removed import brought_back, rowid_mark
from memlife.journal import Operation, OpKind, OpState, Outcome, open_journal
from memlife.model import MemoryRecord, RetentionClass
from memlife.stores.sqlite import SqliteStore

NOW = datetime(2026, 6, 1, tzinfo=UTC)
NS = "/users/u-1/facts"


def rec(rid: str, content: str, **kw: Any) -> MemoryRecord:
    base = dict(id=rid, actor_id="u-1", namespace=NS, memory_type="semantic", content=content,
                created_at="2026-03-01T08:00:00Z", source="user_stated", confidence=0.9)  # fmt: skip
    return MemoryRecord.model_validate({**base, **kw})


@pytest.fixture
def store(home: Path) -> Iterator[SqliteStore]:
    home.mkdir(parents=True, exist_ok=True)
    s = SqliteStore(home / "memlife.db")
    yield s
    s.close()


# -- 1. apply/appliers/hold_release.py: NOT_HELD ---------------------------------------------
@pytest.mark.parametrize(
    ("by_hand", "released"),
    [(RetentionClass.sensitive, False), (RetentionClass.standard, True)],
)
def test_a_hold_released_by_hand_meanwhile_is_receipted_only_for_the_class_asked(
    store: SqliteStore, home: Path, by_hand: RetentionClass, released: bool
) -> None:
    """Attacks ``r.retention_class is target`` in the hold_release applier: another tool
    releases the hold (to ``by_hand``) after the run read the record held and before its
    applier runs. To another class, the run must not receipt a release to ``standard``."""
    store.put_many([rec("h", "Owes 500 EUR to Bob.", retention_class="legal_hold")])
    real = store.get_many

    def released_by_hand_first(ids: list[str]) -> dict[str, MemoryRecord]:
        with SqliteStore(home / "memlife.db") as other:
            r = other.get("h")
            assert r is not None
            other.put_many([r.model_copy(update={"retention_class": by_hand})])
        return real(ids)

    store.get_many = released_by_hand_first  # type: ignore[method-assign]
    out = release_hold(store, ["h"], retention_class=RetentionClass.standard, now=NOW)

    got = store.get("h")
    assert got is not None and got.retention_class is by_hand  # as the other tool left it
    if released:
        assert out["released"] == ["h"] and out["failures"] == []
    else:
        assert out["released"] == [] and out["status"] == "partial_failure"
        assert [(f["record_id"], f["code"]) for f in out["failures"]] == [("h", "NOT_HELD")]


# -- 2. import_removed.py: only removals that happened are named -----------------------------
def _journaled(
    store: SqliteStore, r: MemoryRecord, kind: OpKind, to: OpState, outcome: Outcome
) -> None:
    journal = open_journal(store)
    op = Operation(f"op-{kind.value}-{r.id}", "manual-20260302-aaaa", kind, r.actor_id,
                   r.namespace, r.id, ["REVIEWER_DELETE"], "p1", content_sha256=r.sha256)  # fmt: skip
    journal.plan([op])
    at = datetime(2026, 3, 2, tzinfo=UTC)
    if to is OpState.FAILED:
        journal.transition(op.operation_id, to, outcome=outcome, error="THROTTLED", at=at)
        return
    journal.transition(op.operation_id, OpState.APPLIED, outcome=outcome, at=at)
    if to is OpState.RECEIPTED:
        journal.transition(op.operation_id, to, outcome=outcome, at=at)


@pytest.mark.parametrize(
    ("kind", "state", "outcome"),
    [
        (OpKind.delete, OpState.PLANNED, None),  # planned, never applied
        (OpKind.delete, OpState.FAILED, Outcome.failed),  # the delete failed
        (OpKind.delete, OpState.RECEIPTED, Outcome.already_absent),  # nothing was there
        (OpKind.delete, OpState.RECEIPTED, Outcome.held),  # a hold stopped it
        (OpKind.quarantine, OpState.RECEIPTED, Outcome.quarantined),  # not a removal
        (OpKind.supersede, OpState.RECEIPTED, Outcome.superseded),
    ],
)
def test_an_operation_that_removed_nothing_names_no_run(
    store: SqliteStore, kind: OpKind, state: OpState, outcome: Outcome | None
) -> None:
    """Attacks the state, outcome and kind filters of ``brought_back``: each row below has
    the record's id, actor and content, so only those filters keep it out of the warning."""
    r = rec("n-1", "Likes tea.")
    if state is OpState.PLANNED:
        journal = open_journal(store)
        journal.plan([Operation("op-planned", "manual-20260302-aaaa", kind, r.actor_id,
                                r.namespace, r.id, ["REVIEWER_DELETE"], "p1",
                                content_sha256=r.sha256)])  # fmt: skip
    else:
        assert outcome is not None
        _journaled(store, r, kind, state, outcome)
    mark = rowid_mark(store)
    store.put_many([r])
    assert brought_back(store, mark) == []


def test_a_delete_that_happened_is_named_counter_check(store: SqliteStore) -> None:
    """The same rows with a delete that was applied (not yet receipted) are named: the
    filters above are what kept them out."""
    r = rec("n-1", "Likes tea.")
    _journaled(store, r, OpKind.delete, OpState.APPLIED, Outcome.deleted)
    mark = rowid_mark(store)
    store.put_many([r])
    assert [(w["id"], w["code"]) for w in brought_back(store, mark)] == [
        ("n-1", "PREVIOUSLY_DELETED")
    ]
