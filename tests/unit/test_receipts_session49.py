"""Audit 49g (session 49): a night's receipts in S3 when the bucket drops an answer, and when
a bucket writer fills the night's folder before the night runs.

Real components: the SQLite store, the nightly run (``run_local``), moto S3 served over HTTP
(``ThreadedMotoServer``) and in process, boto3, ``receipts verify``. The only thing mocked is
the network: one PUT whose answer never comes back (the object is stored, the client reads
a timeout and retries, as botocore's standard mode does)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
import urllib3
from botocore.exceptions import ReadTimeoutError
from moto import mock_aws
from moto.server import ThreadedMotoServer

from memlife.audit import FileSink, ReceiptWriteError, S3Sink, dumps
from memlife.journal import open_journal
from memlife.model import MemoryRecord
from memlife.pipeline import RunConfig, run_local
from memlife.review import verify_run
from memlife.run_start import start_run
from memlife.stores.sqlite import SqliteStore
from tests.support.lifecycle import snapshot

NOW = datetime(2026, 11, 1, tzinfo=UTC)


def rec(rid: str, actor: str, **kw: object) -> MemoryRecord:
    return MemoryRecord.model_validate({
        "id": rid, "actor_id": actor, "namespace": f"/users/{actor}/facts",
        "memory_type": "semantic", "content": f"Fact {rid} about the weekly meeting.",
        "created_at": NOW - timedelta(days=40), "source": "agent_inferred", "confidence": 0.8,
        **kw,
    })  # fmt: skip


@pytest.fixture()
def aws_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The home's store with an expired record in an enforced namespace (a delete the
    night owes) and one to keep; AWS credentials for moto; a fresh default boto3 session
    (the receipts sink's client is made from it), so a test's hook stays in the test."""
    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                 "AWS_DEFAULT_REGION": "us-east-1"}.items():  # fmt: skip
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", boto3.Session())
    home.mkdir(parents=True, exist_ok=True)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("a-1", "u-1", expires_at=NOW - timedelta(days=1)), rec("a-2", "u-1")])
    return home


@pytest.fixture()
def endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        url = f"http://{host}:{port}"
        boto3.client("s3", endpoint_url=url, region_name="us-east-1").create_bucket(Bucket="audit")
        yield url
    finally:
        server.stop()


def _problems(sink: Any, home: Path, run_id: str) -> list[dict[str, Any]]:
    with SqliteStore(home / "memlife.db") as store:
        return verify_run(sink, store, open_journal(store), run_id).problems


def _partial_failure(home: Path) -> None:
    """u-2's shard holds a row that does not decode: the night is a partial failure (its
    receipt is one a rerun may follow, ``run_receipts.FOLLOWED``)."""
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("b-1", "u-2")])
        store.connection.execute("UPDATE records SET memory_type='bogus' WHERE id='b-1'")


def _lose_answer_of(suffix: str) -> list[str]:
    """The first PUT of a key ending in ``suffix`` reaches the bucket, and its answer is
    lost: the client reads a timeout and botocore retries the PUT, which now meets its own
    object (If-None-Match: 412)."""
    lost: list[str] = []
    http = urllib3.PoolManager()

    def drop(request: Any, **_: Any) -> None:
        if request.url.split("?")[0].endswith(suffix) and not lost:
            http.request(request.method, request.url, body=request.body,
                         headers=dict(request.headers))  # fmt: skip
            lost.append(request.url)
            raise ReadTimeoutError(endpoint_url=request.url)

    boto3.DEFAULT_SESSION.events.register("before-send.s3.PutObject", drop)
    return lost


def _receipt_keys(sink: S3Sink, run_id: str) -> list[str]:
    return sorted(k for k in sink.list("runs/") if run_id in k and "/receipt" in k)


def test_a_receipt_put_whose_answer_is_lost_is_written_once(aws_home: Path, endpoint: str) -> None:
    """Over HTTP, the night's run receipt reaches S3 but its answer times out; botocore
    retries and S3 answers 412 (the key is there: the night's own receipt). A partial
    failure's receipt is one a rerun follows, so the night took its own receipt for an
    earlier attempt's and wrote the same receipt again as receipt.2.json, whose
    ``previous_receipt_sha256`` (none: sealed before any receipt) breaks the chain. The
    night wrote one receipt: one key, and verify clean."""
    _partial_failure(aws_home)
    lost = _lose_answer_of("/receipt.json")
    night = run_local(RunConfig(dry_run=False, now=NOW,
                                receipts=f"s3://audit/memlife?endpoint_url={endpoint}"))  # fmt: skip
    assert night.status == "partial_failure" and lost
    sink = S3Sink("audit", "memlife", endpoint_url=endpoint)
    assert [k.rsplit("/", 1)[1] for k in _receipt_keys(sink, night.run_id)] == ["receipt.json"]
    assert _problems(sink, aws_home, night.run_id) == []


def test_control_a_partial_failure_without_a_lost_answer_has_one_receipt(
    aws_home: Path, endpoint: str
) -> None:
    _partial_failure(aws_home)
    night = run_local(RunConfig(dry_run=False, now=NOW,
                                receipts=f"s3://audit/memlife?endpoint_url={endpoint}"))  # fmt: skip
    assert night.status == "partial_failure"
    sink = S3Sink("audit", "memlife", endpoint_url=endpoint)
    assert len(_receipt_keys(sink, night.run_id)) == 1
    assert _problems(sink, aws_home, night.run_id) == []


