"""`PREVIOUSLY_DELETED` (memlife/import_removed.py): a record an import brings back after a
receipted removal is named with the latest such run, only for rows the import wrote, and
only when the content is the one removed (other content under the id is a reused id)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from memlife.import_removed import brought_back, rowid_mark
from memlife.journal import Operation, OpKind, OpState, Outcome, open_journal
from memlife.model import MemoryRecord
from memlife.stores.sqlite import SqliteStore


def _rec(rid: str, text: str) -> MemoryRecord:
    return MemoryRecord.model_validate({
        "id": rid, "actor_id": "u-1", "namespace": "/users/u-1/facts", "memory_type": "semantic",
        "content": text, "created_at": "2026-03-01T08:00:00Z", "source": "user_stated",
        "confidence": 0.9,
    })  # fmt: skip


def _removed(store: SqliteStore, run_id: str, r: MemoryRecord, at: datetime) -> None:
    journal = open_journal(store)
    op = Operation(f"op-{run_id}-{r.id}", run_id, OpKind.delete, r.actor_id, r.namespace, r.id,
                   ["REVIEWER_DELETE"], "p1", content_sha256=r.sha256)  # fmt: skip
    journal.plan([op])
    journal.transition(op.operation_id, OpState.APPLIED, outcome=Outcome.deleted, at=at)
    journal.transition(op.operation_id, OpState.RECEIPTED, outcome=Outcome.deleted, at=at)


def test_the_latest_removal_is_named_and_only_the_imports_rows(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "m.db") as store:
        a, b, kept = _rec("n-1", "Likes tea."), _rec("n-2", "Likes coffee."), _rec("n-3", "Jogs.")
        store.put_many([kept])
        # a manual run's id sorts after a night's ("manual-..." > "2026..."): time decides
        _removed(store, "manual-20260302-aaaa", a, datetime(2026, 3, 2, tzinfo=UTC))
        _removed(store, "20260311T030000Z-apply-bbbb", a, datetime(2026, 3, 11, tzinfo=UTC))
        _removed(store, "manual-20260302-cccc", b, datetime(2026, 3, 2, tzinfo=UTC))
        _removed(store, "manual-20260302-dddd", kept, datetime(2026, 3, 2, tzinfo=UTC))
        mark = rowid_mark(store)
        store.put_many([a, _rec("n-2", "Likes coffee a lot.")])  # n-2: other content
        got = brought_back(store, mark)
    assert [(w["id"], w["run_id"]) for w in got] == [("n-1", "20260311T030000Z-apply-bbbb")]
    assert all(w["code"] == "PREVIOUSLY_DELETED" for w in got)  # n-3 was there before


def test_a_store_that_never_ran_has_nothing_to_name(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "m.db") as store:
        mark = rowid_mark(store)
        store.put_many([_rec("n-1", "Likes tea.")])
        assert brought_back(store, mark) == []
