"""CloudTrail ingest under faults (adversarial): a write that fails part way, a forced
re-ingest, and reads of records that were erased. Each row must be in the ledger once, and
an erased record's id never; only the network (S3) is mocked (moto)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memlife.cli import app
from memlife.erase import erase
from memlife.ledger import AccessLedger
from memlife.online.memory import LongTermMemory
from memlife.state.ledger import S3AccessLedger
from memlife.stores.sqlite import SqliteStore
from tests.support.aws_state import aws_state

NS = "/users/u1/facts"
DAY1, DAY2 = "2025-05-01", "2025-05-02"
NAME = "123_CloudTrail_us-east-1_20250501T2355Z_abc.json.gz"


def _get(rid: str, when: str, actor: str = "u1") -> dict[str, Any]:
    return {
        "eventSource": "bedrock-agentcore.amazonaws.com",
        "eventName": "GetMemoryRecord",
        "eventTime": when,
        "requestParameters": {"memoryId": "mem-1", "memoryRecordId": rid},
        "responseElements": {
            "memoryRecord": {"memoryRecordId": rid, "namespaces": [f"/users/{actor}/facts"]}
        },
    }


def _body(*events: dict[str, Any]) -> bytes:
    return gzip.compress(json.dumps({"Records": list(events)}).encode())


def _two_days() -> bytes:
    """One log file whose reads fall on two days (CloudTrail files straddle midnight)."""
    return _body(
        _get("m-1", f"{DAY1}T23:58:00Z"),
        _get("m-2", f"{DAY1}T23:59:00Z"),
        _get("m-3", f"{DAY2}T00:01:00Z"),
    )


def _trail(tmp_path: Path, body: bytes) -> Path:
    folder = tmp_path / "trail" / "2025" / "05" / "01"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / NAME).write_bytes(body)
    return tmp_path / "trail"


def _ids(ledger: AccessLedger) -> list[str]:
    return sorted(ledger.read().column("record_id").to_pylist())


def _fail_once_on(ledger: AccessLedger, monkeypatch: pytest.MonkeyPatch, day: str) -> None:
    """The part writer (every part of the local ledger goes through it) raises the first
    time it writes ``day``: a disk full, a killed process."""
    real, calls = ledger._write_file, []

    def flaky(folder: Path, table: Any, *rest: Any) -> Path:
        if folder.name == f"date={day}" and not calls:
            calls.append(day)
            raise OSError("No space left on device")
        return real(folder, table, *rest)

    monkeypatch.setattr(ledger, "_write_file", flaky)


# -- 1. a failed write must not double count -----------------------------------------------
def test_a_write_failing_on_the_second_day_then_a_rerun_leaves_each_row_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trail = _trail(tmp_path, _two_days())
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    _fail_once_on(ledger, monkeypatch, DAY2)
    with pytest.raises(OSError, match="No space"):
        ledger.ingest_cloudtrail(trail)
    assert _ids(ledger) == ["m-1", "m-2"]  # the first day was written, the file not marked
    report = ledger.ingest_cloudtrail(trail)
    assert (report.files, report.rows) == (1, 3)
    assert _ids(ledger) == ["m-1", "m-2", "m-3"]  # not m-1, m-1, m-2, m-2, m-3
    assert ledger.access_stats()["m-1"][1] == 1
    assert ledger.ingest_cloudtrail(trail).already_ingested == 1


def test_a_rerun_after_the_written_day_was_compacted_twice_leaves_each_row_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the failed ingest and its rerun the nightly compaction folded the day the
    ingest did write (twice over): the rerun must not write it again."""
    trail = _trail(tmp_path, _two_days())
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    _fail_once_on(ledger, monkeypatch, DAY2)
    with pytest.raises(OSError):
        ledger.ingest_cloudtrail(trail)
    for hour in (12, 13):
        ledger.append("u1", NS, "m-9", at=datetime(2025, 5, 1, hour, tzinfo=UTC))
        ledger.flush()
        assert ledger.compact() == {DAY1: 2}
    report = ledger.ingest_cloudtrail(trail)
    assert _ids(ledger) == ["m-1", "m-2", "m-3", "m-9", "m-9"]
    assert (report.rows, report.already_written_rows) == (1, 2)


def test_a_forced_reingest_replaces_the_rows_it_wrote(tmp_path: Path) -> None:
    trail = _trail(tmp_path, _two_days())
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    assert ledger.ingest_cloudtrail(trail).rows == 3
    for _ in range(2):
        report = ledger.ingest_cloudtrail(trail, force=True)
        assert (report.files, report.already_ingested) == (1, 0)
        assert _ids(ledger) == ["m-1", "m-2", "m-3"]
    assert len(ledger.files()) == 2  # one part per day, replaced in place


