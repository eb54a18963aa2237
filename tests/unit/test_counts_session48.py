"""Session 48 (audit 48i): the figures an operator reads during and after a night (the progress bar, the
summary, the receipt) against what the night planned. Real SQLite stores, the local engine."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from memlife import faults, progress
from memlife.demo import generate
from memlife.model import MemoryRecord, parse_time
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore

NOW = parse_time("2026-11-01T00:00:00+00:00")


def test_the_bar_reaches_its_total_when_planning_fans_out_over_processes(home: Path) -> None:
    """The operator runs a night over a store big enough for the planning to fan out over
    processes (`workers=2`, 100+ shards): the parent plans some parts itself while a child
    plans the rest. Must hold: the progress bar advances once per record planned, so it
    ends at the total it was given (the store's records), as it does in one process; the
    parent's own parts were advanced per shard and again per part."""
    home.mkdir(parents=True, exist_ok=True)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many(list(generate(600, seed=5)))
    totals: list[int | None] = []
    done: list[int] = []
    progress.set_phase_hook(lambda label, total: totals.append(total))
    progress.set_hook(done.append)
    try:
        summary = run_local(RunConfig(dry_run=True, now=NOW, consolidate=False, workers=2))
    finally:
        progress.set_phase_hook(None)
        progress.set_hook(None)
    assert summary.shards >= 100 and summary.records == 600 in totals
    assert sum(done) == summary.records


def test_a_cloudwatch_that_cannot_be_reached_never_fails_the_night(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator names a metrics namespace, but CloudWatch cannot be reached (its
    endpoint refuses the connection: a VPC without the endpoint, a proxy down). Must hold
    (metrics.py: "a metrics failure never fails a run"): the night completes as it would
    without metrics, its expired record deleted and its receipt written with the counts."""
    for k, v in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
                 "AWS_DEFAULT_REGION": "us-east-1", "AWS_MAX_ATTEMPTS": "1",
                 "AWS_ENDPOINT_URL_CLOUDWATCH": "http://127.0.0.1:9"}.items():  # fmt: skip
        monkeypatch.setenv(k, v)
    home.mkdir(parents=True, exist_ok=True)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([MemoryRecord(id="x", actor_id="u-1", namespace="/users/u-1/facts",
                                     content="Went hiking.", owner="team-a", memory_type="semantic",
                                     created_at=NOW - timedelta(days=30),
                                     expires_at=NOW - timedelta(days=1))])  # fmt: skip
    summary = run_local(RunConfig(dry_run=False, now=NOW, metrics_namespace="MemLife/Q"))
    assert summary.status == "success" and summary.lifecycle["deleted"] == 1
    receipt = json.loads(Path(str(summary.receipt)).read_text())
    assert receipt["status"] == "success" and receipt["counts"] == summary.lifecycle
    with SqliteStore(home / "memlife.db") as store:
        assert store.get("x") is None


def _seed_two(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([MemoryRecord(id=rid, actor_id="u-1", namespace="/users/u-1/facts",
                                     content=text, owner="team-a", memory_type="semantic",
                                     created_at=NOW - timedelta(days=30), expires_at=expires)
                        for rid, text, expires in (("x", "Went hiking.", NOW - timedelta(days=1)),
                                                   ("k", "Lives in Oslo.", None))])  # fmt: skip


def test_a_rerun_after_a_crash_plans_what_the_clean_night_plans(home: Path) -> None:
    """The night is killed right after it deleted an expired record (`after_delete`), and
    run again at the same cutoff. Must hold: the rerun's receipt says what one clean night
    says: `planned` (records per planned action) sums to `records_found`, the deletion
    planned included, as the CLI's table prints it under "total"; it said delete_expired 0
    and retain 1 for records_found 2 (and deleted 1)."""
    _seed_two(home)
    with faults.inject("after_delete"), pytest.raises(faults.InjectedFault):
        run_local(RunConfig(dry_run=False, now=NOW, workers=1))
    summary = run_local(RunConfig(dry_run=False, now=NOW, workers=1))
    receipt = json.loads(Path(str(summary.receipt)).read_text())
    assert receipt["counts"]["deleted"] == 1 and receipt["records_found"] == 2
    assert receipt["planned"]["delete_expired"] == 1
    assert sum(receipt["planned"].values()) == receipt["records_found"]
