"""Audit 51x3 (session 51: state off the worker): `receipts verify` of a night whose journal
lives in DynamoDB, once the state table's TTL has done its work.

The DynamoDB journal gives every receipted operation (and its ``jrun#``/``jrec#``
memberships) ``expires_at`` = receipt + ``ttl_days`` (30 by default; a year for supersedes
and removals, journal/dynamodb.py), and DynamoDB's TTL then deletes them, as documented
(docs/orchestration.md). Receipts live for years (Object Lock). A reviewer's
`receipts verify RUN` of an untouched night on day 31 read every replacement write the TTL
had dropped as evidence the journal never saw (PARQUET_OP_NOT_IN_JOURNAL,
RECEIPT_WITHOUT_JOURNALED_CHANGE) and failed, exit 1, for good.

Real components: a night on the AgentCore fake (behind real boto3) with its state in moto's
DynamoDB; DynamoDB's TTL sweeper, which moto does not run, is played by deleting the items
whose ``expires_at`` has passed on the day the reviewer verifies; the reviewer's clock is the
project's own (``memlife.model.utcnow``), moved for every memlife module."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from typer.testing import CliRunner

import memlife.evidence_journal  # noqa: F401  (loaded before the clock is moved)
import memlife.state as state_mod
from memlife import model
from memlife.cli import app
from memlife.demo import generate
from memlife.state.dynamodb import DynamoState
from tests.fakes.agentcore import AgentCoreHarness, bulk_load
from tests.support.aws_state import provision, state_url
from tests.support.lifecycle import ANCHOR, CUTOFF, gate_cases

runner = CliRunner()
_REAL_UTCNOW = model.utcnow


@pytest.fixture(scope="module")
def harness() -> Iterator[AgentCoreHarness]:
    h = AgentCoreHarness()
    yield h
    h.close()


def _clock(monkeypatch: pytest.MonkeyPatch, offset: timedelta) -> None:
    """Every memlife module's ``utcnow`` reads ``offset`` past the true time."""

    def shifted() -> datetime:
        return _REAL_UTCNOW() + offset

    for name, mod in list(sys.modules.items()):
        if name.startswith("memlife") and getattr(mod, "utcnow", None) is _REAL_UTCNOW:
            monkeypatch.setattr(mod, "utcnow", shifted)


def _ttl_sweep(state: DynamoState, day: float) -> int:
    """What DynamoDB's TTL has deleted by ``day`` (epoch seconds): every item whose
    ``expires_at`` has passed, the lease's aside (it is given back already)."""
    gone = 0
    for page in state.ddb.get_paginator("scan").paginate(TableName=state.table):
        for item in page["Items"]:
            exp = item.get("expires_at", {}).get("N")
            if exp is not None and float(exp) <= day and not item["pk"]["S"].startswith("lease#"):
                key = {"pk": item["pk"], "sk": item["sk"]}
                state.ddb.delete_item(TableName=state.table, Key=key)
                gone += 1
    return gone


def _verify(url: str, receipts: str, run_id: str) -> tuple[int, dict[str, Any]]:
    state_mod._open.clear()  # a reviewer's own process: a fresh state object
    done = runner.invoke(app, ["receipts", "verify", run_id, "--store", url,
                               "--receipts", receipts, "--json"])  # fmt: skip
    return done.exit_code, json.loads(done.stdout)


def _night_on_dynamodb_state(
    harness: AgentCoreHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str
) -> tuple[str, str, str, DynamoState]:
    """A consolidating night (4 replacement writes, 8 supersedes) on AgentCore with its
    state in DynamoDB; returns (store URL, receipts URL, run id, state)."""
    monkeypatch.delenv("MEMLIFE_STORE", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path / "home"))
    recs = list(generate(60, seed=3, anchor=ANCHOR, per_actor=30))
    cases = gate_cases(tmp_path / "x.db", recs)
    store = harness.store()
    bulk_load(store, harness.fake, recs)
    query = {"region": "us-east-1", "endpoint_url": harness.fake.endpoint_url,
             "sidecar_table": harness.sidecar_table}  # fmt: skip
    url = f"agentcore://{harness.fake.memory_id}?{urlencode(query)}"
    surl = state_url(table)
    state = provision(surl)
    monkeypatch.setenv("MEMLIFE_STATE", surl)
    monkeypatch.setattr(state_mod, "_open", {})
    receipts = f"file://{tmp_path / 'receipts'}"
    done = runner.invoke(app, ["run", "--engine", "local", "--now", CUTOFF.isoformat(),
                               "--store", url, "--receipts", receipts, "--eval-cases", cases,
                               "--json"])  # fmt: skip
    night = json.loads(done.stdout)
    assert done.exit_code == 0 and night["status"] == "success", night
    assert night["lifecycle"]["consolidated"] > 0
    return url, receipts, night["run_id"], state


