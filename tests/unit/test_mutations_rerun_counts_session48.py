"""Session 48 (audit 48m): a rerun's plan puts back what its first attempt removed, as it was planned
(memlife/rerun_counts.py ``removed_actions``, audit 48i). Real SQLite store, the local
engine, the night killed with ``memlife.faults.inject`` as the session-48 test kills it."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from memlife import faults
from memlife.model import MemoryRecord, Status
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.unit.test_counts_session48 import NOW


def test_a_rerun_plans_a_removed_pending_record_as_delete_pending(home: Path) -> None:
    """Weak test (mutant: `grace = False` in `carried_over`: every removed record put back
    as `delete_expired`). A record marked pending_delete 30 days ago (grace elapsed) is
    deleted and the night killed (`after_delete`), then run again at the same cutoff.
    Must hold: the rerun's receipt plans it as a clean night does, `delete_pending` 1 and
    `delete_expired` 0."""
    home.mkdir(parents=True, exist_ok=True)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([MemoryRecord(id="p", actor_id="u-1", namespace="/users/u-1/facts",
                                     content="Went hiking.", owner="team-a",
                                     memory_type="semantic", status=Status.pending_delete,
                                     created_at=NOW - timedelta(days=60),
                                     status_changed_at=NOW - timedelta(days=30))])  # fmt: skip
    with faults.inject("after_delete"), pytest.raises(faults.InjectedFault):
        run_local(RunConfig(dry_run=False, now=NOW, workers=1))
    summary = run_local(RunConfig(dry_run=False, now=NOW, workers=1))
    receipt = json.loads(Path(str(summary.receipt)).read_text())
    assert receipt["counts"]["deleted"] == 1 and receipt["records_found"] == 1
    assert receipt["planned"].get("delete_pending") == 1
    assert not receipt["planned"].get("delete_expired")