def _night_folder(tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """The folder and manifest the coming night will have, as a bucket writer derives them
    (run ids hash the policy, which the bucket keeps, the cutoff and the store): here by
    starting the same night against a scratch folder."""
    scratch = FileSink(tmp_path / "scratch")
    ctx = start_run(RunConfig(dry_run=False, now=NOW), sink=scratch)
    return ctx.prefix, json.loads(scratch.get(f"{ctx.prefix}/manifest.json") or b"{}")


def test_a_receipt_planted_before_the_night_is_refused(aws_home: Path, tmp_path: Path) -> None:
    """A bucket writer puts ``receipt.json`` (status success, 7 deletes) in the coming
    night's folder. The night wrote its manifest fresh, so no attempt of it wrote that
    receipt; it took it for its own completed attempt, deleted nothing it owed (a-1 is past
    its deadline), and said success, deleted 7. Refused before any change, naming the key."""
    prefix, _ = _night_folder(tmp_path)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="audit")
        forged = {"run_id": prefix.rsplit("/", 1)[1], "status": "success",
                  "counts": {"deleted": 7}}  # fmt: skip
        s3.put_object(Bucket="audit", Key=f"memlife/{prefix}/receipt.json", Body=dumps(forged))
        with pytest.raises(ReceiptWriteError, match="receipt.json"):
            run_local(RunConfig(dry_run=False, now=NOW, receipts="s3://audit/memlife"))
    assert "a-1" in snapshot(aws_home / "memlife.db")  # nothing changed: refused first


def test_a_manifest_planted_before_the_night_is_refused(aws_home: Path, tmp_path: Path) -> None:
    """A bucket writer puts the coming night's ``manifest.json`` first, naming another policy
    version, cutoff and scope. Create-only, the night's own manifest could never be written;
    the night sealed the planted one (``manifest_sha256``), and verify said verified while
    every reader showed the forged policy. Refused before any change, naming the fields."""
    prefix, manifest = _night_folder(tmp_path)
    manifest.update(policy_version="2026.01-legal-approved", scope={"actors": ["u-9"],
                    "namespaces": []})  # fmt: skip
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="audit")
        s3.put_object(Bucket="audit", Key=f"memlife/{prefix}/manifest.json", Body=dumps(manifest))
        with pytest.raises(ReceiptWriteError, match="policy_version, scope"):
            run_local(RunConfig(dry_run=False, now=NOW, receipts="s3://audit/memlife"))
    assert "a-1" in snapshot(aws_home / "memlife.db")


def test_control_a_rerun_of_the_night_keeps_its_own_manifest(
    aws_home: Path, tmp_path: Path
) -> None:
    """The same night twice (the same run id): the second meets the first's manifest and
    receipt, its own run's, and goes on as a rerun of a completed run; the first verifies."""
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="audit")
        night = RunConfig(dry_run=False, now=NOW, receipts="s3://audit/memlife")
        first = run_local(night)
        assert first.status == "success" and "a-1" not in snapshot(aws_home / "memlife.db")
        again = run_local(night)
        assert again.run_id == first.run_id and again.status == "success"
        assert _problems(S3Sink("audit", "memlife"), aws_home, first.run_id) == []


def _night_with_manifest(tmp_path: Path, home: Path, **forged: object) -> tuple[FileSink, str]:
    """The night, then its manifest as a planted one left it before this audit's fix: the
    run sealed whatever manifest it found (its ``manifest_sha256`` names that one), so the
    end state is a manifest saying ``forged`` under a receipt whose digest covers it."""
    from memlife.evidence import sealed, sha256

    sink = FileSink(tmp_path / "receipts")
    night = run_local(RunConfig(dry_run=False, now=NOW, receipts=f"file://{sink.root}"))
    assert night.status == "success"
    (folder,) = {k.rsplit("/", 1)[0] for k in sink.list("runs/") if night.run_id in k}
    manifest = json.loads(sink.get(f"{folder}/manifest.json") or b"{}")
    body = dumps({**manifest, **forged})
    (sink.root / folder / "manifest.json").write_bytes(body)
    receipt = json.loads(sink.get(f"{folder}/receipt.json") or b"{}")
    receipt["evidence"]["manifest_sha256"] = sha256(body)
    receipt.pop("digest")
    (sink.root / folder / "receipt.json").write_bytes(dumps(sealed(receipt)))
    return sink, night.run_id


def test_a_sealed_manifest_that_disagrees_with_its_receipt_is_named(
    aws_home: Path, tmp_path: Path
) -> None:
    """Evidence a planted manifest left before the fix: the run's receipt says the policy it
    applied, the manifest it sealed says another. Verify (evidence alone and with the
    store) names the field."""
    sink, run_id = _night_with_manifest(tmp_path, aws_home, policy_version="2026.01-legal-approved")
    problems = _problems(sink, aws_home, run_id)
    assert {(p["code"], p.get("field")) for p in problems} == {
        ("MANIFEST_FIELD_MISMATCH", "policy_version")
    }


def test_control_a_sealed_manifest_differing_only_in_its_attempts_fields_verifies(
    aws_home: Path, tmp_path: Path
) -> None:
    """What attempts of one run may write differently (when it started, memlife's version)
    is no finding."""
    sink, run_id = _night_with_manifest(tmp_path, aws_home, started_at="2026-11-01T00:00:01+00:00",
                                        memlife_version="0.0.9")  # fmt: skip
    assert _problems(sink, aws_home, run_id) == []
