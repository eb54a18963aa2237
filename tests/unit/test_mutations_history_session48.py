"""Session 48 (audit 48m): which runs `receipts history` reads a dataset file for
(memlife/receipts_history.py::_sealed), as audit 48a's test plants the file: a new key
under a real run's id, the real file sink, the real CLI (typer's runner)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

from memlife.audit import open_sink
from memlife.cli import app
from memlife.demo import generate
from memlife.pipeline import RunConfig, RunSummary, run_local
from memlife.receipts_dataset import SCHEMA, dataset_key
from memlife.stores.sqlite import SqliteStore

ANCHOR = datetime(2026, 11, 1, tzinfo=UTC)


def _night(home: Path, *, dry: bool) -> tuple[RunSummary, str]:
    """Seeded demo records, one night 60 days on whose receipt is rewritten as an older
    memlife sealed it (its evidence named no file); the id of a record it planned."""
    home.mkdir(parents=True, exist_ok=True)
    records = list(generate(120, seed=11, anchor=ANCHOR, markers=True))
    with SqliteStore(home / "memlife.db") as store:
        store.put_many(records)
    at = ANCHOR + timedelta(days=60)
    night = run_local(RunConfig(dry_run=dry, now=at, consolidate=False, workers=1))
    folder = Path(night.manifest).parent
    record_id = records[0].id
    if not dry:
        ops = pq.read_table(folder / "operations.parquet").to_pylist()
        record_id = ops[0]["record_id"]
    receipt = json.loads((folder / "receipt.json").read_text())
    receipt["evidence"] = {}
    (folder / "receipt.json").chmod(0o644)
    (folder / "receipt.json").write_text(json.dumps(receipt))
    return night, record_id


def _plant(night: RunSummary, record_id: str) -> None:
    at = ANCHOR + timedelta(days=60)
    forged = {"operation_id": "op-" + "f" * 32, "actor_id": "u", "namespace": "/n",
              "record_id": record_id, "action": "delete", "reason_codes": ["HARD_EXPIRED"],
              "outcome": "deleted", "state": "RECEIPTED", "attempts": 1,
              "replacement_id": None, "content_sha256": None, "updated_at": at,
              "mode": "apply", "cutoff": at, "policy_version": night.policy_version,
              "service_identity": "memlife", "store": None}  # fmt: skip
    body = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([forged], schema=SCHEMA), body)
    assert open_sink().put_new(dataset_key(night.run_id, at), body.getvalue(), "x")


def test_a_file_planted_for_an_older_dry_run_is_not_history(home: Path) -> None:
    """Weak test (mutant: `receipt.get("mode") == "dry_run"` dropped from `_sealed`). A dry
    night's receipt from before evidence named a `parquet_key` seals no dataset file; the
    adversary plants one under its id saying a record was deleted. No row of it is
    history: the run's file is no sealed evidence (exit 1)."""
    night, record_id = _night(home, dry=True)
    _plant(night, record_id)
    res = CliRunner().invoke(app, ["receipts", "history", record_id])
    assert "deleted" not in res.output and res.exit_code == 1, res.output
    assert "DATASET_NOT_SEALED" in res.output


def test_a_run_sealed_before_receipts_named_a_parquet_key_is_still_read(home: Path) -> None:
    """Weak test (mutant: `"parquet_key" in evidence` dropped: `evidence["parquet_key"]`
    raises KeyError). An apply night's receipt as an older memlife wrote it, whose evidence
    has no `parquet_key` and no `dataset_key`, keeps its dataset file as history."""
    _, record_id = _night(home, dry=False)
    res = CliRunner().invoke(app, ["receipts", "history", record_id])
    assert res.exit_code == 0 and record_id in res.output, res.output
