"""Forty-third audit q: the access ledger that feeds nightly scoring, read as an adversary
(CloudTrail events that are no read, memlife's own calls logged by CloudTrail)."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.ledger import AccessLedger
from memlife.model import MemoryRecord, utcnow
from memlife.online.memory import LongTermMemory
from memlife.run_planning import iter_views
from memlife.run_types import Shard
from tests.fakes.agentcore import agentcore_store

NS = "/users/a/facts"
FACTS = ["Drinks green tea every morning.", "Has a dog named Rex.", "Works as a nurse in Leeds."]


def _log(folder: Path, events: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    body = gzip.compress(json.dumps({"Records": events}).encode())
    (folder / "123_CloudTrail_us-east-1_20250501T1000Z_a.json.gz").write_bytes(body)
    return folder


def _get_event(rid: str, when: datetime, **extra: Any) -> dict[str, Any]:
    """A GetMemoryRecord data event as CloudTrail delivers it."""
    return {
        "eventVersion": "1.11",
        "userIdentity": {"type": "AssumedRole", "arn": "arn:aws:sts::123:assumed-role/app/x"},
        "eventTime": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "eventSource": "bedrock-agentcore.amazonaws.com",
        "eventName": "GetMemoryRecord",
        "requestParameters": {"memoryId": "mem-1", "memoryRecordId": rid},
        "responseElements": {"memoryRecord": {"memoryRecordId": rid, "namespaces": [NS]}},
        "eventCategory": "Data",
        "readOnly": True,
        **extra,
    }


def test_a_read_call_that_failed_is_no_access(tmp_path: Path) -> None:
    """An adversary without access to the memory (or a caller hitting a deleted record)
    calls GetMemoryRecord in a loop: CloudTrail logs each denied call with ``errorCode``
    and no response. No record was read, so none may be credited with an access (here the
    actor comes from the documented resolver, as for GetMemoryRecord without a namespace)."""
    when = datetime(2025, 5, 1, 10, tzinfo=UTC)
    denied = _get_event("mr-1", when, errorCode="AccessDenied", errorMessage="not allowed")
    denied["responseElements"] = None
    ok = _get_event("mr-2", when)
    ledger = AccessLedger(tmp_path / "ledger")
    report = ledger.ingest_cloudtrail(
        _log(tmp_path / "trail", [denied] * 50 + [ok]), actor_resolver=lambda e: "a"
    )
    assert report.rows == 1
    assert set(ledger.access_stats()) == {"mr-2"}


def test_a_recall_on_agentcore_credits_only_what_it_returned_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On AgentCore, online recall fetches its candidates with GetMemoryRecord, and CloudTrail
    logs each call as a data event like any other client's. After the nightly ingest of
    those logs, the recall must count as it was logged (the returned hit, once): candidates
    it did not return were not read, and the hit was not read twice. Else every record an
    agent's recalls rank stays "frequently read" and never decays into review."""
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path))
    with agentcore_store() as (store, _fake):
        made = utcnow() - timedelta(days=10)
        ids = [f"f-{i}" for i in range(len(FACTS))]
        store.put_many([MemoryRecord(id=i, actor_id="a", namespace=NS, content=f, owner="t", memory_type="semantic",
                                     created_at=made) for i, f in zip(ids, FACTS, strict=True)])  # fmt: skip
        ledger = AccessLedger(tmp_path / "ledger")
        mem = LongTermMemory(store, ledger=ledger)
        sent: list[dict[str, Any]] = []

        def logged(request: Any, **_: Any) -> None:  # what CloudTrail records of each call
            if "/memoryRecord/" in request.url and request.method == "GET":
                rid = request.url.split("/memoryRecord/")[1].split("?")[0]
                ua = request.headers.get("User-Agent", b"")
                ua = ua.decode() if isinstance(ua, bytes) else ua
                sent.append(_get_event(rid, utcnow(), userAgent=ua))

        store.client.meta.events.register("before-send.bedrock-agentcore", logged)
        hits = mem.recall("a", "what does she drink?", k=1, threshold=-1)
        mem.close()
        assert [h.record.id for h in hits] == [ids[0]] and sent
        ledger.ingest_cloudtrail(_log(tmp_path / "trail", sent), store=store)
        stats = ledger.actor_stats(until=utcnow() + timedelta(days=1))
        views = [v for p in iter_views(store, Shard("a", NS), 100, stats) for v in p]
    counts = {v.id: v.access_count for v in views}
    assert counts == {ids[0]: 1, ids[1]: 0, ids[2]: 0}


def test_one_truncated_ledger_part_does_not_stop_the_night(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unlucky operator: a ledger part cut short (a disk filled, a partial copy of the
    home). The night must still run on the other parts, not fail every night until someone
    finds the file; the reads in the readable parts still count."""
    from memlife.run_start import load_access_stats

    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path))
    ledger = AccessLedger(tmp_path / "ledger")
    at = datetime(2025, 5, 1, 10, tzinfo=UTC)
    ledger.append("a", NS, "r1", at=at)
    ledger.flush()
    good = Path(ledger.files()[0])
    (good.parent / "part-cut.parquet").write_bytes(good.read_bytes()[:40])
    with pytest.warns(RuntimeWarning, match="unreadable part"):  # named, not silent
        stats = load_access_stats(at + timedelta(days=1))
    assert stats[("a", "r1")].count == 1
