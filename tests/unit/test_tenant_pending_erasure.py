"""Audit 43b: a pending erasure is keyed by the record id alone, and a second tenant's
deferral under an id a stale row still names is dropped (``INSERT OR IGNORE``).

u-1's held X is erased (deferred: a pending row for u-1), then X goes by other means (an
expiry, an operator) without the pending pass that would forget the row. u-2 writes its
own X, holds it and asks for its erasure: deferred too, but its pending row is never
written (u-1's row keeps the id), so releasing u-2's hold drains nothing of u-2's and the
text u-2 asked to erase stays active, unheld, with no request left anywhere.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from memlife.erase import erase, pending_erasures, release_hold
from memlife.model import RetentionClass
from memlife.state.side import DynamoSideTables, SqliteSideTables
from memlife.stores.sqlite import SqliteStore
from tests.support.aws_state import aws_state
from tests.unit.test_erase import NOW, rec

STALE_ROW_WINS = "a pending erasure row is keyed by record id alone: u-1's stale row drops u-2's"


def test_a_deferred_erasure_under_an_id_a_stale_row_names_is_carried_out_on_release(
    home: Path,
) -> None:
    """u-2 holds X, asks for its erasure (deferred), then its hold is released: u-2's X
    must be erased then, whatever row u-1's earlier deferral of another X left behind."""
    store = SqliteStore(home / "memlife.db")
    store.put_many([rec("X", "Owes 500 EUR to Bob.", retention=RetentionClass.legal_hold)])
    assert erase(store, "u-1", ids=["X"], now=NOW)["deferred"] == ["X"]
    store.delete_many(["X"])  # gone by other means (an expiry, an operator), as test_erase does
    held = rec("X", "Plays the cello.", actor="u-2", retention=RetentionClass.legal_hold)
    store.put_many([held])
    assert erase(store, "u-2", ids=["X"], now=NOW)["deferred"] == ["X"]
    assert [p["actor_id"] for p in pending_erasures(store, "u-2")] == ["u-2"]
    release_hold(store, ["X"], now=NOW)
    assert store.get("X") is None  # u-2's request, carried out once its hold went
    store.close()


@pytest.fixture(params=["sqlite", "dynamodb"])
def side(request: pytest.FixtureRequest) -> Iterator[object]:
    if request.param == "sqlite":
        yield SqliteSideTables(sqlite3.connect(":memory:"), threading.RLock())
        return
    with aws_state("inprocess") as (_, state):
        yield DynamoSideTables(state)


def test_another_tenants_deferral_of_an_id_replaces_a_stale_row(side) -> None:
    """Both side tables: a deferral of X for u-2 over u-1's row for X (u-1's record gone,
    the id taken) is u-2's row; one for the same actor and namespace still keeps the first."""
    row = {"record_id": "X", "actor_id": "u-1", "namespace": "/users/u-1/facts",
           "operation_id": "op-1", "run_id": "manual-1", "requested_at": "2026-06-01"}  # fmt: skip
    side.add_pending(row)
    side.add_pending({**row, "operation_id": "op-1b"})  # the first deferral stands
    assert side.pending("u-1") == [row]
    mine = {**row, "actor_id": "u-2", "namespace": "/users/u-2/facts", "operation_id": "op-2"}
    side.add_pending(mine)
    assert side.pending("u-2") == [mine]
