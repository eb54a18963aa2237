"""Audit 53g (session 53): receipts on S3 read back under a throttling or failing bucket.

Audit 51g and the session 51 review named S3's answers to ListObjectVersions (SlowDown,
a cut connection) as EVIDENCE_UNREADABLE. The sink's two other reads were left as they
were: a throttled ListObjectsV2 (``S3Sink.list``: verify lists ``operations/`` and
``deferrals/`` and the run folder; ``receipts list`` and ``history`` list ``runs/`` and the
dataset) raised a bare botocore ``ClientError``, and a GET the network cut
(``S3Sink.get``) a bare ``EndpointConnectionError``: ``verify_run`` stopped with a
traceback-class error naming no key, and ``fetch_listed``'s per-object RECEIPT_UNREADABLE
(one unreadable object must not stop the other checks) never applied, nor verify_run's
EVIDENCE_UNREADABLE.

Real components: the SQLite store, a night with its receipts on moto S3, boto3, the
verifier. S3's answers are put on the wire boundary of the reader's boto3 client (a
``before-call`` handler answers in S3's place, as a client whose retries are spent sees it),
as tests/unit/test_receipts_s3_session51g.py does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import EndpointConnectionError
from moto import mock_aws

from memlife.audit import ReceiptReadError, S3Sink
from memlife.pipeline import RunConfig, run_local
from memlife.review import verify_run
from tests.support.lifecycle import CUTOFF, seed


@pytest.fixture()
def aws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    db = tmp_path / "home" / "memlife.db"
    seed(db, records=120)
    yield db


def _answer(code: str, status: int) -> Any:
    def handler(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        http = AWSResponse("https://audit.s3.amazonaws.com/", status, {}, None)
        return (http, {"Error": {"Code": code, "Message": code},
                       "ResponseMetadata": {"HTTPStatusCode": status}})  # fmt: skip

    return handler


def _night(db: Path) -> tuple[S3Sink, str]:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="audit")
    summary = run_local(RunConfig(dry_run=False, now=CUTOFF, store=f"sqlite:///{db}",
                                  receipts="s3://audit/memlife"))  # fmt: skip
    assert summary.status == "success"
    return S3Sink("audit", "memlife"), summary.run_id


def _operation_keys(sink: S3Sink) -> list[str]:
    return list(sink.list("operations/"))


def test_a_throttled_listing_is_named_not_a_crash(aws: Path) -> None:
    """SlowDown (503) on ListObjectsV2, which a bucket writer can provoke: verify must name
    the evidence it could not read (EVIDENCE_UNREADABLE, SlowDown) and not pass the run."""
    with mock_aws():
        sink, run_id = _night(aws)
        sink.client.meta.events.register("before-call.s3.ListObjectsV2", _answer("SlowDown", 503))
        v = verify_run(sink, None, None, run_id, evidence_only=True)
        assert not v.ok
        assert any(
            p.get("code") == "EVIDENCE_UNREADABLE" and p.get("error") == "SlowDown"
            for p in v.problems
        ), v.problems


def test_a_listing_cut_by_the_network_is_a_receipt_read_error(aws: Path) -> None:
    """The sink's own contract: what does not read is a ReceiptReadError naming the prefix."""

    def cut(**_: Any) -> None:
        raise EndpointConnectionError(endpoint_url="https://audit.s3.amazonaws.com/")

    with mock_aws():
        sink, _ = _night(aws)
        sink.client.meta.events.register("before-call.s3.ListObjectsV2", cut)
        with pytest.raises(ReceiptReadError) as caught:
            list(sink.list("runs/"))
        assert caught.value.code == "EndpointConnectionError"
        assert caught.value.key == "runs/"


def test_one_receipt_get_cut_by_the_network_is_named_not_a_crash(aws: Path) -> None:
    """One operation receipt whose GET gets no answer at all: RECEIPT_UNREADABLE naming it
    (as a 403 on it is, audit 47i), never the end of every other check."""
    with mock_aws():
        sink, run_id = _night(aws)
        victim = _operation_keys(sink)[0].rsplit("/", 1)[-1]

        def cut(params: dict[str, Any], **_: Any) -> None:
            # before-call sees the request as sent: the key is in its URL path
            if str(params.get("url_path", "")).endswith(victim):
                raise EndpointConnectionError(endpoint_url="https://audit.s3.amazonaws.com/")

        sink.client.meta.events.register("before-call.s3.GetObject", cut)
        v = verify_run(sink, None, None, run_id, evidence_only=True)
        assert not v.ok
        codes = {p["code"] for p in v.problems}
        assert codes & {"RECEIPT_UNREADABLE", "EVIDENCE_UNREADABLE"}, v.problems
        assert any(p.get("error") == "EndpointConnectionError" for p in v.problems), v.problems


def test_control_the_untouched_night_verifies_and_lists(aws: Path) -> None:
    with mock_aws():
        sink, run_id = _night(aws)
        assert _operation_keys(sink)
        v = verify_run(sink, None, None, run_id, evidence_only=True)
        assert v.ok, v.problems


def test_control_a_missing_key_is_still_none(aws: Path) -> None:
    """NoSuchKey stays "not there" (None), not a read error."""
    with mock_aws():
        sink, _ = _night(aws)
        assert sink.get("operations/op-none.json") is None
