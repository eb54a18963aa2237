"""The documented DuckDB view reads only sealed dataset files (session 29 compliance review):
the view took each run's greatest file name, so a `part-999.parquet` added beside a run's
sealed file (a create-only bucket allows it) turned an erasure's deletes into reviews for
every SQL reader. The view in docs/receipts.md is run here, as documented."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from memlife.cli import app
from tests.support.records import good
from tests.unit.test_receipts_dataset import documented_query

duckdb = pytest.importorskip("duckdb")
runner = CliRunner()


def test_the_documented_view_ignores_a_file_no_receipt_seals(home: Path, tmp_path: Path) -> None:
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1")) + "\n" + json.dumps(good("m-2", subject="dogs")) + "\n")
    assert runner.invoke(app, ["import", str(src)]).exit_code == 0
    res = runner.invoke(app, ["erase", "--actor", "u-1", "--id", "m-1", "--yes", "--json"])
    run_id = json.loads(res.stdout)["run_id"]
    root = home / "receipts"
    (part,) = root.glob(f"dataset/operations/*/run_id={run_id}/part-0.parquet")
    forged = pq.read_table(part).to_pylist()
    for row in forged:
        row.update(action="review", outcome="reviewed")
    pq.write_table(pq.read_table(part).from_pylist(forged, schema=pq.read_schema(part)),
                   part.with_name("part-999.parquet"))  # fmt: skip

    con = duckdb.connect()
    con.execute(documented_query("sealed-operations").replace("s3://BUCKET/PREFIX", str(root)))
    rows = con.execute("SELECT record_id, action, outcome FROM operations WHERE run_id = ?",
                       [run_id]).fetchall()  # fmt: skip
    assert rows == [("m-1", "erase", "deleted")]


def test_the_view_names_each_operations_store_and_reads_files_written_before_it(
    home: Path, tmp_path: Path
) -> None:
    """Session 29 "Left": two stores sharing a receipts location were one table with nothing
    telling their operations apart. Each row now carries the run's store; a file written
    before the column was kept reads as NULL there, in the same view, not as an error."""
    from memlife.stores import store_identity

    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1")) + "\n" + json.dumps(good("m-2")) + "\n")
    assert runner.invoke(app, ["import", str(src)]).exit_code == 0
    runs = []
    for rid in ("m-1", "m-2"):
        res = runner.invoke(app, ["erase", "--actor", "u-1", "--id", rid, "--yes", "--json"])
        runs.append(json.loads(res.stdout)["run_id"])
    root = home / "receipts"
    (old,) = root.glob(f"dataset/operations/*/run_id={runs[0]}/part-0.parquet")
    table = pq.read_table(old)
    assert table.column("store").to_pylist() == [store_identity()]
    pq.write_table(table.drop_columns(["store"]), old)  # as written before session 32

    con = duckdb.connect()
    con.execute(documented_query("sealed-operations").replace("s3://BUCKET/PREFIX", str(root)))
    rows = con.execute(
        "SELECT run_id, record_id, store FROM operations ORDER BY record_id"
    ).fetchall()
    assert rows == [(runs[0], "m-1", None), (runs[1], "m-2", store_identity())]
