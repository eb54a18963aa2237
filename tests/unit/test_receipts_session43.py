"""Audit 43e (session 43): receipts in S3 as a compliance reviewer and an adversary see them.

A versioned bucket under Object Lock (deploy/receipts-bucket.yaml) keeps every version but
serves the newest; two spellings of one receipts folder; a prefix with a trailing slash;
more than a thousand operation receipts under one prefix. Real components throughout: the
SQLite store, moto S3 in-process and over HTTP, boto3, the memlife CLI."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from moto.server import ThreadedMotoServer
from typer.testing import CliRunner

from memlife.audit import S3Sink
from memlife.cli import app
from memlife.evidence import receipt_digest
from memlife.journal import open_journal
from memlife.pipeline import RunConfig, run_local
from memlife.receipts import operation_key
from memlife.review import verify_run
from memlife.stores.sqlite import SqliteStore
from tests.support.lifecycle import CUTOFF, seed
from tests.support.records import good

runner = CliRunner()


@pytest.fixture()
def aws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A seeded store under an isolated home, AWS credentials for moto."""
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    db = tmp_path / "home" / "memlife.db"
    seed(db)
    yield db


def _problems(sink: S3Sink, db: Path, run_id: str, evidence_only: bool) -> list[dict]:
    store = SqliteStore(db)
    try:
        journal = None if evidence_only else open_journal(store)
        v = verify_run(sink, None if evidence_only else store, journal, run_id,
                       evidence_only=evidence_only)  # fmt: skip
    finally:
        store.close()
    return v.problems


def test_a_new_version_over_a_locked_run_receipt_is_named(aws: Path) -> None:
    """The adversary holds s3:PutObject (the job role does) on the deploy template's bucket:
    Object Lock refuses to delete the honest receipt.json, but a plain PUT adds a newer
    version, which every reader gets. Here it says the run held nothing back (no legal-hold
    id in `ids_not_deleted`, `held` 0), digest recomputed. The older version is the
    evidence: verify, from the bucket alone and with the store, must fail naming the key."""
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="audit", ObjectLockEnabledForBucket=True)
        s3.put_object_lock_configuration(Bucket="audit", ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled",
            "Rule": {"DefaultRetention": {"Mode": "COMPLIANCE", "Days": 1}}})  # fmt: skip
        summary = run_local(RunConfig(dry_run=False, now=CUTOFF, store=f"sqlite:///{aws}",
                                      receipts="s3://audit/memlife"))  # fmt: skip
        assert summary.status == "success"
        key = f"runs/2026/11/01/{summary.run_id}/receipt.json"
        doc = json.loads(s3.get_object(Bucket="audit", Key=f"memlife/{key}")["Body"].read())
        assert doc["counts"]["held"] > 0 and doc["ids_not_deleted"]
        doc.pop("digest")
        doc["counts"]["held"], doc["ids_not_deleted"] = 0, []
        doc["digest"] = receipt_digest(doc)
        with pytest.raises(s3.exceptions.ClientError):  # the lock holds the honest version
            first = s3.list_object_versions(Bucket="audit", Prefix=f"memlife/{key}")
            s3.delete_object(Bucket="audit", Key=f"memlife/{key}",
                             VersionId=first["Versions"][0]["VersionId"])  # fmt: skip
        s3.put_object(Bucket="audit", Key=f"memlife/{key}", Body=json.dumps(doc).encode())
        sink = S3Sink("audit", "memlife")
        for evidence_only in (True, False):
            problems = _problems(sink, aws, summary.run_id, evidence_only)
            assert [p for p in problems if p.get("key") == key], (evidence_only, problems)


def _import_two(home: Path, tmp_path: Path) -> None:
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1")) + "\n" + json.dumps(good("m-2", subject="dogs")) + "\n")
    assert runner.invoke(app, ["import", str(src)]).exit_code == 0


def _receipt(receipts: Path, run_id: str) -> dict:
    (path,) = receipts.rglob(f"runs/*/*/*/{run_id}/receipt.json")
    return json.loads(path.read_text())


def test_two_spellings_of_one_receipts_folder_keep_one_chain(home: Path, tmp_path: Path) -> None:
    """The nights run with MEMLIFE_RECEIPTS absolute; an operator's erase names the same
    folder relatively (the default home is the relative `.memlife`). The adversary then
    removes the erase run whole (folder, dataset files, operation receipts). One folder is
    one location: the next night names the erase run before it, and its verify says the
    erase run is missing."""
    _import_two(home, tmp_path)
    night = json.loads(runner.invoke(app, ["run", "--engine", "local", "--json"]).stdout)
    receipts = home / "receipts"
    same = f"file://{os.path.relpath(receipts, Path.cwd())}"
    res = runner.invoke(app, ["erase", "--actor", "u-1", "--id", "m-1", "--yes", "--json",
                              "--receipts", same])  # fmt: skip
    assert res.exit_code == 0, res.output
    erased = json.loads(res.stdout)["run_id"]
    assert _receipt(receipts, erased)["previous_run"] == night["run_id"]
    res = runner.invoke(app, ["run", "--engine", "local", "--now", "2026-12-05T01:00:00Z",
                              "--allow-future-cutoff", "--json"])  # fmt: skip
    later = json.loads(res.stdout)["run_id"]
    for p in receipts.glob("operations/*.json"):
        if json.loads(p.read_text())["run_id"] == erased:
            p.unlink()
    (folder,) = receipts.rglob(f"runs/*/*/*/{erased}")
    shutil.rmtree(folder)
    for d in receipts.rglob(f"run_id={erased}"):
        shutil.rmtree(d)
    assert _receipt(receipts, later)["previous_run"] == erased
    res = runner.invoke(app, ["receipts", "verify", later, "--json"])
    assert res.exit_code == 1
    assert {"code": "PREVIOUS_RUN_MISSING", "previous_run": erased} in json.loads(res.stdout)[
        "problems"
    ]