def test_a_forced_reingest_after_a_compaction_counts_nothing_twice(tmp_path: Path) -> None:
    """The file's part was folded with the day's other parts: the day is left as it is."""
    trail = _trail(tmp_path, _two_days())
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    ledger.ingest_cloudtrail(trail)
    ledger.append("u1", NS, "m-9", at=datetime(2025, 5, 1, 12, tzinfo=UTC))
    ledger.append("u1", NS, "m-9", at=datetime(2025, 5, 2, 12, tzinfo=UTC))
    ledger.flush()
    assert ledger.compact() == {DAY1: 2, DAY2: 2}
    ledger.append("u1", NS, "m-8", at=datetime(2025, 5, 1, 13, tzinfo=UTC))
    ledger.flush()
    assert ledger.compact() == {DAY1: 2}  # a second level: the folded part folded again
    report = ledger.ingest_cloudtrail(trail, force=True)
    assert _ids(ledger) == ["m-1", "m-2", "m-3", "m-8", "m-9", "m-9"]
    assert (report.rows, report.already_written_rows) == (0, 3)


def test_a_forced_reingest_of_a_file_an_earlier_version_ingested_counts_nothing_twice(
    tmp_path: Path,
) -> None:
    """Parts and marker as a version before per-file parts left them (uuid-named parts,
    the plain marker by key): the rows are there; a forced ingest does not add them again."""
    trail = _trail(tmp_path, _two_days())
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    for rid, at in (("m-1", (23, 58)), ("m-2", (23, 59))):
        ledger.append("u1", NS, rid, at=datetime(2025, 5, 1, *at, tzinfo=UTC))
    ledger.append("u1", NS, "m-3", at=datetime(2025, 5, 2, 0, 1, tzinfo=UTC))
    ledger.flush()
    ledger._mark_ingested(str((trail / "2025" / "05" / "01" / NAME).resolve()))
    report = ledger.ingest_cloudtrail(trail, force=True)
    assert _ids(ledger) == ["m-1", "m-2", "m-3"]
    assert (report.rows, report.already_written_rows) == (0, 3)


def test_a_forced_reingest_does_not_bring_back_rows_the_ledger_erased(tmp_path: Path) -> None:
    trail = _trail(tmp_path, _two_days())
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    ledger.ingest_cloudtrail(trail)
    assert ledger.erase(["m-2"]) == 1  # as an erasure scrubs the ledger
    report = ledger.ingest_cloudtrail(trail, force=True)  # no store given: no tombstones
    assert _ids(ledger) == ["m-1", "m-3"]
    assert (report.rows, report.already_written_rows) == (1, 2)  # the second day rewritten


@pytest.fixture()
def s3_ledger() -> Iterator[S3AccessLedger]:
    with aws_state("inprocess") as (_, state):
        state.s3.create_bucket(Bucket="trail")
        yield S3AccessLedger(state)


