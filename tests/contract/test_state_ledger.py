"""The access ledger on S3 (moto over HTTP): partitioned by date, small files compacted,
never a row counted twice across a crash, erasure and CloudTrail ingest on S3 too."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import boto3
import pytest

from memlife.state.ledger import S3AccessLedger
from tests.support.aws_state import aws_state
from tests.unit.test_ledger import _log_files

T0 = datetime(2026, 11, 1, 9, tzinfo=UTC)


@pytest.fixture(scope="module")
def server() -> Iterator[object]:
    with aws_state("server", table="ledger-state") as (_, state):
        yield state


@pytest.fixture()
def ledger(server, request) -> S3AccessLedger:
    led = S3AccessLedger(server)
    led.prefix = f"{led.prefix}/{request.node.name}"  # one prefix per test on the shared server
    return led


def fill(ledger: S3AccessLedger, flushes: int = 5) -> None:
    for i in range(flushes):  # one small part per flush, as many online workers would leave
        ledger.append(
            "u-1", "/users/u-1/facts", f"m-{i % 3}", rank=1, at=T0 + timedelta(hours=i * 7)
        )
        ledger.append("u-2", "/users/u-2/facts", "m-9", at=T0 + timedelta(hours=i))
        ledger.flush()


def test_parts_are_partitioned_by_day_and_read_back(ledger: S3AccessLedger) -> None:
    fill(ledger)
    keys = ledger.files()
    assert len(keys) == 5 + 2  # 5 flushes, two of which cross into the next day
    assert all(k.startswith(f"{ledger.prefix}/date=2026-11-0") for k in keys)
    assert {k.split("/")[-2] for k in keys} == {"date=2026-11-01", "date=2026-11-02"}
    stats = ledger.access_stats()
    assert stats["m-9"] == (T0 + timedelta(hours=4), 5)
    assert stats["m-0"][1] == 2 and ledger.read(actor_id="u-2").num_rows == 5
    assert ledger.read(since=T0 + timedelta(hours=20)).num_rows == 2  # 06:00 and 13:00 next day


def test_compaction_folds_small_parts_and_keeps_every_row_once(ledger: S3AccessLedger) -> None:
    fill(ledger)
    before = ledger.access_stats()
    assert ledger.compact() == {"2026-11-01": 5, "2026-11-02": 2}
    assert [k.split("/")[-1].startswith("part-c-") for k in ledger.files()] == [True, True]
    assert ledger.access_stats() == before
    assert ledger.compact() == {}  # one file per day: nothing left to fold


def test_a_crash_mid_compaction_counts_nothing_twice(ledger: S3AccessLedger, monkeypatch) -> None:
    fill(ledger)
    before = ledger.access_stats()

    def crash(keys):
        raise ConnectionError("worker killed after the compacted file was written")

    monkeypatch.setattr(ledger, "_delete", crash)
    with pytest.raises(ConnectionError):
        ledger.compact()
    monkeypatch.undo()
    assert len(ledger.files()) == 7 + 1  # the sources and the compacted file, side by side
    assert ledger.access_stats() == before  # the replaced sources are skipped
    ledger.compact()
    assert ledger.access_stats() == before and len(ledger.files()) == 2


def test_erase_rewrites_only_the_parts_holding_the_records(ledger: S3AccessLedger) -> None:
    fill(ledger)
    assert ledger.erase(["m-9"]) == 5
    assert "m-9" not in ledger.access_stats() and ledger.read().num_rows == 5
    for key in ledger.files():
        body = ledger.state.s3.get_object(Bucket=ledger.bucket, Key=key)["Body"].read()
        assert b"m-9" not in body


def test_cloudtrail_ingest_writes_to_s3(ledger: S3AccessLedger, server) -> None:
    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=server.settings.s3_endpoint_url)
    s3.create_bucket(Bucket="trail")
    for name, body in _log_files().items():
        s3.put_object(Bucket="trail", Key=f"{ledger.prefix}/logs/{name}", Body=body)
    report = ledger.ingest_cloudtrail(f"s3://trail/{ledger.prefix}/logs/", s3_client=s3)
    assert (report.files, report.rows) == (2, 4)
    rows = sorted(ledger.read().to_pylist(), key=lambda r: (r["accessed_at"], r["record_id"]))
    assert [(r["actor_id"], r["record_id"], r["rank"]) for r in rows] == [
        ("alice", "mr-1", 1), ("alice", "mr-2", 2), ("alice", "mr-1", None), ("carol", "mr-7", None),
    ]  # fmt: skip
    again = ledger.ingest_cloudtrail(f"s3://trail/{ledger.prefix}/logs/", s3_client=s3)
    assert (again.files, again.already_ingested) == (0, 2)  # markers live on S3 too
    assert ledger.read().num_rows == 4


def test_compaction_before_a_day_leaves_that_day_open(ledger: S3AccessLedger) -> None:
    fill(ledger)
    assert ledger.compact(before="2026-11-02") == {"2026-11-01": 5}  # the 2nd is still written
    days = sorted(k.split("/")[-2] for k in ledger.files())
    assert days == ["date=2026-11-01", "date=2026-11-02", "date=2026-11-02"]


def test_an_access_history_imported_into_the_s3_ledger_counts_each_read_once(
    ledger: S3AccessLedger, tmp_path
) -> None:
    """`import --access` with $MEMLIFE_STATE: the rows go to S3, one part per day, and a
    second import of the same file adds nothing."""
    import pyarrow.parquet as pq

    from memlife.access_export import import_access
    from memlife.model import MemoryRecord, MemoryType
    from memlife.stores.sqlite import SqliteStore

    fill(ledger)
    pq.write_table(ledger.read(), tmp_path / "reads.parquet")
    target = S3AccessLedger(ledger.state)
    target.prefix = f"{ledger.prefix}-target"
    with SqliteStore(tmp_path / "s.db") as store:
        for actor, rid in (("u-1", "m-0"), ("u-1", "m-1"), ("u-2", "m-9")):
            store.put_many([MemoryRecord(id=rid, actor_id=actor, namespace=f"/users/{actor}/facts",
                                   memory_type=MemoryType.semantic, content=f"fact {rid}",
                                   created_at=T0 - timedelta(days=1))])  # fmt: skip
        first = import_access(store, target, tmp_path / "reads.parquet")
        again = import_access(store, target, tmp_path / "reads.parquet")
    assert (first.rows, first.not_in_store, again.rows, again.already) == (9, 1, 0, 9)
    assert {k.split("/")[-2] for k in target.files()} == {"date=2026-11-01", "date=2026-11-02"}
    counts = {rid: t.count for (_, rid), t in target.actor_stats().items()}
    assert counts == {"m-0": 2, "m-1": 2, "m-9": 5}