def test_verify_sees_a_claim_past_the_first_thousand_operation_receipts(aws: Path) -> None:
    """ListObjectsV2 answers at most 1,000 keys a call. The adversary plants a receipt
    claiming the run under a key that sorts after 1,000 others in `operations/`: verify
    must follow the listing's continuation and name it (RECEIPT_NOT_IN_RUN)."""
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="audit")
        summary = run_local(RunConfig(dry_run=False, now=CUTOFF, store=f"sqlite:///{aws}",
                                      receipts="s3://audit/memlife"))  # fmt: skip
        sink = S3Sink("audit", "memlife")
        assert _problems(sink, aws, summary.run_id, evidence_only=True) == []
        for i in range(1000):  # another run's receipts, sorting before every real one
            s3.put_object(Bucket="audit", Key=f"memlife/{operation_key(f'op-0000-{i:04d}')}",
                          Body=b'{"run_id": "another-run"}')  # fmt: skip
        forged = {"run_id": summary.run_id, "record_id": "m-forged", "action": "delete"}
        s3.put_object(Bucket="audit", Key=f"memlife/{operation_key('op-zzzz')}",
                      Body=json.dumps(forged).encode())  # fmt: skip
        problems = _problems(sink, aws, summary.run_id, evidence_only=True)
        assert {"code": "RECEIPT_NOT_IN_RUN", "operation_id": "op-zzzz",
                "record_id": "m-forged"} in problems  # fmt: skip


def test_a_trailing_slash_on_the_receipts_prefix_names_the_same_evidence(aws: Path) -> None:
    """Over HTTP (moto server), the night writes to `s3://audit/memlife/` and the reviewer
    verifies with `s3://audit/memlife` (and the reverse spelling for the next run): one
    prefix, the same keys (`memlife/runs/...`, never `/memlife//`), and one run chain."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        s3.create_bucket(Bucket="audit")
        slash = f"s3://audit/memlife/?endpoint_url={endpoint}"
        plain = f"s3://audit/memlife?endpoint_url={endpoint}"
        first = run_local(RunConfig(dry_run=False, now=CUTOFF, store=f"sqlite:///{aws}",
                                    receipts=slash))  # fmt: skip
        keys = [o["Key"] for p in s3.get_paginator("list_objects_v2").paginate(Bucket="audit")
                for o in p.get("Contents", [])]  # fmt: skip
        assert f"memlife/runs/2026/11/01/{first.run_id}/receipt.json" in keys
        assert all(k.startswith("memlife/") and "//" not in k for k in keys)
        later = run_local(RunConfig(dry_run=False, now=CUTOFF.replace(day=2),
                                    store=f"sqlite:///{aws}", receipts=plain))  # fmt: skip
        for run_id, url in ((first.run_id, plain), (later.run_id, slash)):
            res = runner.invoke(app, ["receipts", "verify", run_id, "--receipts", url,
                                      "--store", f"sqlite:///{aws}", "--json"])  # fmt: skip
            assert res.exit_code == 0, res.output
        doc = json.loads(s3.get_object(
            Bucket="audit", Key=f"memlife/runs/2026/11/02/{later.run_id}/receipt.json")["Body"].read())  # fmt: skip
        assert doc["previous_run"] == first.run_id
    finally:
        server.stop()


def test_a_chained_receipts_policy_version_edited_is_named(tmp_path: Path) -> None:
    """The adversary edits one byte of one operation receipt: the policy version that
    authorised a delete (2026.11-default.4 -> .5). The chain moves, but a reviewer with
    forty receipts must learn which one: verify names the operation and the field, from
    the bucket alone and with the store."""
    from memlife.audit import FileSink
    from tests.support.evidence import copied_run, sealed_nightly_run, verify_problems

    ev = copied_run(sealed_nightly_run(tmp_path / "p"), tmp_path / "c")
    ev["sink"] = FileSink(ev["root"] / "receipts")
    victim = sorted((ev["root"] / "receipts" / "operations").glob("*.json"))[0]
    doc = json.loads(victim.read_text())
    edited = victim.read_text().replace(doc["policy_version"], doc["policy_version"][:-1] + "5")
    assert edited != victim.read_text()
    victim.write_text(edited)
    for evidence_only in (True, False):
        problems = verify_problems(ev, evidence_only)
        assert [p for p in problems if p.get("operation_id") == victim.stem
                and p.get("field") == "policy_version"], problems  # fmt: skip
