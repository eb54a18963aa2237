"""Session 45 (audit 45d): receipts as a tamperer edits them (moto S3, the real `memlife receipts` CLI).

A sealed nightly run is copied to a moto bucket; the adversary adds or edits one object
(what a create-only bucket, or an unlocked one, allows) and a reviewer runs `receipts
verify` / `receipts list` on it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from zoneinfo import ZoneInfo

import boto3
import duckdb
import pytest
from moto import mock_aws

from memlife.pipeline import RunConfig, run_local
from tests.support.cli import invoke
from tests.support.evidence import sealed_nightly_run
from tests.support.lifecycle import CUTOFF, operation_receipts, seed
from tests.support.records import good

DEEP = 100_000  # nesting a JSON parser written in C refuses with RecursionError


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return sealed_nightly_run(tmp_path_factory.mktemp("audit45d"))


@pytest.fixture()
def s3(pristine: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict]:
    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                 "AWS_DEFAULT_REGION": "us-east-1"}.items():  # fmt: skip
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path / "home"))
    root = tmp_path / "c"
    shutil.copytree(pristine["base"] / "receipts", root)
    folder = pristine["receipt"].parent.relative_to(pristine["base"] / "receipts").as_posix()
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="audit")

        def upload() -> None:
            for f in sorted(p for p in root.rglob("*") if p.is_file()):
                client.put_object(Bucket="audit", Key=f"m/{f.relative_to(root).as_posix()}",
                                  Body=f.read_bytes())  # fmt: skip

        yield {"root": root, "folder": root / folder, "run_id": pristine["run_id"],
               "url": "s3://audit/m", "upload": upload}  # fmt: skip


def receipts(s3: dict, *args: str) -> tuple[int, str, str]:
    return invoke("receipts", *args, "--receipts", s3["url"], "--json")


def test_untouched_copy_verifies_and_lists(s3: dict) -> None:
    """The control: the copied run verifies clean from the bucket alone and is listed."""
    s3["upload"]()
    code, out, _ = receipts(s3, "verify", s3["run_id"], "--evidence-only")
    assert code == 0 and json.loads(out)["ok"], out
    code, out, _ = receipts(s3, "list")
    assert code == 0 and [r["run_id"] for r in json.loads(out)] == [s3["run_id"]]


def test_a_deeply_nested_object_under_operations_leaves_verify_of_every_run_working(
    s3: dict,
) -> None:
    """The adversary plants one valid-JSON object of 100k nested arrays under
    `operations/` (a create-only bucket accepts it). Verify lists every operation receipt
    of the bucket to find those claiming the run: the planted one names no run, so the
    untouched run must still verify (old code: `error: RecursionError`, exit 1, no problem
    named, for every run of the bucket)."""
    (s3["root"] / "operations" / "zz-planted.json").write_text("[" * DEEP + "]" * DEEP)
    s3["upload"]()
    code, out, err = receipts(s3, "verify", s3["run_id"], "--evidence-only")
    assert "RecursionError" not in err
    assert code == 0 and json.loads(out)["ok"], out + err


def test_a_deeply_nested_receipt_of_a_planted_run_leaves_receipts_list_working(
    s3: dict,
) -> None:
    """The adversary plants a run folder whose receipt.json is deeply nested JSON. `receipts
    list` must still list the real run (the planted one as a run with unreadable evidence,
    which verify names) rather than fail for the whole bucket; the planted run's verify
    names the receipt (RECEIPT_UNREADABLE), never a traceback."""
    planted = s3["folder"].parent / "20261101T130000Z-apply-0000000000"
    planted.mkdir()
    (planted / "receipt.json").write_text('{"a":' * DEEP + "1" + "}" * DEEP)
    s3["upload"]()
    code, out, err = receipts(s3, "list")
    assert "RecursionError" not in err
    assert code == 0 and s3["run_id"] in [r["run_id"] for r in json.loads(out)], out + err
    code, out, err = receipts(s3, "verify", planted.name, "--evidence-only")
    assert code == 1 and "RECEIPT_UNREADABLE" in {p["code"] for p in json.loads(out)["problems"]}


def test_a_run_receipt_with_a_repeated_key_is_named_by_verify(s3: dict) -> None:
    """The adversary (an unlocked bucket) adds `"status": "blocked"` as the first key of the
    sealed receipt.json and keeps the real one after it. memlife (Python's json: the last
    value) reads the same dict, so the digest still matches; a reviewer's DuckDB reads the
    first value (`json_extract`) and the documented `sealed-operations` view refuses the
    file. Two readers, two results: verify must name the receipt, as the import and the
    policy loader refuse a key written twice."""
    receipt = s3["folder"] / "receipt.json"
    body = receipt.read_text()
    assert body.startswith("{")
    receipt.write_text('{"status": "blocked",' + body[1:])
    got = duckdb.sql(
        f"SELECT json_extract_string(content, '$.status') FROM read_text('{receipt}')"
    ).fetchall()
    assert got == [("blocked",)]  # what a reviewer's query reads; memlife reads "success"
    s3["upload"]()
    code, out, _ = receipts(s3, "verify", s3["run_id"], "--evidence-only")
    assert code == 1, out


@pytest.fixture()
def deferral(home: Path, tmp_path: Path) -> tuple[str, Path]:
    """An erasure of a held record, deferred: its run id and its deferral receipt."""
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1", retention_class="legal_hold")) + "\n")
    assert invoke("import", str(src))[0] == 0
    code, out, err = invoke("erase", "--actor", "u-1", "--id", "m-1", "--yes", "--json")
    assert code == 0, out + err
    (receipt,) = (home / "receipts" / "deferrals").glob("*.json")
    return json.loads(out)["run_id"], receipt


@pytest.mark.parametrize(
    "change", [{"timestamp": "2026-01-01T00:00:00+00:00"}, {"policy_version": "2025.01-lax"}]
)
@pytest.mark.parametrize("only", [(), ("--evidence-only",)])
def test_a_deferral_receipts_time_or_policy_rewritten_is_named(
    deferral: tuple[str, Path], change: dict, only: tuple[str, ...]
) -> None:
    """A deferral receipt is the proof of when, and under which policy, a legal hold held
    an erasure back (what a regulator asks about an erasure not done in time). It is not
    in the seal's chain (its operation is FAILED), so only its fields are compared with
    the run's Parquet row: the adversary backdates it, or names another policy, and verify
    must name it (DEFERRAL_FIELD_MISMATCH), as it does for the record id or the outcome and
    as it does for an operation receipt's policy version."""
    run_id, receipt = deferral
    doc = json.loads(receipt.read_text())
    assert doc["timestamp"] != change.get("timestamp")
    receipt.write_text(json.dumps(doc | change))
    code, out, _ = invoke("receipts", "verify", run_id, "--json", *only)
    assert code == 1, out
    assert {p["code"] for p in json.loads(out)["problems"]} == {"DEFERRAL_FIELD_MISMATCH"}


