"""Audit 48a: `receipts history` over a dataset file planted for a run that sealed none
(memlife/receipts_history.py::_sealed).

A real night over a real SQLite store (``run_local``), the real file receipt sink, the real
CLI (typer's runner). The planted file is a new key, which a create-only bucket with
Object Lock accepts. Session 48 (audit 48a): failed before the fix."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from memlife.audit import open_sink
from memlife.cli import app
from memlife.demo import generate
from memlife.model import Status
from memlife.pipeline import RunConfig, run_local
from memlife.receipts_dataset import SCHEMA, dataset_key
from memlife.stores.sqlite import SqliteStore

ANCHOR = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.mark.parametrize("dry", [True, False], ids=["dry-run", "quiet-apply-night"])
def test_a_file_planted_for_a_run_that_sealed_none_is_not_history(home: Path, dry: bool) -> None:
    """A night that changed nothing (a dry run, or an apply night with no operation) seals
    no dataset file: its receipt's evidence names no `dataset_key` and no operations
    Parquet. The adversary plants `part-0.parquet` under that run's id saying the record
    was deleted. `receipts history` took the planted file for a legacy run's and printed the
    delete as fact, exit 0, while the record is active. It must not show the row, and must
    say the run's file is no sealed evidence (exit 1)."""
    home.mkdir(parents=True, exist_ok=True)
    (record,) = generate(1, seed=11, anchor=ANCHOR)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([record])
    at = ANCHOR + timedelta(days=1)
    night = run_local(RunConfig(dry_run=dry, now=at, consolidate=False, workers=1))
    forged = {"operation_id": "op-" + "f" * 32, "actor_id": record.actor_id,
              "namespace": record.namespace, "record_id": record.id, "action": "delete",
              "reason_codes": ["HARD_EXPIRED"], "outcome": "deleted", "state": "RECEIPTED",
              "attempts": 1, "replacement_id": None, "content_sha256": None, "updated_at": at,
              "mode": "apply", "cutoff": at, "policy_version": night.policy_version,
              "service_identity": "memlife", "store": None}  # fmt: skip
    body = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([forged], schema=SCHEMA), body)
    assert open_sink().put_new(dataset_key(night.run_id, at), body.getvalue(), "x")
    with SqliteStore(home / "memlife.db") as store:
        assert store.get(record.id).status == Status.active  # type: ignore[union-attr]
    res = CliRunner().invoke(app, ["receipts", "history", record.id])
    assert "deleted" not in res.output and res.exit_code == 1, res.output
    assert "DATASET_NOT_SEALED" in res.output
