"""Audit 51g (session 51): receipts on S3 against a bucket that throttles and a bucket writer.

Real components: the SQLite store, a night run with its receipts on moto S3, boto3, the
verifier. S3's own answers (SlowDown 503, AccessDenied 403) are put on the wire boundary of
the reader's boto3 client (a ``before-call`` handler answers in S3's place, as a client whose
retries are spent sees it)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from moto import mock_aws

from memlife.audit import S3Sink
from memlife.evidence import receipt_digest
from memlife.pipeline import RunConfig, run_local
from memlife.review import verify_run
from tests.support.lifecycle import CUTOFF, seed


@pytest.fixture()
def aws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A seeded store under an isolated home, AWS credentials for moto."""
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    db = tmp_path / "home" / "memlife.db"
    seed(db, records=120)
    yield db


def _answer(code: str, status: int) -> Any:
    """A before-call handler: S3 answers ``code`` (the client's retries spent)."""

    def handler(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        http = AWSResponse("https://audit.s3.amazonaws.com/", status, {}, None)
        return (http, {"Error": {"Code": code, "Message": code},
                       "ResponseMetadata": {"HTTPStatusCode": status}})  # fmt: skip

    return handler


def _forged_night(db: Path) -> tuple[S3Sink, str, str]:
    """A night on a versioned bucket, then a newer version of its receipt.json that drops
    what the night held back (digest recomputed): the attack of audit 43e. Returns a reader's
    sink, the run id and the receipt's key."""
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="audit")
    s3.put_bucket_versioning(Bucket="audit", VersioningConfiguration={"Status": "Enabled"})
    summary = run_local(RunConfig(dry_run=False, now=CUTOFF, store=f"sqlite:///{db}",
                                  receipts="s3://audit/memlife"))  # fmt: skip
    assert summary.status == "success"
    key = f"runs/2026/11/01/{summary.run_id}/receipt.json"
    doc = json.loads(s3.get_object(Bucket="audit", Key=f"memlife/{key}")["Body"].read())
    doc.pop("digest")
    doc["counts"]["held"], doc["ids_not_deleted"] = 0, []
    doc["digest"] = receipt_digest(doc)
    s3.put_object(Bucket="audit", Key=f"memlife/{key}", Body=json.dumps(doc).encode())
    return S3Sink("audit", "memlife"), summary.run_id, key


def test_a_throttled_version_listing_does_not_verify_a_forged_receipt(aws: Path) -> None:
    """S3 throttles a prefix under load (SlowDown, 503), and a bucket writer can cause that
    load. `S3Sink.overwritten` read every error of ListObjectVersions as "this role may not
    list versions" (documented: the check is skipped), so under throttling verify said
    "verified" for a receipt.json overwritten by a newer version."""
    with mock_aws():
        sink, run_id, key = _forged_night(aws)
        sink.client.meta.events.register(
            "before-call.s3.ListObjectVersions", _answer("SlowDown", 503)
        )
        v = verify_run(sink, None, None, run_id, evidence_only=True)
        assert not v.ok, "a forged receipt verified while the version check was throttled"
        assert any(p.get("error") == "SlowDown" for p in v.problems), v.problems


def test_control_the_forged_receipt_is_named_when_versions_list(aws: Path) -> None:
    with mock_aws():
        sink, run_id, key = _forged_night(aws)
        v = verify_run(sink, None, None, run_id, evidence_only=True)
        assert {"code": "EVIDENCE_OVERWRITTEN", "key": key} in v.problems, v.problems


def test_control_a_role_without_list_versions_skips_the_check_as_documented(aws: Path) -> None:
    """docs/receipts.md: EVIDENCE_OVERWRITTEN "needs s3:ListBucketVersions, skipped without it"."""
    with mock_aws():
        sink, run_id, _ = _forged_night(aws)
        sink.client.meta.events.register(
            "before-call.s3.ListObjectVersions", _answer("AccessDenied", 403)
        )
        v = verify_run(sink, None, None, run_id, evidence_only=True)
        assert v.ok, v.problems


def test_a_version_listing_cut_by_the_network_is_named_not_a_crash(aws: Path) -> None:
    """Session 51 review: a connection-level failure (no answer at all) of the version
    listing escaped `S3Sink.overwritten` as a bare botocore error and stopped the whole
    verification. What must hold: named as EVIDENCE_UNREADABLE, the run not verified."""
    from botocore.exceptions import EndpointConnectionError

    def cut(**_: Any) -> None:
        raise EndpointConnectionError(endpoint_url="https://audit.s3.amazonaws.com/")

    with mock_aws():
        sink, run_id, key = _forged_night(aws)
        sink.client.meta.events.register("before-call.s3.ListObjectVersions", cut)
        v = verify_run(sink, None, None, run_id, evidence_only=True)
        assert not v.ok
        assert any(
            p.get("code") == "EVIDENCE_UNREADABLE" and p.get("error") == "EndpointConnectionError"
            for p in v.problems
        ), v.problems
