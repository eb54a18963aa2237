"""Audit 53o (session 53): what an operator reads after a night, against each other.

The summary `memlife run` prints, the receipt it names, the report page beside it and the
CloudWatch metrics must say the same for one run (one cutoff is one run id). Two ways they
did not:

1. A night that ended `partial_failure` (a store refusing a delete with THROTTLED) had
   published its counts; the operator's rerun at the same cutoff finished it under
   `receipt.2.json` and published its counts again, which the journal makes cumulative
   (every attempt's changes). CloudWatch's Sum for the night then said `processed 6,
   deleted 3, failed 1` for a 3-record night whose last receipt says `deleted 2, failed 0`.
2. A dry run at a `--now` already dry-run (the operator imported a fix and previews
   again) printed its own plan (3 records, 2 deletions) but named the first dry run's
   receipt and report page, create-only, which say 2 records and 1 deletion; and it
   published its counts a second time (`processed` summed to 5 for that one run). Its
   plan is rightly its own (audit 47r: a key set since plans otherwise); what it names
   as its evidence is not.

Real SQLite stores, the local engine, moto CloudWatch; a store's partial write failure is
simulated at the store boundary, as AgentCore reports it (``BatchResult.failed``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.model import MemoryRecord, MemoryType
from memlife.pipeline import RunConfig, run_local
from memlife.stores.base import BatchResult, ItemFailure
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke

NOW = datetime(2026, 6, 1, tzinfo=UTC)
NS = "/users/u-1/facts"  # enforced by the default policy
OUTCOMES = ("retained", "superseded", "deleted", "quarantined", "reviewed", "held", "failed")


def rec(rid: str, text: str, **kw: Any) -> MemoryRecord:
    return MemoryRecord(id=rid, actor_id="u-1", namespace=NS, content=text, owner="team-a",
                        memory_type=MemoryType.semantic, created_at=NOW - timedelta(days=30),
                        **kw)  # fmt: skip


def put(home: Path, *records: MemoryRecord) -> None:
    home.mkdir(parents=True, exist_ok=True)
    with SqliteStore(home / "memlife.db") as s:
        s.put_many(list(records))


def expired(rid: str, text: str) -> MemoryRecord:
    return rec(rid, text, expires_at=NOW - timedelta(days=1))


class RefusesX2(SqliteStore):
    """The store answers x2's delete THROTTLED (retryable), as AgentCore reports a partial
    failure: as data, the rest of the batch deleted."""

    def delete_many(self, ids: Sequence[str], **kw: Any) -> BatchResult:
        res = super().delete_many([i for i in ids if i != "x2"], **kw)
        res.failed += [ItemFailure(i, "THROTTLED", retryable=True) for i in ids if i == "x2"]
        return res


@pytest.fixture()
def cloudwatch(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    import boto3
    from moto import mock_aws

    for k, v in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
                 "AWS_DEFAULT_REGION": "us-east-1"}.items():  # fmt: skip
        monkeypatch.setenv(k, v)
    with mock_aws():
        yield boto3.client("cloudwatch", region_name="us-east-1")


def sums(cw: Any, mode: str, version: str) -> dict[str, float]:
    """CloudWatch's Sum of each lifecycle count over the night's day."""
    out: dict[str, float] = {}
    for name in ("processed", *OUTCOMES, "consolidated"):
        stats = cw.get_metric_statistics(
            Namespace="MemLife/O", MetricName=name, StartTime=NOW - timedelta(hours=1),
            EndTime=NOW + timedelta(hours=23), Period=86400, Statistics=["Sum"],
            Dimensions=[{"Name": "Mode", "Value": mode},
                        {"Name": "PolicyVersion", "Value": version}],
        )  # fmt: skip
        out[name] = sum(d["Sum"] for d in stats["Datapoints"])
    return out


def receipt(summary: Any) -> dict[str, Any]:
    return json.loads(Path(str(summary.receipt)).read_text())


def page_figure(page: str | None, figure: str) -> str:
    found = re.search(rf'data-figure="{figure}"[^>]*>([^<]*)<', Path(str(page)).read_text())
    assert found, figure
    return found.group(1)


# -- 1. a rerun that finishes a partial failure ---------------------------------------------


def test_a_rerun_finishing_a_partial_failure_leaves_the_nights_metrics_at_its_last_receipt(
    home: Path, monkeypatch: pytest.MonkeyPatch, cloudwatch: Any
) -> None:
    """Two expired records and one to keep. The store refuses x2's delete (THROTTLED): the
    night ends partial_failure (deleted 1, failed 1) and publishes that. The operator
    reruns the same cutoff with the store answering: it deletes x2 and seals
    `receipt.2.json` (deleted 2, failed 0). Must hold: the night's CloudWatch Sums are
    its last receipt's counts (a dashboard reads the night as the receipt does); they were
    processed 6, deleted 3, failed 1."""
    put(home, expired("x1", "Went hiking."), expired("x2", "Went rowing."), rec("k", "Likes jazz."))
    with monkeypatch.context() as m:
        m.setattr("memlife.pipeline.open_store", lambda url=None: RefusesX2(home / "memlife.db"))
        first = run_local(RunConfig(dry_run=False, now=NOW, metrics_namespace="MemLife/O"))
    assert first.status == "partial_failure" and first.lifecycle["failed"] == 1
    again = run_local(RunConfig(dry_run=False, now=NOW, metrics_namespace="MemLife/O"))
    assert again.status == "success" and str(again.receipt).endswith("receipt.2.json")
    last = receipt(again)["counts"]
    assert last["deleted"] == 2 and last["failed"] == 0 and last["processed"] == 3
    assert sums(cloudwatch, "apply", again.policy_version) == {k: float(v) for k, v in last.items()}


def test_control_a_partial_failure_alone_publishes_its_receipts_counts(
    home: Path, monkeypatch: pytest.MonkeyPatch, cloudwatch: Any
) -> None:
    """Control: the partial night alone (no rerun) publishes what its receipt says, and its
    outcomes land: every processed record in one outcome."""
    put(home, expired("x1", "Went hiking."), expired("x2", "Went rowing."), rec("k", "Likes jazz."))
    monkeypatch.setattr("memlife.pipeline.open_store",
                        lambda url=None: RefusesX2(home / "memlife.db"))  # fmt: skip
    first = run_local(RunConfig(dry_run=False, now=NOW, metrics_namespace="MemLife/O"))
    counts = receipt(first)["counts"]
    assert first.lifecycle == counts and counts["processed"] == sum(counts[k] for k in OUTCOMES)
    assert sums(cloudwatch, "apply", first.policy_version) == {
        k: float(v) for k, v in counts.items()
    }


# -- 2. a dry run at a cutoff already dry-run --------------------------------------------------


def _two_dry_runs(home: Path, **kw: Any) -> tuple[Any, Any]:
    """A dry run; an import adds a second expired record; the same dry run again."""
    put(home, expired("x1", "Went hiking."), rec("k", "Likes jazz."))
    first = run_local(RunConfig(dry_run=True, now=NOW, **kw))
    put(home, expired("x2", "Went rowing."))
    return first, run_local(RunConfig(dry_run=True, now=NOW, **kw))


def test_a_dry_run_again_at_one_cutoff_names_no_receipt_or_page_of_other_figures(
    home: Path,
) -> None:
    """The operator dry-runs `--now T`, imports a record, and dry-runs `--now T` again (one
    cutoff is one run id: the receipt and page are create-only, the first's stay). The
    second plans the store as it is (3 records, 2 deletions: a dry run after a key is set
    must plan anew too, audit 47r). Must hold: every receipt and page it names holds the
    figures it prints, and the first's are untouched. It named the first's receipt and
    page, which say 2 records and 1 deletion."""
    first, again = _two_dry_runs(home)
    assert again.records == 3 and again.counts["delete_expired"] == 2
    assert again.other["dry_run_receipt_taken"] == 1
    for named in (again.receipt, again.report_html):
        assert named is None, named
    kept = receipt(first)
    assert kept["records_found"] == first.records == 2 and kept["planned"] == first.counts
    assert page_figure(first.report_html, "would-delete") == "1"


def test_a_dry_run_again_at_one_cutoff_adds_nothing_to_the_metrics(
    home: Path, cloudwatch: Any
) -> None:
    """The same two dry runs with metrics on: one run id, one receipt. Must hold: the
    dry-run metrics of the night are that receipt's (processed 2); they summed to 5."""
    first, again = _two_dry_runs(home, metrics_namespace="MemLife/O")
    assert again.run_id == first.run_id
    kept = receipt(first)["counts"]
    got = sums(cloudwatch, "dry_run", again.policy_version)
    assert got["processed"] == kept["processed"] == 2, got


def test_control_a_dry_run_at_a_new_cutoff_plans_the_store_as_it_is(home: Path) -> None:
    """Control: after the import a dry run at another cutoff is another run: its own
    receipt and page, its own plan (3 records, 2 deletions), all three agreeing."""
    put(home, expired("x1", "Went hiking."), rec("k", "Likes jazz."))
    first = run_local(RunConfig(dry_run=True, now=NOW))
    put(home, expired("x2", "Went rowing."))
    later = run_local(RunConfig(dry_run=True, now=NOW + timedelta(hours=1)))
    assert later.receipt != first.receipt
    kept = receipt(later)
    assert later.records == kept["records_found"] == 3 and later.counts == kept["planned"]
    assert page_figure(later.report_html, "would-delete") == "2"


def test_the_cli_says_why_a_dry_run_again_at_one_cutoff_names_no_receipt(home: Path) -> None:
    """Through the CLI: the second dry run's `--json` names no receipt or page, and its
    lines say why (the cutoff's dry run had already finished), exit 0."""
    put(home, expired("x1", "Went hiking."), rec("k", "Likes jazz."))
    args = ("run", "--engine", "local", "--dry-run", "--now", NOW.isoformat())
    code, out, err = invoke(*args, "--json")
    assert code == 0, out + err
    put(home, expired("x2", "Went rowing."))
    code, out, err = invoke(*args, "--json")
    result = json.loads(out)
    assert code == 0 and result["records"] == 3
    assert result["receipt"] is None and result["report_html"] is None
    code, out, err = invoke(*args)
    assert code == 0 and "already finished" in err and "receipt:" not in err
