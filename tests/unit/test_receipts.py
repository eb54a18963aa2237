"""Receipts: S3 (moto, also over real HTTP), write failures, retry queue, canaries, verify."""

from __future__ import annotations

import io
import json
import logging
from datetime import timedelta
from pathlib import Path

import boto3
import pyarrow.parquet as pq
import pytest
from moto import mock_aws
from moto.server import ThreadedMotoServer
from typer.testing import CliRunner

from memlife.audit import FileSink, ReceiptWriteError, S3Sink
from memlife.cli import app
from memlife.journal import OpState, open_journal
from memlife.pipeline import RunConfig, run_local
from memlife.stores.base import BatchResult, ItemFailure
from memlife.stores.sqlite import SqliteStore
from tests.support.lifecycle import (
    CUTOFF,
    assert_no_markers,
    check_invariants,
    gate_cases,
    seed,
    snapshot,
)

runner = CliRunner()


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    home = tmp_path / "home"
    monkeypatch.setenv("MEMLIFE_HOME", str(home))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    db = home / "memlife.db"
    records = seed(db, records=300)
    monkeypatch.setenv("MEMLIFE_EVAL_CASES", gate_cases(db))  # the gate is required
    return {"db": db, "store": f"sqlite:///{db}", "home": home, "records": records}


def _markers(records: dict) -> list[str]:
    return [
        r.content.split("[canary ")[1][:16] for r in records.values() if "[canary " in r.content
    ]


# -- S3 ---------------------------------------------------------------------------------------
def test_s3_sink_is_create_only() -> None:
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="receipts")
        sink = S3Sink("receipts", "memlife/prod")
        assert sink.put_new("runs/x/manifest.json", b"{}") is True
        assert sink.put_new("runs/x/manifest.json", b'{"other": 1}') is False  # If-None-Match: *
        assert sink.get("runs/x/manifest.json") == b"{}"
        assert list(sink.list("runs/")) == ["runs/x/manifest.json"]


def test_evidence_chain_reads_s3_concurrently_in_id_order(tmp_path: Path) -> None:
    """The chain over S3 (16 GETs in flight) equals the one-by-one chain over the same
    bodies in files, a missing receipt is skipped the same way, and a changed body moves
    the head: the order and the bytes are what is hashed, not which GET came back first."""
    from memlife.evidence import chain
    from memlife.receipts import operation_key

    ids = [f"op-{i:04d}" for i in range(100)]
    files = FileSink(tmp_path / "receipts")
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="receipts")
        s3 = S3Sink("receipts", "memlife/prod")
        assert s3.concurrent_gets > 1 and len(ids) >= 2 * s3.concurrent_gets
        for oid in ids[:-1]:  # the last one is missing in both
            body = json.dumps({"operation_id": oid, "n": len(oid)}).encode()
            assert s3.put_new(operation_key(oid), body) and files.put_new(operation_key(oid), body)
        n, head, bodies = chain(s3, reversed(ids))
        assert (n, head) == chain(files, ids)[:2] and n == len(ids) - 1
        assert list(bodies) == ids[:-1]
        tampered = S3Sink("receipts", "memlife/prod")
        tampered.client.put_object(Bucket="receipts", Key="memlife/prod/" + operation_key(ids[50]),
                                   Body=b"{}")  # fmt: skip
        assert chain(tampered, ids)[1] != head


