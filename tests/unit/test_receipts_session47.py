"""Session 47 (audit 47i): receipts as a compliance reviewer's adversary sees them (moto S3 over HTTP,
the file sink, the real `memlife receipts` CLI).

A sealed nightly run is copied into a bucket served by moto over HTTP; the adversary adds
or edits what a create-only (Object Lock) bucket still lets a writer add, or a reviewer's
role cannot read, and the reviewer runs `receipts verify` / `receipts list`."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from moto.server import ThreadedMotoServer

from memlife.pipeline import RunConfig, run_local
from memlife.stores.base import BatchResult, ItemFailure
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.support.evidence import sealed_nightly_run
from tests.support.gate import NOW, rec
from tests.support.records import good


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return sealed_nightly_run(tmp_path_factory.mktemp("audit47i"))


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.body


DENIED = (
    b'<?xml version="1.0" encoding="UTF-8"?>'
    b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
)


@pytest.fixture()
def s3(
    pristine: dict, endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict]:
    """The pristine run's receipts in a fresh bucket of the moto server; ``denied``: keys
    whose GetObject answers 403 AccessDenied on the wire (an object written under a KMS key
    the reviewer's role may not use)."""
    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                 "AWS_DEFAULT_REGION": "us-east-1"}.items():  # fmt: skip
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path / "home"))
    session = boto3.Session()
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", session)  # every client the CLI makes
    denied: set[str] = set()
    bucket = tmp_path.name.lower().replace("_", "-")[-40:].strip("-")

    def deny(request: Any, **_: Any) -> AWSResponse | None:
        if unquote(urlparse(request.url).path).removeprefix(f"/{bucket}/") in denied:
            return AWSResponse(request.url, 403, {"Content-Type": "application/xml"}, _Raw(DENIED))
        return None

    session.events.register("before-send.s3.GetObject", deny)
    client = session.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    client.create_bucket(Bucket=bucket)
    root = pristine["base"] / "receipts"
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        client.put_object(Bucket=bucket, Key=f"m/{f.relative_to(root).as_posix()}",
                          Body=f.read_bytes())  # fmt: skip
    yield {"client": client, "bucket": bucket, "run_id": pristine["run_id"], "denied": denied,
           "url": f"s3://{bucket}/m?endpoint_url={endpoint}",
           "folder": pristine["receipt"].parent.relative_to(root).as_posix()}  # fmt: skip


def _put(s3: dict, key: str, body: bytes) -> None:
    s3["client"].put_object(Bucket=s3["bucket"], Key=f"m/{key}", Body=body)


def _get(s3: dict, key: str) -> bytes:
    body: bytes = s3["client"].get_object(Bucket=s3["bucket"], Key=f"m/{key}")["Body"].read()
    return body


def _verify(s3: dict, run_id: str | None = None) -> tuple[int, dict | None, str]:
    code, out, err = invoke("receipts", "verify", run_id or s3["run_id"], "--evidence-only",
                            "--receipts", s3["url"], "--json")  # fmt: skip
    return code, json.loads(out) if out.strip() else None, err


def _an_operation_receipt(s3: dict) -> tuple[str, dict]:
    page = s3["client"].list_objects_v2(Bucket=s3["bucket"], Prefix="m/operations/")
    key = page["Contents"][0]["Key"].removeprefix("m/")
    return key, json.loads(_get(s3, key))


def test_the_untouched_copy_verifies_over_http(s3: dict) -> None:
    """The control: the copied run verifies clean from the bucket alone."""
    code, doc, err = _verify(s3)
    assert code == 0 and doc is not None and doc["ok"], (doc, err)


@pytest.mark.parametrize("where", ["operations/copy/{}", "operations//{}"])
def test_a_receipt_of_the_run_copied_under_a_nested_key_is_named(s3: dict, where: str) -> None:
    """The adversary (PutObject on a create-only bucket: a new key is allowed) copies one of
    the run's operation receipts under a nested key, saying the record was never deleted
    (`outcome: failed`) and naming another record. The bucket now holds two accounts of
    one operation that claim the run, and only one is in its Parquet: verify must name the
    extra one (RECEIPT_NOT_IN_RUN), as it does a copy under any other name."""
    key, doc = _an_operation_receipt(s3)
    name = key.rsplit("/", 1)[1]
    _put(
        s3, where.format(name), json.dumps(doc | {"outcome": "failed", "record_id": "m-x"}).encode()
    )
    code, found, err = _verify(s3)
    assert code == 1 and found is not None, err
    assert "RECEIPT_NOT_IN_RUN" in {p["code"] for p in found["problems"]}


def test_an_unreadable_object_under_operations_is_named_and_the_rest_verified(s3: dict) -> None:
    """One object under `operations/` answers 403 (written with a KMS key the reviewer's
    role may not use, or planted by another account). Verify lists every operation receipt
    of the bucket to find those claiming the run, so one such object must be a named
    problem (RECEIPT_UNREADABLE with its key), with the run's own checks still reported,
    not `error: AccessDenied` for every run of the bucket."""
    _put(s3, "operations/op-zz-other-key.json", b'{"run_id": "another-run"}')
    s3["denied"].add("m/operations/op-zz-other-key.json")
    code, found, err = _verify(s3)
    assert code == 1 and found is not None, err
    assert [p for p in found["problems"] if p.get("key") == "operations/op-zz-other-key.json"]
    assert found["operations"] > 0