def test_a_cutoff_given_in_another_zone_keeps_the_runs_history_readable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A caller of the Python API (a RunConfig, as the flow takes) gives the cutoff as an
    aware time in its own zone: 12:00 UTC is 02:00 the next day at UTC+14. The run id
    (labelled Z) and the run folder take the local wall time and day, the dataset file
    the UTC day, so `receipts history` of a record the run deleted reads the run's sealed
    file as DATASET_NOT_SEALED and says "no operation" (exit 1), while verify passes. One
    instant is one cutoff: the run must be the UTC run, and its deletes in the history."""
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path))
    seed(tmp_path / "memlife.db")
    url = f"file://{tmp_path / 'receipts'}"
    local = CUTOFF.astimezone(ZoneInfo("Pacific/Kiritimati"))
    assert local.date() != CUTOFF.date()
    summary = run_local(RunConfig(dry_run=False, now=local, receipts=url,
                                  store=f"sqlite:///{tmp_path / 'memlife.db'}"))  # fmt: skip
    assert summary.status == "success" and summary.lifecycle["deleted"] > 0
    code, out, _ = invoke("receipts", "verify", summary.run_id, "--evidence-only",
                          "--receipts", url, "--json")  # fmt: skip
    assert code == 0, out
    ops = operation_receipts(tmp_path / "receipts").values()
    rid = next(o["record_id"] for o in ops if o["action"] == "delete")
    assert summary.run_id.startswith(f"{CUTOFF:%Y%m%dT%H%M%SZ}-"), summary.run_id
    code, out, err = invoke("receipts", "history", rid, "--receipts", url, "--json")
    assert code == 0 and [r["action"] for r in json.loads(out)] == ["delete"], out + err
