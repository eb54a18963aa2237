"""Access ledger: partitioned Parquet rows, stats, erasure, CloudTrail ingest, view merge."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pyarrow.parquet as pq
import pytest
from moto import mock_aws

from memlife.ledger import (
    SCHEMA,
    AccessLedger,
    actor_from_namespace,
    query_sha256,
)
from memlife.ledger_merge import AccessTimes, merge_into_view
from memlife.model import MemoryRecord, MemoryType, plan_view

T0 = datetime(2025, 5, 1, 23, 59, 0, tzinfo=UTC)
QS = query_sha256("what do I drink?")


@pytest.fixture()
def ledger(tmp_path: Path) -> AccessLedger:
    return AccessLedger(tmp_path / "ledger", flush_rows=100)


def test_rows_are_buffered_then_written_per_day(ledger: AccessLedger) -> None:
    ledger.append("u1", "ns", "r1", rank=1, query_sha256=QS, at=T0)
    ledger.append("u1", "ns", "r2", rank=2, query_sha256=QS, at=T0 + timedelta(minutes=2))
    assert ledger.pending == 2 and ledger.files() == []
    assert ledger.flush() == 2
    days = sorted(p.parent.name for p in ledger.files())
    assert days == ["date=2025-05-01", "date=2025-05-02"]
    table = pq.read_table(ledger.files()[0])
    assert table.schema.equals(SCHEMA)
    assert table.to_pylist() == [
        {
            "actor_id": "u1",
            "namespace": "ns",
            "record_id": "r1",
            "accessed_at": T0,
            "rank": 1,
            "query_sha256": QS,
        }
    ]


def test_full_buffer_flushes_itself(tmp_path: Path) -> None:
    led = AccessLedger(tmp_path / "l", flush_rows=3)
    for i in range(7):
        led.append("u1", "ns", f"r{i}", at=T0)
    assert led.pending == 1 and len(led.files()) == 2


def test_query_text_is_refused(ledger: AccessLedger) -> None:
    with pytest.raises(ValueError):
        ledger.append("u1", "ns", "r1", query_sha256="what do I drink?")


def test_access_stats_by_actor_and_since(ledger: AccessLedger) -> None:
    for i in range(3):
        ledger.append("u1", "ns", "r1", rank=1, at=T0 + timedelta(days=i))
    ledger.append("u1", "ns", "r2", rank=2, at=T0)
    ledger.append("u2", "ns2", "r9", rank=1, at=T0 + timedelta(days=5))
    assert ledger.access_stats() == {
        "r1": (T0 + timedelta(days=2), 3),
        "r2": (T0, 1),
        "r9": (T0 + timedelta(days=5), 1),
    }
    assert set(ledger.access_stats(actor_id="u1")) == {"r1", "r2"}
    assert ledger.access_stats(since=T0 + timedelta(days=1)) == {
        "r1": (T0 + timedelta(days=2), 2),
        "r9": (T0 + timedelta(days=5), 1),
    }
    assert AccessLedger(ledger.root / "empty").access_stats() == {}


def test_erase_rewrites_only_affected_files(ledger: AccessLedger) -> None:
    ledger.append("u1", "ns", "r1", at=T0)
    ledger.append("u1", "ns", "r2", at=T0)
    ledger.append("u1", "ns", "r1", at=T0 + timedelta(days=3))
    ledger.flush()
    ledger.append("u1", "ns", "r3", at=T0 + timedelta(days=9))
    ledger.flush()
    ledger.append("u1", "ns", "r1", at=T0)  # still buffered
    untouched = [p for p in ledger.files() if "2025-05-10" in str(p)]
    assert ledger.erase(["r1", "nope"]) == 3
    assert untouched[0].exists()
    assert ledger.access_stats() == {"r2": (T0, 1), "r3": (T0 + timedelta(days=9), 1)}
    assert not any("2025-05-04" in str(p) for p in ledger.files())  # emptied file removed
    assert ledger.erase([]) == 0


def _reads(*times: datetime) -> AccessTimes:
    return AccessTimes([t.timestamp() for t in times])


def test_merge_into_view() -> None:
    rec = MemoryRecord(
        id="r1",
        actor_id="u1",
        namespace="ns",
        memory_type=MemoryType.semantic,
        content="x",
        created_at=T0 - timedelta(days=30),
        access_count=4,
        last_accessed_at=T0 - timedelta(days=10),
    )
    view = plan_view(rec)
    merged = merge_into_view(view, {("u1", "r1"): _reads(T0, T0, T0 - timedelta(days=1))})
    assert (merged.last_accessed, merged.access_count) == (T0.timestamp(), 7)
    assert merged._replace(last_accessed=view.last_accessed, access_count=4) == view
    older = merge_into_view(view, {("u1", "r1"): _reads(T0 - timedelta(days=20))})
    assert older.last_accessed == view.last_accessed and older.access_count == 5
    assert merge_into_view(view, {("u1", "other"): _reads(T0)}) is view
    never = plan_view(rec.model_copy(update={"last_accessed_at": None}))
    assert merge_into_view(never, {("u1", "r1"): _reads(T0)}).last_accessed == T0.timestamp()


def test_a_reused_id_is_not_credited_with_a_removed_records_accesses(
    ledger: AccessLedger,
) -> None:
    """Ids are reused once a record is removed, and a delete (unlike an erasure) leaves
    the ledger's rows. Scoring credited them to whichever record took the id next: another
    actor's (a tenant's reads counted for another), or the same actor's new record."""
    for day in range(5):
        ledger.append("u1", "ns", "r1", rank=1, at=T0 + timedelta(days=day))
    ledger.append("u2", "ns2", "r1", rank=1, at=T0 + timedelta(days=20))
    stats = ledger.actor_stats()
    assert stats == {
        ("u1", "r1"): _reads(*(T0 + timedelta(days=day) for day in range(5))),
        ("u2", "r1"): _reads(T0 + timedelta(days=20)),
    }
    base = dict(id="r1", memory_type=MemoryType.semantic, content="x")
    taken = plan_view(MemoryRecord(actor_id="u3", namespace="ns3", created_at=T0, **base))
    assert merge_into_view(taken, stats) is taken  # another actor took the id: none of its reads
    later = plan_view(
        MemoryRecord(actor_id="u1", namespace="ns", created_at=T0 + timedelta(days=10), **base)
    )
    assert merge_into_view(later, stats) is later  # every read predates it: an earlier record's
    b = plan_view(
        MemoryRecord(actor_id="u2", namespace="ns2", created_at=T0 + timedelta(days=10), **base)
    )
    assert merge_into_view(b, stats).access_count == 1  # its own read counts


