"""Audit 52h (session 52): `quarantine list` across tenants.

`list_quarantined` took each row's reasons and run from the journal's quarantine operations
on the record id alone. Ids are reused once a record is removed: u-1's record X, quarantined
by a blocked night (GATE_BLOCKED, run R) and purged since, left its operations; u-2's record
that took the id and is quarantined with no operation of this store (imported as quarantined,
or set so online) was listed as quarantined by u-1's run, for u-1's reasons. The operator's
view mixed two tenants' histories (invariant 8). Real components: the SQLite store and its
journal.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.journal import Operation, OpKind, open_journal
from memlife.model import MemoryRecord
from memlife.quarantine import list_quarantined
from memlife.stores.sqlite import SqliteStore

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def rec(rid: str, actor: str, **kw: Any) -> MemoryRecord:
    base = dict(id=rid, actor_id=actor, namespace=f"/users/{actor}/facts",
                memory_type="semantic", content="Lives in Lisbon.", owner="team-a",
                created_at=NOW - timedelta(days=50), status="quarantined",
                status_changed_at=NOW - timedelta(days=1))  # fmt: skip
    return MemoryRecord.model_validate({**base, **kw})


@pytest.fixture
def store(home: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(home / "memlife.db")
    yield s
    s.close()


def _quarantined_by_a_night(store: SqliteStore, record: MemoryRecord) -> None:
    """The journal row a blocked night leaves for the record it quarantined."""
    open_journal(store).plan([
        Operation(operation_id=f"op-q-{record.actor_id}", run_id=f"run-{record.actor_id}",
                  kind=OpKind.quarantine, actor_id=record.actor_id,
                  namespace=record.namespace, record_id=record.id,
                  reasons=["GATE_BLOCKED"], policy_version="v")
    ])  # fmt: skip


def test_control_a_record_quarantined_by_a_night_names_its_run(store: SqliteStore) -> None:
    x = rec("X", "u-1")
    store.put_many([x])
    _quarantined_by_a_night(store, x)
    rows = list_quarantined(store)
    assert [(r["id"], r["actor_id"], r["run_id"], r["reasons"]) for r in rows] == [
        ("X", "u-1", "run-u-1", ["GATE_BLOCKED"])
    ]


def test_a_reused_id_is_not_listed_with_the_former_owners_quarantine(store: SqliteStore) -> None:
    x = rec("X", "u-1")
    store.put_many([x])
    _quarantined_by_a_night(store, x)
    store.delete_many(["X"])  # purged (its operations stay in the journal)
    store.put_many([rec("X", "u-2", content="Works as a nurse.")])  # imported as quarantined
    rows = list_quarantined(store)
    assert [(r["id"], r["actor_id"]) for r in rows] == [("X", "u-2")]
    assert rows[0]["run_id"] is None and rows[0]["reasons"] == [], rows[0]