def test_an_untouched_night_still_verifies_after_the_state_tables_ttl(
    harness: AgentCoreHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The night verifies clean on its day. On day 31 the TTL has dropped its receipted
    replacement writes (ttl_days 30) from the journal, as designed. What must hold: the
    untouched evidence still verifies (exit 0), the dropped rows said as expired (a note
    naming each operation), never as evidence the journal did not see."""
    url, receipts, run_id, state = _night_on_dynamodb_state(
        harness, tmp_path, monkeypatch, "st51x3-ttl"
    )
    code, out = _verify(url, receipts, run_id)
    assert (code, out["problems"]) == (0, []), out
    assert _ttl_sweep(state, time.time() + 31 * 86_400) > 0
    _clock(monkeypatch, timedelta(days=31))
    code, out = _verify(url, receipts, run_id)
    assert out["problems"] == [], Counter(p["code"] for p in out["problems"])
    assert code == 0
    assert Counter(n["code"] for n in out["notes"])["JOURNAL_EXPIRED"] == 4


def test_journal_rows_gone_before_their_ttl_are_still_a_finding(
    harness: AgentCoreHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control: the same rows removed while their TTL has not passed (a hand edit, a
    tamper: the reviewer verifies on the night's own day). What must hold: verify fails,
    naming each operation the journal lost, as before."""
    url, receipts, run_id, state = _night_on_dynamodb_state(
        harness, tmp_path, monkeypatch, "st51x3-ttl-control"
    )
    assert _ttl_sweep(state, time.time() + 31 * 86_400) > 0
    code, out = _verify(url, receipts, run_id)
    assert code == 1
    found = Counter(p["code"] for p in out["problems"])
    assert found == {"PARQUET_OP_NOT_IN_JOURNAL": 4, "RECEIPT_WITHOUT_JOURNALED_CHANGE": 4}
    assert not [n for n in out["notes"] if n["code"] == "JOURNAL_EXPIRED"]


def test_a_row_past_its_ttl_without_its_operation_receipt_is_still_a_finding(
    harness: AgentCoreHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adversary (left by audit 51r, "JOURNAL_EXPIRED ignores the row's state"): past the
    TTL, a journal row the table dropped and the operation's own receipt both gone. The
    TTL starts only at RECEIPTED, so a row may be read as expired only where the operation
    was receipted: its receipt is in the bucket. What must hold: the operation whose
    receipt went is a problem (PARQUET_OP_NOT_IN_JOURNAL beside OPERATION_RECEIPT_MISSING),
    never also a JOURNAL_EXPIRED note saying the TTL explains it; the others stay notes. (A
    terminal failure is never receipted, so the TTL never drops its row: one missing is a
    finding, however old the run.)"""
    url, receipts, run_id, state = _night_on_dynamodb_state(
        harness, tmp_path, monkeypatch, "st51x3-ttl-receipt"
    )
    assert _ttl_sweep(state, time.time() + 31 * 86_400) > 0
    folder = Path(receipts[len("file://") :])
    _clock(monkeypatch, timedelta(days=31))
    code, out = _verify(url, receipts, run_id)
    expired = [n["operation_id"] for n in out["notes"] if n["code"] == "JOURNAL_EXPIRED"]
    assert code == 0 and len(expired) == 4, out
    (folder / "operations" / f"{expired[0]}.json").unlink()
    code, out = _verify(url, receipts, run_id)
    assert code == 1
    named = {(p["code"], p.get("operation_id")) for p in out["problems"]}
    assert ("PARQUET_OP_NOT_IN_JOURNAL", expired[0]) in named, out["problems"]
    still = [n["operation_id"] for n in out["notes"] if n["code"] == "JOURNAL_EXPIRED"]
    assert sorted(still) == sorted(expired[1:])