def test_the_same_actors_new_record_under_a_removed_id_counts_only_its_own_reads(
    ledger: AccessLedger,
) -> None:
    """u1's record r1 was read five times and deleted (the ledger keeps the rows); u1's new
    record r1, created on day 10, is read twice. It is scored with two reads, not seven:
    the first form kept each id's last read and count, so one read of the new record let
    every old one in."""
    for day in (0, 1, 2, 3, 4, 12, 15):
        ledger.append("u1", "ns", "r1", rank=1, at=T0 + timedelta(days=day))
    base = dict(id="r1", actor_id="u1", namespace="ns", memory_type=MemoryType.semantic)
    new = plan_view(MemoryRecord(content="x", created_at=T0 + timedelta(days=10), **base))
    merged = merge_into_view(new, ledger.actor_stats())
    assert merged.access_count == 2
    assert merged.last_accessed == (T0 + timedelta(days=15)).timestamp()
    # a read at the very second of creation is the record's own
    born = plan_view(MemoryRecord(content="x", created_at=T0 + timedelta(days=12), **base))
    assert merge_into_view(born, ledger.actor_stats()).access_count == 2


def test_a_rerun_of_a_night_reads_the_accesses_its_first_run_read(home: Path) -> None:
    """Stats are read up to the run's cutoff so that a rerun decides as the first run did.
    The first form dropped every (actor, record) whose last read came after the cutoff:
    one read the next morning and the rerun saw a record read five times as never read."""
    from memlife.run_start import load_access_stats

    cutoff = T0 + timedelta(days=5)
    home_ledger = AccessLedger(home / "ledger")
    for day in range(5):
        home_ledger.append("u1", "ns", "r1", rank=1, at=T0 + timedelta(days=day))
    home_ledger.close()
    first = load_access_stats(cutoff)
    assert first[("u1", "r1")].count == 5
    later = AccessLedger(home / "ledger")
    later.append("u1", "ns", "r1", rank=1, at=cutoff + timedelta(hours=8))  # the next morning
    later.append("u1", "ns", "r2", rank=1, at=cutoff + timedelta(hours=8))
    later.close()
    assert load_access_stats(cutoff) == first
    assert load_access_stats(cutoff + timedelta(days=1))[("u1", "r1")].count == 6