def test_apply_run_with_receipts_in_s3_over_http(env: dict) -> None:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        s3.create_bucket(Bucket="audit")
        url = f"s3://audit/memlife?endpoint_url={endpoint}"
        before = snapshot(env["db"])
        summary = run_local(RunConfig(dry_run=False, now=CUTOFF, store=env["store"], receipts=url))
        assert summary.status == "success"
        keys = [
            o["Key"]
            for p in s3.get_paginator("list_objects_v2").paginate(Bucket="audit")
            for o in p.get("Contents", [])
        ]
        prefix = f"memlife/runs/2026/11/01/{summary.run_id}"
        assert f"{prefix}/manifest.json" in keys and f"{prefix}/receipt.json" in keys
        assert f"{prefix}/operations.parquet" in keys
        ops = [k for k in keys if k.startswith("memlife/operations/")]
        receipt = json.loads(
            s3.get_object(Bucket="audit", Key=f"{prefix}/receipt.json")["Body"].read()
        )
        life = receipt["counts"]
        assert len(ops) == life["deleted"] + life["superseded"] + life["consolidated"]
        table = pq.read_table(
            io.BytesIO(
                s3.get_object(Bucket="audit", Key=f"{prefix}/operations.parquet")["Body"].read()
            )
        )
        assert table.num_rows == len(ops)
        one = json.loads(s3.get_object(Bucket="audit", Key=ops[0])["Body"].read())
        assert set(one) >= {
            "operation_id",
            "scope",
            "record_id",
            "action",
            "reason_codes",
            "policy_version",
            "service_identity",
            "reviewer_identity",
            "timestamp",
            "replacement_id",
            "outcome",
            "content_sha256",
        }
        # a rerun finds everything written and moves on; nothing is overwritten
        etags = {k: s3.head_object(Bucket="audit", Key=k)["ETag"] for k in keys}
        again = run_local(RunConfig(dry_run=False, now=CUTOFF, store=env["store"], receipts=url))
        assert again.status == "success"
        assert {k: s3.head_object(Bucket="audit", Key=k)["ETag"] for k in keys} == etags
        # the CLI reads the same bucket
        result = runner.invoke(
            app,
            [
                "receipts",
                "verify",
                summary.run_id,
                "--receipts",
                url,
                "--store",
                env["store"],
                "--json",
            ],
        )
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["ok"] is True
        data = b"".join(s3.get_object(Bucket="audit", Key=k)["Body"].read() for k in keys)
        assert not [m for m in _markers(env["records"]) if m.encode() in data]
        # the bucket's objects as files (what check_invariants reads): invariants 1, 2, 3, 5, 8
        copy = env["home"] / "s3-receipts"
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket="audit", Prefix="memlife/"):
            for o in page.get("Contents", []):
                dest = copy / o["Key"].removeprefix("memlife/")
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(s3.get_object(Bucket="audit", Key=o["Key"])["Body"].read())
        after = snapshot(env["db"])
        assert after != before and (copy / "operations").is_dir()
        check_invariants(before, after, copy)
    finally:
        server.stop()


class FlakySink(FileSink):
    """Receipt writes for operations fail (a network boundary outage), run files succeed."""

    def __init__(self, root: Path, fail_operations: bool = True):
        super().__init__(root)
        self.fail_operations = fail_operations

    def put_new(self, key: str, body: bytes, content_type: str = "application/json") -> bool:
        if self.fail_operations and key.startswith("operations/"):
            raise ReceiptWriteError(f"{key}: simulated outage")
        return super().put_new(key, body, content_type)


