"""State backend settings (MEMLIFE_STATE) and the store's identity in the run key."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlife.demo import generate
from memlife.journal import SqliteJournal, open_journal
from memlife.pipeline import RunConfig, run_local
from memlife.state import StateSettingsError, parse_state_url
from memlife.stores import store_identity
from memlife.stores.sqlite import SqliteStore

ANCHOR = datetime(2026, 11, 1, tzinfo=UTC)


def test_parse_state_url() -> None:
    assert parse_state_url(None) is None and parse_state_url("local") is None
    s = parse_state_url(
        "dynamodb://tbl?region=eu-west-1&parquet=s3://b/p/q&endpoint_url=http://x:1"
    )
    assert (s.table, s.region, s.parquet_bucket, s.parquet_prefix) == (
        "tbl",
        "eu-west-1",
        "b",
        "p/q",
    )
    assert s.endpoint_url == s.s3_endpoint_url == "http://x:1" and s.ttl_days == 30
    assert s.parquet_url == "s3://b/p/q"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("sqlite:///x.db", "unknown scheme"),
        ("dynamodb://?region=us-east-1&parquet=s3://b/p", "expected dynamodb://TABLE"),
        ("dynamodb://t?region=us-east-1", "parquet"),
        ("dynamodb://t?region=us-east-1&parquet=/tmp/x", "parquet"),
        ("dynamodb://t?region=us-east-1&parquet=s3://b/p&colour=red", "colour"),
        ("dynamodb://t?region=us-east-1&parquet=s3://b/p&ttl_days=0", "ttl_days"),
    ],
)
def test_bad_state_urls_name_the_problem(url: str, says: str) -> None:
    with pytest.raises(StateSettingsError, match=says):
        parse_state_url(url)


def test_region_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    with pytest.raises(StateSettingsError, match="region"):
        parse_state_url("dynamodb://t?parquet=s3://b/p")


def test_sqlite_store_keeps_its_journal_in_its_file_whatever_the_state(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("MEMLIFE_STATE", "dynamodb://t?region=us-east-1&parquet=s3://b/p")
    store = SqliteStore(tmp_path / "m.db")
    assert isinstance(open_journal(store), SqliteJournal)


def test_store_identity() -> None:
    a = store_identity("agentcore://mem-1?region=us-east-1&endpoint_url=http://127.0.0.1:1")
    b = store_identity("agentcore://mem-1?region=us-east-1&endpoint_url=http://127.0.0.1:2")
    assert a == b == "agentcore://mem-1@us-east-1"  # how it is reached is not what it is
    assert store_identity("agentcore://mem-1?region=eu-west-1") != a
    assert store_identity("agentcore://Mem-1?region=us-east-1") != a  # ids are case-sensitive
    rel = store_identity("sqlite:///.memlife/memlife.db")
    assert rel == "sqlite:" + str(Path(".memlife/memlife.db").resolve())


def test_two_stores_at_one_cutoff_get_two_runs_and_two_receipts(home: Path) -> None:
    home.mkdir(parents=True)
    first, second = home / "a.db", home / "b.db"
    store = SqliteStore(first)
    store.put_many(list(generate(60, seed=3, anchor=ANCHOR)))
    store.close()
    shutil.copyfile(first, second)
    cfg = dict(dry_run=False, consolidate=False, now=ANCHOR)
    ra = run_local(RunConfig(store=f"sqlite:///{first}", **cfg))
    rb = run_local(RunConfig(store=f"sqlite:///{second}", **cfg))
    assert ra.run_id != rb.run_id
    assert ra.receipt and rb.receipt and ra.receipt != rb.receipt
    for summary, db in ((ra, first), (rb, second)):
        receipt = json.loads(Path(summary.receipt.removeprefix("file://")).read_text())
        assert receipt["run_id"] == summary.run_id
        manifest = json.loads(Path(summary.manifest.removeprefix("file://")).read_text())
        assert manifest["store"] == f"sqlite:///{db}"
    again = run_local(RunConfig(store=f"sqlite:///{first}", **cfg))
    assert again.run_id == ra.run_id  # same store: the same run (reruns resume)
