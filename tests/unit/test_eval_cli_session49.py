"""Audit 49iii (session 49): `memlife eval` on the evaluation set the nightly gate reads.

The shipped deployments read their set from S3 (MEMLIFE_EVAL_CASES=s3://bucket/key); the
run accepts `--eval-cases s3://...`. moto stands in for S3 (the network boundary).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.support.gate import ACTOR, rec, write_cases

DOG = rec("m-dog", "facts", "Has a dog named Rex.", subject="pet", age=30)
CASE = {
    "id": "dog",
    "query": "What is the dog called?",
    "actor_id": ACTOR,
    "must_retrieve": ["m-dog"],
}


@pytest.fixture()
def seeded(home: Path) -> Path:
    home.mkdir()
    store = SqliteStore(home / "memlife.db")
    store.put_many([DOG])
    store.close()
    return home


def test_eval_reads_the_set_the_nightly_gate_reads_from_s3(
    seeded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--cases` was a Path: "s3://gate/eval/cases.yaml" became the local path
    "s3:/gate/eval/cases.yaml" (exit 2, no such file). The set a deployment gates with could
    not be checked on demand."""
    import boto3
    from moto import mock_aws

    for k, v in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
                 "AWS_DEFAULT_REGION": "us-east-1"}.items():  # fmt: skip
        monkeypatch.setenv(k, v)
    body = Path(write_cases(tmp_path / "cases.yaml", [CASE])).read_bytes()
    with mock_aws():
        boto3.client("s3").create_bucket(Bucket="gate")
        boto3.client("s3").put_object(Bucket="gate", Key="eval/cases.yaml", Body=body)
        code, out, err = invoke("eval", "--cases", "s3://gate/eval/cases.yaml", "--json")

    assert code == 0, (out, err)
    report = json.loads(out)
    assert report["cases"] == 1 and report["failed_cases"] == []


def test_eval_reads_a_file_url_as_the_run_does(seeded: Path, tmp_path: Path) -> None:
    """`memlife run --eval-cases file://PATH` reads PATH; `memlife eval` exited 2."""
    path = write_cases(tmp_path / "cases.yaml", [CASE])
    code, out, err = invoke("eval", "--cases", f"file://{path}", "--json")
    assert code == 0, (out, err)
    assert json.loads(out)["cases"] == 1


def test_eval_still_reads_a_local_file(seeded: Path, tmp_path: Path) -> None:
    """Control: a plain local path."""
    code, out, err = invoke(
        "eval", "--cases", write_cases(tmp_path / "cases.yaml", [CASE]), "--json"
    )
    assert code == 0, (out, err)
    assert json.loads(out)["cases"] == 1