def test_receipt_write_failure_is_partial_and_queued(
    env: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = env["home"] / "receipts"
    flaky = FlakySink(root)
    monkeypatch.setattr("memlife.run_start.open_sink", lambda url=None: flaky)
    first = run_local(RunConfig(dry_run=False, now=CUTOFF, store=env["store"]))
    assert first.status == "partial_failure"
    store = SqliteStore(env["db"])
    journal = open_journal(store)
    applied = [o for o in journal.by_run(first.run_id) if o.state is OpState.APPLIED]
    assert applied and all(o.state is not OpState.RECEIPTED for o in journal.by_run(first.run_id))
    flaky.fail_operations = False  # the outage ends; the next run drains the queue
    later = run_local(RunConfig(dry_run=False, now=CUTOFF + timedelta(days=1), store=env["store"]))
    assert later.status == "success"
    assert all(o.state is OpState.RECEIPTED for o in journal.by_run(first.run_id))
    for o in applied:
        assert (root / "operations" / f"{o.operation_id}.json").exists()
    store.close()


class PartialDeleteStore(SqliteStore):
    """AgentCore-like partial failure: the first `n` ids of each delete batch fail."""

    fail_ids: set[str] = set()

    def delete_many(self, ids, **kw):  # type: ignore[override]
        failing = [i for i in ids if i in self.fail_ids]
        res = super().delete_many([i for i in ids if i not in self.fail_ids], **kw)
        return BatchResult(
            res.succeeded, [ItemFailure(i, "THROTTLED") for i in failing], res.missing
        )


def test_partial_delete_failure_is_retried_and_counted_once(
    env: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    dry = run_local(
        RunConfig(
            dry_run=True,
            now=CUTOFF,
            store=env["store"],
            consolidate=False,
            receipts=f"file://{env['home'] / 'r'}",
        )
    )
    rows = [json.loads(line) for line in Path(dry.report).read_text().splitlines()]
    doomed = sorted(r["id"] for r in rows if r["action"] == "delete_expired")[:3]
    assert len(doomed) == 3
    PartialDeleteStore.fail_ids = set(doomed)
    monkeypatch.setattr(
        "memlife.pipeline.open_store", lambda url=None: PartialDeleteStore(env["db"])
    )
    first = run_local(RunConfig(dry_run=False, now=CUTOFF, store=env["store"]))
    assert first.status == "partial_failure"
    assert first.lifecycle["failed"] == 3
    receipt = json.loads(Path(first.receipt).read_text())
    assert {f["record_id"] for f in receipt["failures"]} == set(doomed)
    assert {i["id"] for i in receipt["ids_not_deleted"]} >= set(doomed)
    assert receipt["next_retry_at"] is not None
    PartialDeleteStore.fail_ids = set()
    # retried with backoff: not due yet at the same cutoff + 1 minute ...
    soon = run_local(
        RunConfig(
            dry_run=False, now=CUTOFF + timedelta(minutes=1), store=env["store"], retry_only=True
        )
    )
    assert soon.lifecycle["failed"] == 0
    store = SqliteStore(env["db"])
    assert all(store.get(i) is not None for i in doomed)
    # ... and done by a later run; a record already gone counts as done, not as failed
    store.delete_many([doomed[0]])
    later = run_local(
        RunConfig(
            dry_run=False, now=CUTOFF + timedelta(days=2), store=env["store"], retry_only=True
        )
    )
    assert later.status == "success" and later.lifecycle["failed"] == 0
    assert all(store.get(i) is None for i in doomed)
    ops = {
        json.loads(p.read_text())["record_id"]: json.loads(p.read_text())
        for p in (env["home"] / "receipts" / "operations").glob("*.json")
    }
    assert ops[doomed[0]]["outcome"] == "already_absent"
    assert ops[doomed[1]]["outcome"] == "deleted"
    store.close()


# -- canaries -----------------------------------------------------------------------------------
def test_no_content_in_receipts_reports_logs_or_output(
    env: dict, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    result = runner.invoke(
        app,
        [
            "run",
            "--engine",
            "local",
            "--now",
            CUTOFF.isoformat(),
            "--store",
            env["store"],
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    markers = _markers(env["records"])
    assert markers
    assert_no_markers(env["home"] / "receipts", markers)
    assert_no_markers(env["home"] / "reports", markers)
    for m in markers:
        assert m not in result.output and m not in caplog.text


# -- verify ----------------------------------------------------------------------------------------
def _verify(env: dict, run_id: str) -> tuple[int, dict]:
    result = runner.invoke(
        app,
        [
            "receipts",
            "verify",
            run_id,
            "--store",
            env["store"],
            "--json",
            "--receipts",
            f"file://{env['home'] / 'receipts'}",
        ],
    )
    return result.exit_code, json.loads(result.output)


def test_verify_passes_then_fails_on_tampering(env: dict) -> None:
    summary = run_local(RunConfig(dry_run=False, now=CUTOFF, store=env["store"]))
    code, out = _verify(env, summary.run_id)
    assert code == 0 and out["ok"] and out["operations"] > 0
    store = SqliteStore(env["db"])
    replacement = next(r for r in store.iter_all() if r.id.startswith("r-"))
    store.delete_many([replacement.id])  # behind the journal's back
    store.close()
    code, out = _verify(env, summary.run_id)
    assert code == 1
    assert {"RECORD_MISSING_WITHOUT_RECEIPT"} <= {p["code"] for p in out["problems"]}


def test_verify_fails_when_a_receipt_is_removed(env: dict) -> None:
    summary = run_local(RunConfig(dry_run=False, now=CUTOFF, store=env["store"]))
    victim = next((env["home"] / "receipts" / "operations").glob("*.json"))
    victim.unlink()
    code, out = _verify(env, summary.run_id)
    assert code == 1
    assert [
        p
        for p in out["problems"]
        if p["code"] == "OPERATION_RECEIPT_MISSING" and p["operation_id"] == victim.stem
    ]


def test_verify_fails_when_a_deleted_record_reappears(env: dict) -> None:
    summary = run_local(RunConfig(dry_run=False, now=CUTOFF, store=env["store"]))
    ops = [
        json.loads(p.read_text()) for p in (env["home"] / "receipts" / "operations").glob("*.json")
    ]
    deleted = next(o["record_id"] for o in ops if o["action"] == "delete")
    store = SqliteStore(env["db"])
    store.put_many([env["records"][deleted]])
    store.close()
    code, out = _verify(env, summary.run_id)
    assert code == 1 and "DELETED_RECORD_PRESENT" in {p["code"] for p in out["problems"]}


def test_receipts_list_and_show(env: dict) -> None:
    summary = run_local(RunConfig(dry_run=False, now=CUTOFF, store=env["store"]))
    sink = f"file://{env['home'] / 'receipts'}"
    out = runner.invoke(app, ["receipts", "list", "--receipts", sink, "--json"])
    runs = json.loads(out.output)
    assert [r["run_id"] for r in runs] == [summary.run_id]
    assert runs[0]["status"] == "success"
    out = runner.invoke(app, ["receipts", "show", summary.run_id, "--receipts", sink, "--json"])
    shown = json.loads(out.output)
    assert shown["receipt"]["counts"] == summary.lifecycle
    assert runner.invoke(app, ["receipts", "show", "nope", "--receipts", sink]).exit_code == 1
    future = runner.invoke(
        app, ["receipts", "list", "--since", "2999-01-01", "--receipts", sink, "--json"]
    )
    assert json.loads(future.output) == []
