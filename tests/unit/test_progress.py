"""The run reports its phases, with a total for planning, and the advances reach it."""

from __future__ import annotations

from pathlib import Path

from memlife import progress
from memlife.demo import generate
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore

FIXED_NOW = "2026-11-01T00:00:00+00:00"


def test_phases_with_totals(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many(list(generate(120, seed=5)))
    phases: list[tuple[str, int | None]] = []
    done: list[int] = []
    progress.set_phase_hook(lambda label, total: phases.append((label, total)))
    progress.set_hook(done.append)
    try:
        from memlife.model import parse_time

        summary = run_local(RunConfig(dry_run=True, now=parse_time(FIXED_NOW), consolidate=False))
    finally:
        progress.set_phase_hook(None)
        progress.set_hook(None)
    labels = [p[0] for p in phases]
    assert labels[0] == "listing shards" and labels[-1] == "finishing"
    planning = next(p for p in phases if p[0].startswith("planning"))
    assert planning == (f"planning {summary.shards:,} shards", 120)
    assert sum(done) == summary.records == 120  # the bar reaches its total


def test_no_total_for_a_scoped_run(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many(list(generate(60, seed=5)))
    phases: list[tuple[str, int | None]] = []
    progress.set_phase_hook(lambda label, total: phases.append((label, total)))
    try:
        run_local(RunConfig(dry_run=True, actors=("u-000001",), consolidate=False))
    finally:
        progress.set_phase_hook(None)
    assert next(p for p in phases if p[0].startswith("planning"))[1] is None
