"""Audit 43p (session 43): a failed attempt drops the outcome key another attempt of the same run still uses.

A child batch seals its outcome under the run's key (``outcomes.run_key``: one per run id,
``$MEMLIFE_HOME/run-keys/<run_id>`` or the state table's ``outkey`` item), and the parent
opens it with the same key (``fanout.child_outcome``: the Prefect fan-out over
deployments). Since session 43 a failed run also calls ``run_finish.drop_outcomes``,
which removes that key. Two dry runs of one store, policy, scope and cutoff are one run
id (the run key is deterministic) with two attempts, and a dry run takes no lease, so
both may be under way at once: one failing deletes the key the other's children sealed
with, and the other's parent then refuses every outcome (OUTCOME_REFUSED).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife import fanout
from memlife.faults import InjectedFault, inject
from memlife.model import MemoryRecord, MemoryType
from memlife.pipeline import RunConfig, run_local
from memlife.run_start import start_run
from memlife.run_types import Shard
from memlife.stores.sqlite import SqliteStore

NOW = datetime(2026, 11, 1, 12, tzinfo=UTC)
NS = "/users/u-1/facts"


def test_a_failed_dry_run_leaves_a_concurrent_attempts_outcomes_readable(home: Path) -> None:
    """The adversary starts two dry runs of one cutoff (the same run id, no lease): the
    second's child seals its batch outcome, then the first fails after its gate. The
    second's parent must still open its child's outcome."""
    db = home / "memlife.db"
    with SqliteStore(db) as s:
        s.put_many([
            MemoryRecord(id="m-1", actor_id="u-1", namespace=NS, memory_type=MemoryType.semantic,
                         content="Likes tea.", subject="tea", owner="team-a",
                         created_at=NOW - timedelta(days=5)),
        ])  # fmt: skip
    config = RunConfig(dry_run=True, now=NOW)
    other = start_run(config)  # the second dry run, under way
    child = fanout.config_from_params(fanout.config_params(config, other))
    fanout.process_isolated(child, [Shard("u-1", NS)], "0")  # its child sealed an outcome
    with inject("after_gate"), pytest.raises(InjectedFault):
        run_local(config)  # the first dry run fails
    assert fanout.child_outcome(other, "0").records == 1