# ---- CloudTrail ----------------------------------------------------------------------------


def _event(
    name: str,
    when: str,
    req: dict[str, Any],
    resp: dict[str, Any] | None = None,
    source: str = "bedrock-agentcore.amazonaws.com",
) -> dict[str, Any]:
    return {
        "eventVersion": "1.11",
        "userIdentity": {"type": "AssumedRole", "arn": "arn:aws:sts::123:assumed-role/agent/x"},
        "eventTime": when,
        "eventSource": source,
        "eventName": name,
        "awsRegion": "us-east-1",
        "requestParameters": req,
        "responseElements": resp,
        "eventID": f"ev-{name}-{when}",
        "readOnly": True,
        "eventType": "AwsApiCall",
        "managementEvent": False,
        "eventCategory": "Data",
    }


def _log_files() -> dict[str, bytes]:
    retrieve = _event(
        "RetrieveMemoryRecords",
        "2025-05-01T10:00:00Z",
        {
            "memoryId": "mem-1",
            "namespace": "/users/alice/facts",
            "searchCriteria": {"searchQuery": "what does alice drink", "topK": 3},
        },
        {"memoryRecordSummaries": [{"memoryRecordId": "mr-1"}, {"memoryRecordId": "mr-2"}]},
    )
    get = _event(
        "GetMemoryRecord",
        "2025-05-02T08:30:00Z",
        {"memoryId": "mem-1", "memoryRecordId": "mr-1"},
        {"memoryRecord": {"memoryRecordId": "mr-1", "namespaces": ["/strategies/s1/actors/alice"]}},
    )
    no_response = _event(
        "RetrieveMemoryRecords",
        "2025-05-02T09:00:00Z",
        {
            "memoryId": "mem-1",
            "namespace": "/users/bob/facts",
            "searchCriteria": {"searchQuery": "q"},
        },
    )
    explicit_actor = _event(
        "GetMemoryRecord",
        "2025-05-02T09:30:00Z",
        {"memoryId": "mem-1", "memoryRecordId": "mr-7", "actorId": "carol", "namespace": "shared"},
    )
    no_actor = _event("GetMemoryRecord", "2025-05-02T09:40:00Z", {"memoryRecordId": "mr-8"})
    other = _event(
        "GetObject", "2025-05-02T09:00:00Z", {"bucketName": "b"}, source="s3.amazonaws.com"
    )
    write = _event("BatchCreateMemoryRecords", "2025-05-02T09:00:00Z", {"memoryId": "mem-1"})
    name = "123_CloudTrail_us-east-1_20250501T1000Z_{}.json.gz"
    return {
        name.format("aaa"): gzip.compress(json.dumps({"Records": [retrieve, other]}).encode()),
        name.format("bbb"): gzip.compress(
            json.dumps({"Records": [get, no_response, explicit_actor, no_actor, write]}).encode()
        ),
    }


def _check_ingested(ledger: AccessLedger) -> None:
    rows = sorted(ledger.read().to_pylist(), key=lambda r: (r["accessed_at"], r["record_id"]))
    assert [(r["actor_id"], r["namespace"], r["record_id"], r["rank"]) for r in rows] == [
        ("alice", "/users/alice/facts", "mr-1", 1),
        ("alice", "/users/alice/facts", "mr-2", 2),
        ("alice", "/strategies/s1/actors/alice", "mr-1", None),
        ("carol", "shared", "mr-7", None),
    ]
    assert rows[0]["query_sha256"] == query_sha256("what does alice drink")
    assert rows[0]["accessed_at"] == datetime(2025, 5, 1, 10, tzinfo=UTC)
    assert ledger.access_stats(actor_id="alice")["mr-1"] == (
        datetime(2025, 5, 2, 8, 30, tzinfo=UTC),
        2,
    )
    for p in ledger.files():
        assert b"alice drink" not in p.read_bytes()


@pytest.fixture()
def s3() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="trail")
        yield client


