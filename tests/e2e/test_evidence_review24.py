"""`memlife receipts verify | list` over S3 (moto) on malformed evidence (session 24, F2):
named problems and exit 1, never a traceback; every run still listed."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner

from memlife.cli import app
from tests.support.evidence import sealed_nightly_run

runner = CliRunner()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return sealed_nightly_run(tmp_path_factory.mktemp("review24e2e"))


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


def cli(s3: dict, *args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["receipts", *args, "--receipts", s3["url"], "--json"])


def test_verify_names_malformed_evidence_and_exits_1(s3: dict) -> None:
    """Old code: exit 2 and a one-line JSONDecodeError / ArrowInvalid, no problem code."""
    (s3["folder"] / "manifest.json").write_text("{not json")
    op = sorted((s3["root"] / "operations").iterdir())[0]
    op.write_bytes(b"\x00garbage")
    s3["upload"]()
    res = cli(s3, "verify", s3["run_id"], "--evidence-only")
    assert res.exit_code == 1, res.output
    found = {p["code"]: p for p in json.loads(res.stdout)["problems"]}
    assert found["MANIFEST_UNREADABLE"]["key"].endswith("/manifest.json")
    assert found["RECEIPT_UNREADABLE"]["key"] == f"operations/{op.name}"


def test_list_survives_a_bad_manifest_and_shows_a_run_without_one(s3: dict) -> None:
    """Old code: one non-JSON manifest broke `receipts list` for every run (exit 2), and a
    run whose manifest was deleted was not listed at all."""
    (s3["folder"] / "manifest.json").write_text("{not json")
    other = s3["folder"].parent / "20261101T130000Z-apply-0000000000"
    other.mkdir()
    receipt = json.loads((s3["folder"] / "receipt.json").read_text())
    (other / "receipt.json").write_text(json.dumps({**receipt, "run_id": other.name}))
    s3["upload"]()
    res = cli(s3, "list")
    assert res.exit_code == 0, res.output
    assert sorted(r["run_id"] for r in json.loads(res.stdout)) == sorted([s3["run_id"], other.name])
    res = cli(s3, "verify", other.name, "--evidence-only")
    assert res.exit_code == 1 and "MANIFEST_MISSING" in {
        p["code"] for p in json.loads(res.stdout)["problems"]
    }
    assert runner.invoke(app, ["receipts", "list", "--since", "someday"]).exit_code == 2  # usage