def test_receipts_list_names_a_run_it_cannot_read_and_lists_the_others(s3: dict) -> None:
    """A run folder whose manifest answers 403: `receipts list` must still list the real
    run (as it does since audit 45d for a receipt that does not parse), not end with
    `error: AccessDenied` for the whole bucket."""
    other = f"{s3['folder'].rsplit('/', 1)[0]}/20261101T130000Z-apply-0000000000"
    _put(s3, f"{other}/manifest.json", b'{"run_id": "20261101T130000Z-apply-0000000000"}')
    s3["denied"].add(f"m/{other}/manifest.json")
    code, out, err = invoke("receipts", "list", "--receipts", s3["url"], "--json")
    assert code == 0, err
    assert s3["run_id"] in [r["run_id"] for r in json.loads(out)]


def test_verify_names_its_own_receipt_it_cannot_read(s3: dict) -> None:
    """The run's own receipt.json answers 403: verify must fail naming the key, not stop
    with a bare AccessDenied and no problem code."""
    s3["denied"].add(f"m/{s3['folder']}/receipt.json")
    code, found, err = _verify(s3)
    assert code == 1 and found is not None, err
    assert [p for p in found["problems"] if p.get("key") == f"{s3['folder']}/receipt.json"]


# --- deferral receipts (file sink, the real CLI) ------------------------------------------


@pytest.fixture()
def deferral(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """An erasure of a held record asked for by a named operator, deferred: its run id and
    its deferral receipt."""
    monkeypatch.setenv("MEMLIFE_OPERATOR", "alice@legal")
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1", retention_class="legal_hold")) + "\n")
    assert invoke("import", str(src))[0] == 0
    code, out, err = invoke("erase", "--actor", "u-1", "--id", "m-1", "--yes", "--json")
    assert code == 0, out + err
    (receipt,) = (home / "receipts" / "deferrals").glob("*.json")
    assert json.loads(receipt.read_text())["reviewer_identity"] == "alice@legal"
    return json.loads(out)["run_id"], receipt


@pytest.mark.parametrize("only", [(), ("--evidence-only",)])
def test_a_deferral_receipt_naming_another_requester_is_named(
    deferral: tuple[str, Path], only: tuple[str, ...]
) -> None:
    """Who asked for an erasure a hold deferred is what a regulator asks (session 47c: the
    deferral receipt names them; the run's manifest says `requested_by`). The adversary
    rewrites the deferral receipt to name someone else: verify must name the field."""
    run_id, receipt = deferral
    doc = json.loads(receipt.read_text())
    receipt.write_text(json.dumps(doc | {"reviewer_identity": "mallory@elsewhere"}))
    code, out, _ = invoke("receipts", "verify", run_id, "--json", *only)
    assert code == 1, out
    assert {(p["code"], p.get("field")) for p in json.loads(out)["problems"]} == {
        ("DEFERRAL_FIELD_MISMATCH", "reviewer_identity")
    }


@pytest.mark.parametrize("only", [(), ("--evidence-only",)])
def test_a_deferral_receipt_duplicated_under_a_nested_key_is_named(
    deferral: tuple[str, Path], only: tuple[str, ...]
) -> None:
    """A copy of the run's deferral receipt under `deferrals/x/`, saying the record was
    deleted: a second account of the deferral that claims the run, outside its Parquet."""
    run_id, receipt = deferral
    doc = json.loads(receipt.read_text())
    (receipt.parent / "x").mkdir()
    (receipt.parent / "x" / receipt.name).write_text(json.dumps(doc | {"outcome": "deleted"}))
    code, out, _ = invoke("receipts", "verify", run_id, "--json", *only)
    assert code == 1, out
    assert "DEFERRAL_NOT_IN_RUN" in {p["code"] for p in json.loads(out)["problems"]}


# --- an operation receipted after its run was sealed ----------------------------------------

EXPIRED = rec("m-old", "facts", "Parked in row 4.", subject="parking", expires=NOW - timedelta(days=2))  # fmt: skip


@pytest.fixture()
def retried(home: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """Night 1's delete is throttled (the run sealed without its receipt); night 2's retry
    queue deletes the record and writes the receipt: night 1's id and that receipt."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    home.mkdir()
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([EXPIRED])
    real = SqliteStore.delete_many

    def throttled(self: SqliteStore, ids: Any, **_: Any) -> BatchResult:
        return BatchResult(failed=[ItemFailure(i, "THROTTLED") for i in ids])

    monkeypatch.setattr(SqliteStore, "delete_many", throttled)
    first = run_local(RunConfig(dry_run=False, now=NOW))
    monkeypatch.setattr(SqliteStore, "delete_many", real)
    run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=1)))
    (late,) = [p for p in (home / "receipts" / "operations").glob("*.json")
               if json.loads(p.read_text())["record_id"] == "m-old"]  # fmt: skip
    return first.run_id, late


@pytest.mark.parametrize("only", [(), ("--evidence-only",)])
def test_the_policy_of_a_delete_receipted_after_the_seal_edited_is_named(
    retried: tuple[str, Path], only: tuple[str, ...]
) -> None:
    """The policy that authorised a delete (audit 43e named its edit on a chained receipt)
    is in the run's sealed row for an operation a later night receipted too; that receipt
    is in no chain, so its fields are all the evidence holds: an edit must be named."""
    run_id, late = retried
    assert invoke("receipts", "verify", run_id, "--json", *only)[0] == 0
    doc = json.loads(late.read_text())
    late.write_text(json.dumps(doc | {"policy_version": "2025.01-lax"}))
    code, out, _ = invoke("receipts", "verify", run_id, "--json", *only)
    assert code == 1, out
    assert {"code": "RECEIPT_FIELD_MISMATCH", "operation_id": late.stem, "field": "policy_version",
            "against": "parquet"} in json.loads(out)["problems"]  # fmt: skip