def test_ingest_cloudtrail_from_s3(ledger: AccessLedger, s3: Any) -> None:
    prefix = "AWSLogs/123/CloudTrail/us-east-1/2025/05/01/"
    for name, body in _log_files().items():
        s3.put_object(Bucket="trail", Key=prefix + name, Body=body)
    s3.put_object(Bucket="trail", Key=prefix + "digest.txt", Body=b"not a log")
    report = ledger.ingest_cloudtrail("s3://trail/AWSLogs/123/", s3_client=s3)
    assert report.as_dict() == {
        "files": 2,
        "already_ingested": 0,
        "events": 5,
        "rows": 4,
        "skipped": {"no_record_ids": 1, "no_actor": 1},
    }
    _check_ingested(ledger)
    again = ledger.ingest_cloudtrail("s3://trail/AWSLogs/123/", s3_client=s3)
    assert (again.files, again.already_ingested, again.rows) == (0, 2, 0)
    assert ledger.read().num_rows == 4  # not counted twice


def test_ingest_cloudtrail_default_boto3_client(ledger: AccessLedger, s3: Any) -> None:
    name, body = next(iter(_log_files().items()))
    s3.put_object(Bucket="trail", Key=f"logs/{name}", Body=body)
    assert ledger.ingest_cloudtrail("s3://trail/logs/").rows == 2


def test_ingest_cloudtrail_from_folder(ledger: AccessLedger, tmp_path: Path) -> None:
    folder = tmp_path / "trail" / "2025" / "05"
    folder.mkdir(parents=True)
    for name, body in _log_files().items():
        (folder / name).write_bytes(body)
    report = ledger.ingest_cloudtrail(tmp_path / "trail")
    assert (report.files, report.rows) == (2, 4)
    _check_ingested(ledger)
    with pytest.raises(FileNotFoundError):
        ledger.ingest_cloudtrail(tmp_path / "missing")


def test_actor_from_namespace() -> None:
    assert actor_from_namespace("/users/u1/facts") == "u1"
    assert actor_from_namespace("/strategies/s/actors/a-9/sessions/x") == "a-9"
    assert actor_from_namespace("/users/{actorId}/facts") is None
    assert actor_from_namespace("shared") is None and actor_from_namespace(None) is None


NOON = datetime(2025, 5, 1, 12, tzinfo=UTC)


def _bursts(led: AccessLedger, days: int, per_day: int) -> None:
    """A long-lived agent: one flushed part per burst of recalls."""
    for d in range(days):
        for b in range(per_day):
            led.append("u1", "ns", f"r{b % 3}", at=NOON + timedelta(days=d, minutes=b))
            led.flush()


def test_closed_days_are_compacted_and_read_the_same(tmp_path: Path) -> None:
    """Review of this session's age flush: a long-lived agent wrote a part per 30 s burst,
    the local ledger was never compacted, and the nightly run read every part (4,000 parts:
    5 s). A closed day's parts fold into one; today's stay; the stats are the same."""
    led = AccessLedger(tmp_path / "l")
    _bursts(led, days=3, per_day=6)
    stats, rows = led.access_stats(), led.read().num_rows
    last_day = (NOON + timedelta(days=2)).date().isoformat()
    assert led.compact(before=last_day) == {
        NOON.date().isoformat(): 6, (NOON + timedelta(days=1)).date().isoformat(): 6,
    }  # fmt: skip
    assert len(led.files()) == 1 + 1 + 6 and led.access_stats() == stats
    assert led.read().num_rows == rows
    assert led.compact(before=last_day) == {}  # nothing left to fold: idempotent


def test_a_crash_mid_compaction_counts_nothing_twice_and_erasure_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after the folded part is written and before the parts it replaces are gone:
    both are on disk; readers count each access once, and an erasure afterwards leaves no
    row of the erased record in a leftover part (it sweeps them first)."""
    led = AccessLedger(tmp_path / "l")
    _bursts(led, days=1, per_day=4)
    stats = led.access_stats()
    real_unlink = Path.unlink
    monkeypatch.setattr(Path, "unlink", lambda self, missing_ok=False: None)  # the crash
    led.compact(before="2099-01-01")
    monkeypatch.setattr(Path, "unlink", real_unlink)
    on_disk = sorted((tmp_path / "l").glob("date=*/part-*.parquet"))
    assert len(on_disk) == 5 and len(led.files()) == 1  # 4 replaced + 1 folded, 1 read
    assert led.access_stats() == stats
    assert led.erase(["r0"]) == stats["r0"][1]
    assert all("r0" not in pq.read_table(p).column("record_id").to_pylist()
               for p in (tmp_path / "l").glob("date=*/part-*.parquet"))  # fmt: skip
    assert "r0" not in led.access_stats() and led.access_stats()["r1"] == stats["r1"]