def test_on_s3_a_put_failing_on_the_second_day_then_a_rerun_leaves_each_row_once(
    s3_ledger: S3AccessLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3 = s3_ledger.state.s3
    s3.put_object(Bucket="trail", Key=f"AWSLogs/1/{NAME}", Body=_two_days())
    real, calls = s3_ledger._put, []

    def flaky(key: str, table: Any, replaces: Any = ()) -> None:
        if f"date={DAY2}/" in key and not calls:
            calls.append(key)
            raise ConnectionError("connection reset")
        real(key, table, replaces)

    monkeypatch.setattr(s3_ledger, "_put", flaky)
    with pytest.raises(ConnectionError):
        s3_ledger.ingest_cloudtrail("s3://trail/AWSLogs/", s3_client=s3)
    report = s3_ledger.ingest_cloudtrail("s3://trail/AWSLogs/", s3_client=s3)
    assert (report.files, report.rows) == (1, 3)
    assert _ids(s3_ledger) == ["m-1", "m-2", "m-3"]
    forced = s3_ledger.ingest_cloudtrail("s3://trail/AWSLogs/", s3_client=s3, force=True)
    assert forced.rows == 3 and _ids(s3_ledger) == ["m-1", "m-2", "m-3"]
    s3_ledger.append("u1", NS, "m-9", at=datetime(2025, 5, 1, 12, tzinfo=UTC))
    s3_ledger.flush()
    assert s3_ledger.compact() == {DAY1: 2}
    forced = s3_ledger.ingest_cloudtrail("s3://trail/AWSLogs/", s3_client=s3, force=True)
    assert (forced.rows, forced.already_written_rows) == (1, 2)  # the second day, in place
    assert _ids(s3_ledger) == ["m-1", "m-2", "m-3", "m-9"]


# -- 2. erased records' ids must not enter the ledger --------------------------------------
FACT = "Was diagnosed with hepatitis C in March."


@pytest.fixture()
def erased(home: Path) -> Iterator[tuple[SqliteStore, str, str]]:
    """A store with two records of u1, the first erased: (store, erased id, kept id)."""
    store = SqliteStore(home / "memlife.db")
    with LongTermMemory(store, ledger=AccessLedger(home / "unused", flush_seconds=None)) as mem:
        gone = mem.remember("u1", NS, "health", FACT).record_id
        kept = mem.remember("u1", NS, "tea", "Drinks green tea.").record_id
    erase(store, "u1", ids=[gone])
    yield store, gone, kept
    store.close()


def _reads(tmp_path: Path, *rids: str) -> Path:
    return _trail(tmp_path, _body(*(_get(r, f"{DAY1}T10:0{i}:00Z") for i, r in enumerate(rids))))


def test_an_ingest_writes_no_row_of_an_erased_record(
    tmp_path: Path, erased: tuple[SqliteStore, str, str]
) -> None:
    store, gone, kept = erased
    trail = _reads(tmp_path, gone, kept, gone)
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    report = ledger.ingest_cloudtrail(trail, store=store)
    assert _ids(ledger) == [kept]
    assert (report.rows, report.erased_rows) == (1, 2)
    assert gone not in json.dumps(report.as_dict()) and report.as_dict()["erased_rows"] == 2
    for part in ledger.files():
        assert gone.encode() not in Path(part).read_bytes()


def test_an_ingest_honours_the_stores_the_ledger_watches(
    tmp_path: Path, erased: tuple[SqliteStore, str, str]
) -> None:
    store, gone, kept = erased
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    ledger.watch_erasures(store)
    ledger.ingest_cloudtrail(_reads(tmp_path, gone, kept))
    assert _ids(ledger) == [kept]


def test_an_erasure_committed_while_the_rows_are_written_is_scrubbed_after(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The erasure commits, and scrubs the ledger, between the ingest's check and its part:
    the part it could not see is scrubbed by the ingest itself."""
    store = SqliteStore(home / "memlife.db")
    with LongTermMemory(store, ledger=AccessLedger(home / "unused", flush_seconds=None)) as mem:
        rid = mem.remember("u1", NS, "health", FACT).record_id
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    real = ledger._write_file

    def erasure_first(folder: Path, table: Any, *rest: Any) -> Path:
        if not store.tombstones("u1"):
            erase(store, "u1", ids=[rid])
        return real(folder, table, *rest)

    monkeypatch.setattr(ledger, "_write_file", erasure_first)
    ledger.ingest_cloudtrail(_reads(tmp_path, rid, "m-other"), store=store)
    assert _ids(ledger) == ["m-other"]
    store.close()


def test_the_ingest_command_leaves_out_the_configured_stores_erased_records(
    tmp_path: Path, erased: tuple[SqliteStore, str, str]
) -> None:
    """`memlife ledger ingest-cloudtrail` with MEMLIFE_STORE (the `home` fixture's store)."""
    _, gone, kept = erased
    trail = _reads(tmp_path, gone, kept)
    ledger = tmp_path / "cli-ledger"
    result = CliRunner().invoke(
        app, ["ledger", "ingest-cloudtrail", str(trail), "--ledger", str(ledger), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert _ids(AccessLedger(ledger)) == [kept]
    out = json.loads(result.stdout)
    assert (out["rows"], out["erased_rows"]) == (1, 1) and gone not in result.output


def test_the_nightly_runs_ingest_leaves_out_its_stores_erased_records(
    home: Path, tmp_path: Path, erased: tuple[SqliteStore, str, str]
) -> None:
    """`memlife run --cloudtrail` (the night reads the trail before scoring) honours the
    erasures of the store it runs on, as the ingest command does."""
    from memlife.pipeline import RunConfig, run_local

    _, gone, kept = erased
    trail = _reads(tmp_path, gone, kept)
    run_local(RunConfig(dry_run=False, cloudtrail=str(trail)))
    assert _ids(AccessLedger(home / "ledger")) == [kept]


def test_the_same_log_file_under_another_key_is_read_once(tmp_path: Path) -> None:
    """Session 28 review: a trail folder moved (or an `aws s3 sync` copy ingested beside
    the bucket) was ingested again under its new keys: every read counted twice."""
    trail = _trail(tmp_path, _two_days())
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    ledger.ingest_cloudtrail(trail)
    moved = tmp_path / "moved"
    trail.rename(moved)
    report = ledger.ingest_cloudtrail(moved)
    assert (report.rows, report.already_ingested) == (0, 1)
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in moved.rglob("*.gz"):
        (copy / f.name).write_bytes(f.read_bytes())
    ledger.ingest_cloudtrail(tmp_path)  # the moved folder and the copy, side by side
    assert _ids(ledger) == ["m-1", "m-2", "m-3"]
    again = ledger.ingest_cloudtrail(copy, force=True)  # forced: replaced, not added
    assert again.rows + again.already_written_rows == 3 and _ids(ledger) == ["m-1", "m-2", "m-3"]
