"""Receipts as a dataset: Hive-partitioned operations Parquet, read by DuckDB over an S3 server.

The DuckDB query run here is the one docs/receipts.md documents (read from the file), so
the documentation cannot drift from what works.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import timedelta
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer
from typer.testing import CliRunner

from memlife.audit import FileSink
from memlife.cli import app
from memlife.pipeline import RunConfig, run_local
from memlife.receipts_dataset import PREFIX, SCHEMA
from memlife.receipts_history import record_history, runs_between
from tests.conftest import REPO
from tests.support.lifecycle import CUTOFF, seed

duckdb = pytest.importorskip("duckdb")
runner = CliRunner()


def documented_query(name: str) -> str:
    text = (REPO / "docs" / "receipts.md").read_text()
    m = re.search(rf"```sql\n-- query: {name}\n(.*?)```", text, re.S)
    assert m, f"docs/receipts.md has no query {name!r}"
    return m.group(1)


@pytest.fixture(name="env")
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    home = tmp_path / "home"
    monkeypatch.setenv("MEMLIFE_HOME", str(home))
    for k, v in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("MEMLIFE_SERVICE_IDENTITY", "arn:aws:iam::123456789012:role/memlife-test")
    db = home / "memlife.db"
    return {"db": db, "store": f"sqlite:///{db}", "records": seed(db, records=300), "home": home}


def test_duckdb_query_over_s3_returns_the_runs_operations(env: dict) -> None:
    import pyarrow.dataset as ds
    from pyarrow import fs

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        bucket = (
            f"audit-{uuid.uuid4().hex[:12]}"  # moto's state is per process: a bucket of our own
        )
        s3.create_bucket(Bucket=bucket)
        url = f"s3://{bucket}/memlife?endpoint_url={endpoint}"
        first = run_local(
            RunConfig(
                dry_run=False, now=CUTOFF, store=env["store"], receipts=url, consolidate=False
            )
        )
        second = run_local(
            RunConfig(
                dry_run=False,
                now=CUTOFF + timedelta(days=3),
                store=env["store"],
                receipts=url,
                consolidate=False,
            )
        )
        keys = [
            o["Key"]
            for p in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for o in p.get("Contents", [])
        ]
        data_keys = [k for k in keys if k.startswith(f"memlife/{PREFIX}/")]
        assert data_keys and all(k.endswith(".parquet") for k in data_keys)  # its own prefix
        assert f"memlife/{PREFIX}/date=2026-11-01/run_id={first.run_id}/part-0.parquet" in data_keys

        s3fs = fs.S3FileSystem(
            endpoint_override=endpoint,
            scheme="http",
            region="us-east-1",
            access_key="testing",
            secret_key="testing",
        )
        operations = ds.dataset(
            f"{bucket}/memlife/{PREFIX}", filesystem=s3fs, format="parquet", partitioning="hive"
        )
        con = duckdb.connect()
        con.register("operations", operations)
        rows = con.execute(documented_query("operations-by-run")).fetchall()
        cols = [d[0] for d in con.description]
        got = [dict(zip(cols, r, strict=True)) for r in rows]
        for summary in (first, second):
            mine = [g for g in got if g["run_id"] == summary.run_id]
            assert mine, summary.run_id
            by_outcome: dict[str, int] = {}
            for g in mine:
                by_outcome[g["outcome"]] = by_outcome.get(g["outcome"], 0) + g["operations"]
                assert g["mode"] == "apply"
            deleted = by_outcome.get("deleted", 0) + by_outcome.get("already_absent", 0)
            assert deleted == summary.lifecycle["deleted"]

        typed = con.execute(
            "SELECT typeof(updated_at), typeof(cutoff), service_identity FROM operations LIMIT 1"
        ).fetchone()
        assert typed[0].startswith("TIMESTAMP") and typed[1].startswith("TIMESTAMP")
        assert typed[2] == "arn:aws:iam::123456789012:role/memlife-test"

        # the CLI over the same S3 receipts: runs by cutoff day, and one record's history
        res = runner.invoke(
            app,
            [
                "receipts",
                "list",
                "--receipts",
                url,
                "--since",
                "2026-11-02",
                "--until",
                "2026-11-30",
                "--json",
            ],
        )
        assert res.exit_code == 0, res.output
        assert [r["run_id"] for r in json.loads(res.stdout)] == [second.run_id]
        deleted_id = con.execute(
            "SELECT record_id FROM operations WHERE action = 'delete' AND outcome = 'deleted' LIMIT 1"
        ).fetchone()[0]
        res = runner.invoke(app, ["receipts", "history", deleted_id, "--receipts", url, "--json"])
        assert res.exit_code == 0, res.output
        hist = json.loads(res.stdout)
        assert hist and all(h["record_id"] == deleted_id for h in hist)
        assert hist[0]["action"] == "delete" and hist[0]["run_id"] == first.run_id
    finally:
        server.stop()


def test_schema_has_no_content_column_and_files_are_create_only(env: dict) -> None:
    assert {f.name for f in SCHEMA} >= {"mode", "cutoff", "policy_version", "service_identity"}
    assert "content" not in {f.name for f in SCHEMA}
    summary = run_local(RunConfig(dry_run=False, now=CUTOFF, store=env["store"], consolidate=False))
    root = env["home"] / "receipts"
    files = list((root / PREFIX).rglob("*"))
    parquet = [f for f in files if f.is_file()]
    assert parquet and all(f.suffix == ".parquet" for f in parquet)
    before = {f: f.read_bytes() for f in parquet}
    for r in env["records"].values():
        assert all(r.content.encode() not in body for body in before.values())
    again = run_local(RunConfig(dry_run=False, now=CUTOFF, store=env["store"], consolidate=False))
    assert again.run_id == summary.run_id  # the same run: its evidence stays as first written
    assert {f: f.read_bytes() for f in (root / PREFIX).rglob("*.parquet")} == before


def test_runs_by_cutoff_day_and_history_locally(env: dict) -> None:
    a = run_local(RunConfig(dry_run=True, now=CUTOFF, store=env["store"], consolidate=False))
    b = run_local(
        RunConfig(
            dry_run=False, now=CUTOFF + timedelta(days=1), store=env["store"], consolidate=False
        )
    )
    sink = FileSink(env["home"] / "receipts")
    day = CUTOFF.date()
    assert [r.run_id for r in runs_between(sink, day, day)] == [a.run_id]
    assert [r.run_id for r in runs_between(sink, day + timedelta(days=1), None)] == [b.run_id]
    assert {r.run_id for r in runs_between(sink, None, None)} == {a.run_id, b.run_id}
    assert record_history(sink, "m-no-such-record") == []
    res = runner.invoke(app, ["receipts", "list", "--since", "yesterday"])
    assert res.exit_code == 2 and "expected a day" in res.stderr
