"""Audit 44a (session 44): `receipts verify` over a versioned receipts bucket where the adversary, who
may not delete a locked version, hides the run's receipt behind a delete marker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from memlife.audit import S3Sink
from memlife.pipeline import RunConfig, run_local
from memlife.review import verify_run
from memlife.stores.sqlite import SqliteStore
from tests.support.lifecycle import CUTOFF, seed


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


def test_a_delete_marker_over_a_run_receipt_is_named_overwritten(aws: Path) -> None:
    """The bucket is versioned (Object Lock needs it); the adversary's plain DELETE adds a
    delete marker over receipt.json, so every reader of the current version finds none.
    The honest version is still there: verify from the bucket alone must name the key as
    EVIDENCE_OVERWRITTEN (S3Sink.overwritten counts delete markers as versions)."""
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="audit")
        s3.put_bucket_versioning(Bucket="audit", VersioningConfiguration={"Status": "Enabled"})
        summary = run_local(RunConfig(dry_run=False, now=CUTOFF, store=f"sqlite:///{aws}",
                                      receipts="s3://audit/memlife"))  # fmt: skip
        key = f"runs/2026/11/01/{summary.run_id}/receipt.json"
        s3.delete_object(Bucket="audit", Key=f"memlife/{key}")  # a marker, no version id
        with SqliteStore(aws) as store:
            v = verify_run(S3Sink("audit", "memlife"), store, None, summary.run_id,
                           evidence_only=True)  # fmt: skip
        assert {"code": "EVIDENCE_OVERWRITTEN", "key": key} in v.problems, v.problems
