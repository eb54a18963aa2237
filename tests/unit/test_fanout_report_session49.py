"""Audit 49iv (session 49): a shard batch that fails after some of its shards were reported.

The run receipt names every shard of a failed batch failed and counts none of its records
(``failed_outcome``), but ``process_batch`` had already written the decisions of the shards
it planned before the failure into the run's proposed-actions report (the JSONL and the
Parquet the report page reads). The report then proposed actions for shards the receipt
says the run did not plan. Real components: the Prefect test harness, the thread-pool
fan-out, the SQLite store (a wrapper raising for one actor, as tests/e2e/test_fanout.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from memlife.demo import generate
from memlife.run_types import RunConfig
from memlife.stores import open_store
from memlife.stores.base import StoreError
from tests.e2e.test_fanout import ACTORS, BAD, CUTOFF, NAMESPACES, FaultyStore

# sorted shards in batches of two: [u-000000, u-000001] and [u-000002]; u-000000 is planned
# and reported before u-000001 fails
FIRST = "u-000000"


@pytest.fixture()
def seeded(home: Path) -> str:
    url = f"sqlite:///{home / 'fanout.db'}"
    home.mkdir(parents=True, exist_ok=True)
    db = open_store(url)
    try:
        db.put_many(list(generate(300, seed=7)))
    finally:
        db.close()
    return url


def _night(seeded: str, home: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException) -> dict:
    import flows.nightly as nightly_mod
    from memlife import pipeline

    monkeypatch.setattr(pipeline, "open_store", lambda url: FaultyStore(open_store(url), error))
    return nightly_mod.nightly(
        RunConfig(dry_run=True, actors=tuple(ACTORS), namespaces=tuple(NAMESPACES), now=CUTOFF,
                  store=seeded, receipts=f"file://{home / 'receipts'}", shards_per_batch=2,
                  max_workers=2)
    )  # fmt: skip


def _report(result: dict) -> tuple[list[dict], int]:
    rows = [json.loads(line) for line in Path(result["report"]).read_text().splitlines()]
    return rows, pq.read_metadata(result["report_parquet"]).num_rows


def test_a_crashed_batch_leaves_no_rows_of_the_shards_it_failed(
    prefect_harness: None, seeded: str, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adversary: a batch task that raises part-way (a bug, a library error) under the
    Prefect fan-out. Must hold: the run says partial_failure, and the report holds exactly
    the shards the receipt counts as planned, nothing of a shard it names failed."""
    result = _night(seeded, home, monkeypatch, RuntimeError("boom"))
    failed = {s["actor_id"] for s in result["failed_shards"]}
    assert result["status"] == "partial_failure" and failed == {FIRST, BAD}
    rows, parquet_rows = _report(result)
    assert {r["actor_id"] for r in rows} == set(ACTORS) - failed
    assert len(rows) == parquet_rows == result["records"]


def test_control_a_shard_failing_alone_keeps_its_batch_neighbours_rows(
    prefect_harness: None, seeded: str, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control: a StoreError stops its own shard only (process_batch records it); the
    shard planned before it in the same batch is counted and stays in the report."""
    result = _night(seeded, home, monkeypatch, StoreError("quota", "SERVICE_QUOTA"))
    assert [s["actor_id"] for s in result["failed_shards"]] == [BAD]
    rows, parquet_rows = _report(result)
    assert {r["actor_id"] for r in rows} == set(ACTORS) - {BAD}
    assert len(rows) == parquet_rows == result["records"]


def test_the_local_engine_leaves_no_rows_of_a_batch_it_gave_up_on_throttling(
    home: Path, seeded: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on the local engine (no Prefect): a batch still throttled after its retries
    becomes THROTTLED entries for each of its shards (memlife/throttling.retried)."""
    from memlife import pipeline

    class Throttled(Exception):
        code = "ThrottlingException"

    monkeypatch.setenv("MEMLIFE_TASK_RETRIES", "0")
    monkeypatch.setattr(
        pipeline, "open_store", lambda url: FaultyStore(open_store(url), Throttled())
    )
    summary = pipeline.run_local(
        RunConfig(dry_run=True, actors=tuple(ACTORS), namespaces=tuple(NAMESPACES), now=CUTOFF,
                  store=seeded, receipts=f"file://{home / 'receipts'}", shards_per_batch=2,
                  workers=1)
    )  # fmt: skip
    result = summary.as_json()
    assert {s["actor_id"] for s in result["failed_shards"]} == {FIRST, BAD}
    assert {s["code"] for s in result["failed_shards"]} == {"THROTTLED"}
    rows, parquet_rows = _report(result)
    assert {r["actor_id"] for r in rows} == set(ACTORS) - {FIRST, BAD}
    assert len(rows) == parquet_rows == result["records"]
