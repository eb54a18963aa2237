"""Session 47 (audit 47m): a seal adopting the Parquet a killed attempt left (memlife/evidence.py
`seal`, audit 47k: ``put_new(...) or sink.get(key) == body``) against an object at the
seal's key that the writer's role cannot read. A real night's operations and run secret,
the S3 receipt sink on moto; a 403 on the wire is raised where test_receipts_session47
raises it (botocore's before-send: a KMS key the role may not use)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from moto import mock_aws

from memlife.audit import ReceiptReadError, S3Sink
from memlife.evidence import seal
from memlife.journal import open_journal
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.lifecycle import CUTOFF
from tests.unit.test_receipts_session43 import aws  # noqa: F401 (fixture)
from tests.unit.test_receipts_session47 import DENIED, _Raw


@pytest.fixture()
def bucket(aws: Path) -> Iterator[tuple[Any, set[str]]]:  # noqa: F811
    """A bucket and the keys whose GetObject answers 403 AccessDenied."""
    with mock_aws():
        session = boto3.Session()
        denied: set[str] = set()

        def deny(request: Any, **_: Any) -> AWSResponse | None:
            path = unquote(urlparse(request.url).path).lstrip("/")
            if path.removeprefix("audit/") in denied:  # path or virtual-host style
                return AWSResponse(request.url, 403, {}, _Raw(DENIED))
            return None

        session.events.register("before-send.s3.GetObject", deny)
        client = session.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="audit")
        yield client, denied


# fmt: skip
def test_an_unreadable_object_at_the_seals_key_does_not_stop_the_seal(
    aws: Path,  # noqa: F811
    bucket: tuple[Any, set[str]],
) -> None:
    """A killed attempt left `operations.parquet` written under a KMS key the rerun's role
    may not use (or another account planted one there: a create-only bucket allows a new
    key). Before audit 47k the seal went on to `operations.2.parquet`. Must hold: the seal
    still seals the run under a name it wrote itself, never raising on what it cannot read."""
    client, denied = bucket
    night = run_local(RunConfig(dry_run=False, now=CUTOFF, store=f"sqlite:///{aws}"))
    with SqliteStore(aws) as store:
        journal = open_journal(store)
        ops, secret = journal.by_run(night.run_id), journal.run_secret()
    assert ops
    prefix = f"runs/2026/11/01/{night.run_id}"
    client.put_object(Bucket="audit", Key=f"m/{prefix}/operations.parquet", Body=b"PAR1 other")
    denied.add(f"m/{prefix}/operations.parquet")
    sink = S3Sink("audit", "m", client=client)
    with pytest.raises(ReceiptReadError):  # the role cannot read what is there
        sink.get(f"{prefix}/operations.parquet")
    evidence = seal(sink, prefix, ops, secret=secret)
    assert evidence["parquet_key"] == f"{prefix}/operations.2.parquet", evidence
