"""The default dry run fanned out over processes (pipeline.plan_in_processes) plans exactly
what one process plans: same report rows, counts, proposals and estimates. The parent is
one of the planners (it takes back parts no child has started), so rows come from both."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlife.demo import generate
from memlife.pipeline import RunConfig, planning_workers, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.planning import parent_parts

ANCHOR = datetime(2026, 11, 1, tzinfo=UTC)
N = 5000  # 50 actors, 250 shards: two planning processes


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("workers") / "memlife.db"
    store = SqliteStore(path)
    store.put_many(list(generate(N, seed=7, anchor=ANCHOR)))
    store.close()
    return path


def _run(home: Path, db: Path, workers: int, attempt: str) -> tuple[dict, list[dict]]:
    target = home / f"w{workers}.db"
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(db, target)
    summary = run_local(
        RunConfig(dry_run=True, now=ANCHOR, store=f"sqlite:///{target}", workers=workers,
                  attempt=attempt)
    )  # fmt: skip
    rows = [json.loads(x) for x in Path(summary.report).read_text().splitlines()]
    return summary.as_json(), sorted(rows, key=lambda r: r["id"])


def test_two_processes_plan_what_one_plans(
    home: Path, demo_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert planning_workers(RunConfig(dry_run=True, workers=2), 250) == 2
    one, rows_one = _run(home, demo_db, 1, "one")
    local_parts = parent_parts(monkeypatch)
    two, rows_two = _run(home, demo_db, 2, "two")
    assert len(rows_one) == len(rows_two) == N
    assert rows_two == rows_one
    for key in ("counts", "lifecycle", "records", "shards", "model", "gate"):
        assert two[key] == one[key], key
    two["other_counts"].pop("embedded")  # the first run warmed the embedding cache
    assert two["other_counts"] == {k: v for k, v in one["other_counts"].items() if k != "embedded"}
    assert one["other_counts"].get("consolidation_proposed", 0) > 0  # group analysis ran
    # only 2 parts fit the child's queue at once: the parent takes back at least the last
    assert local_parts and sum(local_parts) < 250  # both planned
