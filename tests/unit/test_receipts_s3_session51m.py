"""Audit 51m (session 51 mutation pass): which refusals of ListObjectVersions skip the
overwrite check (audit 51g's ``_VERSIONS_NOT_LISTABLE``).

The session's tests answer SlowDown (a finding) and AccessDenied (skipped). Two mutants
lived: "anything but SlowDown skips" (a 500 InternalError, the other answer S3 gives a
reader under load, was again read as "may not list versions": a receipt overwritten since
verified as unchecked-and-fine), and NotImplemented dropped from the skip list (an
S3-compatible endpoint without the call, which docs/receipts.md's skip covers, had every
verify fail EVIDENCE_UNREADABLE). ``S3Sink.overwritten`` on moto S3, S3's answer put on the
client's wire boundary as in test_receipts_s3_session51g.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from memlife.audit import S3Sink
from memlife.errors import ReceiptReadError
from tests.unit.test_receipts_s3_session51g import _answer


@pytest.fixture()
def sink(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Sink]:
    """A versioned bucket holding one object written twice (an overwrite)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="audit")
        s3.put_bucket_versioning(Bucket="audit", VersioningConfiguration={"Status": "Enabled"})
        for body in (b"first", b"second"):
            s3.put_object(Bucket="audit", Key="memlife/runs/r-1/receipt.json", Body=body)
        yield S3Sink("audit", "memlife")


@pytest.mark.parametrize(("code", "status"), [("InternalError", 500), ("ServiceUnavailable", 503)])
def test_a_failed_version_listing_is_unreadable_not_skipped(
    sink: S3Sink, code: str, status: int
) -> None:
    """S3's 500 (and a 503 other than SlowDown) say nothing about the role's rights: the
    check was not made, so it is a ReceiptReadError (EVIDENCE_UNREADABLE), never None."""
    sink.client.meta.events.register("before-call.s3.ListObjectVersions", _answer(code, status))
    with pytest.raises(ReceiptReadError) as info:
        sink.overwritten("runs/")
    assert info.value.code == code


@pytest.mark.parametrize(("code", "status"), [("AccessDenied", 403), ("NotImplemented", 501)])
def test_control_a_reader_that_cannot_list_versions_skips_the_check(
    sink: S3Sink, code: str, status: int
) -> None:
    """No s3:ListBucketVersions, or an endpoint without the call: skipped, as documented."""
    sink.client.meta.events.register("before-call.s3.ListObjectVersions", _answer(code, status))
    assert sink.overwritten("runs/") is None


def test_control_a_listing_names_the_overwritten_key(sink: S3Sink) -> None:
    assert sink.overwritten("runs/") == ("runs/r-1/receipt.json",)
