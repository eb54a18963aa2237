"""Guards left untested by the twenty-eighth audit (session 37): the local access ledger
(appends, flushes, compaction, erasure, the crash sweep, reads by actor and time), its
CloudTrail ingest (each row once, erased records left out), the merge into planning views,
and the reading of CloudTrail data events (hostile log files). Four tests failed on the code
before session 37: a list-typed event name, an event time past the calendar, an S3 log object
that does not read, a rerun after a crash and two rewrites."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memlife.ledger import AccessLedger

NS = "/users/u1/facts"
T0 = datetime(2025, 5, 1, 10, tzinfo=UTC)


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


def _trail(tmp_path: Path, **files: list[dict[str, Any]]) -> Path:
    """A folder of plain ``.json`` CloudTrail log files (``name=events``)."""
    folder = tmp_path / "trail"
    folder.mkdir(exist_ok=True)
    for name, events in files.items():
        (folder / f"{name}.json").write_text(json.dumps({"Records": events}), encoding="utf-8")
    return folder


def _ids(ledger: AccessLedger) -> list[str]:
    return sorted(ledger.read().column("record_id").to_pylist())


# ---------------------------------------------------------------------------------------
# REAL BUGS: memlife/cloudtrail.py, a hostile event stops the whole ingest


def test_an_event_name_of_the_wrong_type_is_a_bad_event_not_a_crash(tmp_path: Path) -> None:
    """Attacks `event.get("eventName") in READ_EVENTS` in `memlife/cloudtrail.py::
    is_memory_read`: an eventName of the wrong type must be skipped as one bad event
    (module docstring: one bad object must not stop every night's run)."""
    bad = dict(_get("m-9", "2025-05-01T10:00:00Z"), eventName=["GetMemoryRecord"])
    trail = _trail(tmp_path, a=[bad], b=[_get("m-1", "2025-05-01T10:00:00Z")])
    ledger = AccessLedger(tmp_path / "ledger")
    report = ledger.ingest_cloudtrail(trail)
    assert _ids(ledger) == ["m-1"]
    assert report.files == 2


def test_an_event_time_past_the_calendar_is_a_bad_time_not_a_crash(tmp_path: Path) -> None:
    """Attacks `dt.astimezone(UTC)` in `memlife/cloudtrail.py::_event_time` (only ValueError
    is caught): the event must be skipped as ``bad_event_time``, the rest read."""
    trail = _trail(
        tmp_path,
        a=[_get("m-9", "9999-12-31T23:00:00-05:00")],
        b=[_get("m-1", "2025-05-01T10:00:00Z")],
    )
    ledger = AccessLedger(tmp_path / "ledger")
    report = ledger.ingest_cloudtrail(trail)
    assert _ids(ledger) == ["m-1"]
    assert report.skipped["bad_event_time"] == 1


# ---------------------------------------------------------------------------------------
# REAL BUG: memlife/ledger.py + ledger_ingest.py, a crash then two rewrites double count


def test_a_rerun_after_a_crash_and_two_rewrites_writes_each_row_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks `_write_replacing` in `memlife/ledger.py` (a replacing part names only the
    parts it read, not those they replaced) under `days_to_write` in
    `memlife/ledger_ingest.py`: the day's part was written but not marked, so the rerun
    rewrites it; after two rewrites nothing says those rows are already in the ledger."""
    events = [_get(f"m-{i}", f"2025-05-01T1{i}:00:00Z") for i in (1, 2, 3)]
    trail = _trail(tmp_path, a=events)
    ledger = AccessLedger(tmp_path / "ledger")
    real = ledger._mark_ingested

    def killed(name: str) -> None:
        if "#date=" in name:
            raise OSError("killed between the part and its day marker")
        real(name)

    monkeypatch.setattr(ledger, "_mark_ingested", killed)
    with pytest.raises(OSError):
        ledger.ingest_cloudtrail(trail)
    monkeypatch.undo()
    ledger.erase(["m-1"])
    ledger.erase(["m-2"])
    assert _ids(ledger) == ["m-3"]
    ledger.ingest_cloudtrail(trail)  # the rerun
    assert _ids(ledger).count("m-3") == 1


# ---------------------------------------------------------------------------------------
# memlife/ledger.py: compaction


def _two_parts(root: Path) -> AccessLedger:
    """A ledger whose closed day 2025-05-01 holds two parts of the same size."""
    ledger = AccessLedger(root, flush_seconds=None)
    for rid in ("m-1", "m-2"):
        ledger.append("u1", NS, rid, at=T0)
        ledger.flush()
    return ledger


def test_a_failed_compaction_write_keeps_every_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks the order in `memlife/ledger.py::AccessLedger._write_replacing` (the
    replacing part is in place before the parts it replaces go): a rename that fails
    (disk full, a killed process) must leave the day's rows where they were."""
    ledger = _two_parts(tmp_path / "ledger")

    def full(*_: object) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr("memlife.ledger.os.replace", full)
    with pytest.raises(OSError):
        ledger.compact()
    monkeypatch.undo()
    assert _ids(ledger) == ["m-1", "m-2"]


def test_a_part_of_exactly_small_bytes_is_not_folded(tmp_path: Path) -> None:
    """Attacks `p.stat().st_size < small_bytes` in `memlife/ledger.py::AccessLedger.compact`:
    a part of ``small_bytes`` or more stays as it is (docstring)."""
    ledger = _two_parts(tmp_path / "ledger")
    sizes = {Path(p).stat().st_size for p in ledger.files()}
    assert len(sizes) == 1
    assert ledger.compact(small_bytes=sizes.pop()) == {}
    assert len(ledger.files()) == 2


# ---------------------------------------------------------------------------------------
# memlife/cloudtrail.py: which events count, and what a row says


def _retrieve(when: str, *summaries: dict[str, Any], **req: Any) -> dict[str, Any]:
    return {
        "eventSource": "bedrock-agentcore.amazonaws.com",
        "eventName": "RetrieveMemoryRecords",
        "eventTime": when,
        "requestParameters": {"memoryId": "mem-1", **req},
        "responseElements": {"memoryRecordSummaries": list(summaries)},
    }


def test_a_retrieve_row_keeps_rank_asked_namespace_and_query_hash() -> None:
    """Attacks `start=1` (rank), `asked_ns or ns` and the query's hash in
    `memlife/cloudtrail.py::read_hits`: ranks are 1-based positions, the namespace asked
    wins over the record's own, and the query is kept only as its sha256."""
    from memlife.cloudtrail import read_hits
    from memlife.text import query_sha256

    event = _retrieve(
        "2025-05-01T10:00:00Z",
        {"memoryRecordId": "m-1", "namespaces": ["/users/u1/other"]},
        {"memoryRecordId": "m-2", "namespaces": ["/users/u1/other"]},
        namespace=NS,
        searchCriteria={"searchQuery": "where do I live"},
    )
    rows, why = read_hits(event)
    assert why is None
    assert [(r.record_id, r.rank, r.namespace, r.actor_id) for r in rows] == [
        ("m-1", 1, NS, "u1"),
        ("m-2", 2, NS, "u1"),
    ]
    assert {r.query_sha256 for r in rows} == {query_sha256("where do I live")}


def test_a_get_row_names_the_record_asked_for_by_the_actor_asked_for() -> None:
    """Attacks the order of `req.get("memoryRecordId") or rec...`, `asked_ns or ns` and
    `asked_actor or actor_from_namespace(ns)` in `memlife/cloudtrail.py::read_hits`: the
    request is what was read; the response and the namespace are fallbacks."""
    from memlife.cloudtrail import read_hits

    event = _get("m-asked", "2025-05-01T10:00:00Z", actor="u1")
    event["requestParameters"].update(namespace="/users/u2/asked", actorId="u7")
    event["responseElements"]["memoryRecord"]["memoryRecordId"] = "m-returned"
    rows, why = read_hits(event)
    assert why is None
    assert [(r.actor_id, r.namespace, r.record_id, r.rank) for r in rows] == [
        ("u7", "/users/u2/asked", "m-asked", None)
    ]


def test_the_resolver_names_the_actor_a_namespace_does_not() -> None:
    """Attacks `if not actor and actor_resolver is not None` in
    `memlife/cloudtrail.py::read_hits`; and a namespace template never names an actor."""
    from memlife.cloudtrail import read_hits

    event = _get("m-1", "2025-05-01T10:00:00Z", actor="{actorId}")
    assert read_hits(event) == ([], "no_actor")
    rows, why = read_hits(event, lambda e: "from-resolver")
    assert (why, [r.actor_id for r in rows]) == (None, ["from-resolver"])


def test_a_time_without_a_zone_is_a_bad_event_time() -> None:
    """Attacks `if dt.tzinfo else None` in `memlife/cloudtrail.py::_event_time`: a time
    without a zone is not guessed as UTC (it could be any day near midnight)."""
    from memlife.cloudtrail import read_hits

    assert read_hits(_get("m-1", "2025-05-01T23:30:00")) == ([], "bad_event_time")
    rows, _ = read_hits(_get("m-1", "2025-05-01T23:30:00-02:00"))
    assert rows[0].accessed_at == datetime(2025, 5, 2, 1, 30, tzinfo=UTC)


def test_only_agentcore_reads_count() -> None:
    """Attacks `eventSource == AGENTCORE_SOURCE` in `memlife/cloudtrail.py::
    is_memory_read`: another service's event of the same name is no memory read."""
    from memlife.cloudtrail import is_memory_read

    event = dict(_get("m-1", "2025-05-01T10:00:00Z"), eventSource="s3.amazonaws.com")
    assert not is_memory_read(event)
    assert is_memory_read(_get("m-1", "2025-05-01T10:00:00Z"))


def test_bad_events_are_all_counted_but_only_the_first_kept(tmp_path: Path) -> None:
    """Attacks the cap `BAD_EVENTS_KEPT` and `skipped["bad_event"] += len(bad)` in
    `memlife/cloudtrail.py::file_hits`: a hostile file of many bad events keeps a bounded
    report, and every one is counted."""
    from memlife.cloudtrail import BAD_EVENTS_KEPT

    bad = [
        dict(_get(f"m-{i}", "2025-05-01T10:00:00Z"), requestParameters=[i])
        for i in range(BAD_EVENTS_KEPT + 50)
    ]
    trail = _trail(tmp_path, a=bad, b=bad[:10], c=[_get("m-ok", "2025-05-01T10:00:00Z")])
    ledger = AccessLedger(tmp_path / "ledger")
    report = ledger.ingest_cloudtrail(trail)
    assert report.skipped["bad_event"] == BAD_EVENTS_KEPT + 60
    assert len(report.bad_events) == BAD_EVENTS_KEPT
    assert _ids(ledger) == ["m-ok"]


def test_a_dot_named_log_file_is_not_read(tmp_path: Path) -> None:
    """Attacks `not Path(name).name.startswith(".")` in `memlife/cloudtrail.py::
    is_log_name`: a dot-name is a partial download or a temporary file (rsync, aws s3)."""
    trail = _trail(tmp_path, a=[_get("m-1", "2025-05-01T10:00:00Z")])
    (trail / ".b.json").write_text(
        json.dumps({"Records": [_get("m-partial", "2025-05-01T10:00:00Z")]}), encoding="utf-8"
    )
    ledger = AccessLedger(tmp_path / "ledger")
    assert ledger.ingest_cloudtrail(trail).files == 1
    assert _ids(ledger) == ["m-1"]


# ---------------------------------------------------------------------------------------
# memlife/ledger.py: buffered rows, reads since a time


def test_compaction_folds_the_rows_still_buffered(tmp_path: Path) -> None:
    """Attacks `self.flush()` at the start of `memlife/ledger.py::AccessLedger.compact`:
    the rows a long-lived agent still buffers for a closed day are folded with it, not
    left as one more part the night after."""
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    ledger.append("u1", NS, "m-1", at=T0)
    ledger.flush()
    ledger.append("u1", NS, "m-2", at=T0 + timedelta(hours=1))
    assert ledger.compact(before="2025-05-02") == {"2025-05-01": 2}
    assert len(ledger.files()) == 1
    assert _ids(ledger) == ["m-1", "m-2"]


def test_since_in_another_zone_reads_the_utc_day_it_falls_on(tmp_path: Path) -> None:
    """Attacks `since = since.astimezone(UTC)` in `memlife/ledger.py::AccessLedger.read`:
    partitions are UTC days; 2025-05-02T01:00+10:00 is 2025-05-01T15:00Z, so a read at
    16:00Z that day is after it (the local date would prune the whole day)."""
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    ledger.append("u1", NS, "m-early", at=datetime(2025, 5, 1, 14, tzinfo=UTC))
    ledger.append("u1", NS, "m-late", at=datetime(2025, 5, 1, 16, tzinfo=UTC))
    tz = timezone(timedelta(hours=10))
    since = datetime(2025, 5, 2, 1, tzinfo=tz)
    assert ledger.read(since=since).column("record_id").to_pylist() == ["m-late"]
    assert set(ledger.access_stats(since=since)) == {"m-late"}


# ---------------------------------------------------------------------------------------
# memlife/ledger.py: erasure


def test_a_part_an_erasure_leaves_empty_is_removed(tmp_path: Path) -> None:
    """Attacks `if rest.num_rows` in `memlife/ledger.py::AccessLedger._replace_part`: a part
    left empty is removed, not rewritten as an empty part (one more file every night reads,
    and compaction never folds a lone one)."""
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    ledger.append("u1", NS, "m-1", at=T0)
    ledger.append("u1", NS, "m-1", at=T0 + timedelta(days=1))
    ledger.append("u1", NS, "m-2", at=T0 + timedelta(days=1))
    ledger.flush()
    assert ledger.erase(["m-1"]) == 2
    assert [Path(p).parent.name for p in ledger.files()] == ["date=2025-05-02"]
    assert _ids(ledger) == ["m-2"]


def test_rows_given_in_another_zone_go_to_their_utc_day(tmp_path: Path) -> None:
    """Attacks `.astimezone(UTC)` in `memlife/ledger_ingest.py::by_day`: the partition is
    the UTC day of accessed_at (module docstring of memlife/ledger.py), whatever zone the
    row was given in, or a read since that day prunes the row away."""
    from memlife.ledger import Access

    tz = timezone(timedelta(hours=10))
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    ledger.extend([Access("u1", NS, "m-1", datetime(2025, 5, 2, 1, tzinfo=tz))])
    ledger.flush()
    assert [Path(p).parent.name for p in ledger.files()] == ["date=2025-05-01"]
    since = datetime(2025, 5, 1, 14, tzinfo=UTC)
    assert ledger.read(since=since).column("record_id").to_pylist() == ["m-1"]


# ---------------------------------------------------------------------------------------
# memlife/ledger_ingest.py: each row once


def test_a_file_an_earlier_version_marked_by_base_name_is_not_read_again(
    tmp_path: Path,
) -> None:
    """Attacks `or self._ingested(cloudtrail.legacy_name(key))` in `memlife/ledger.py::
    AccessLedger.cloudtrail_ingested`: versions before full keys marked a file by its base
    name (the marker's text is the name); its reads are in the ledger already."""
    trail = _trail(tmp_path, a=[_get("m-1", "2025-05-01T10:00:00Z")])
    ledger = AccessLedger(tmp_path / "ledger")
    ledger.append("u1", NS, "m-1", at=T0)  # what that version wrote
    ledger._mark_ingested("a.json")  # and its marker: sha256 of the base name
    report = ledger.ingest_cloudtrail(trail)
    assert (report.files, report.already_ingested) == (0, 1)
    assert _ids(ledger) == ["m-1"]


def test_compaction_after_a_crashed_erasure_does_not_bring_the_rows_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks `self._sweep()` in `memlife/ledger.py::AccessLedger.compact`: an erasure
    killed between its rewrite and the removal of the old part leaves both; the old part
    is hidden only while the rewrite names it. Folding the rewrite into a compacted part
    without sweeping first unhides it: the erased row back, the rest twice."""
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    ledger.append("u1", NS, "m-1", at=T0)
    ledger.append("u1", NS, "m-2", at=T0)
    ledger.flush()
    ledger.append("u1", NS, "m-3", at=T0)
    ledger.flush()

    def killed(self: Path, missing_ok: bool = False) -> None:
        raise OSError("killed before the old part was removed")

    monkeypatch.setattr(Path, "unlink", killed)
    with pytest.raises(OSError):
        ledger.erase(["m-1"])
    monkeypatch.undo()
    assert _ids(ledger) == ["m-2", "m-3"]
    assert ledger.compact() == {"2025-05-01": 2}
    assert _ids(ledger) == ["m-2", "m-3"]


class _DeniedOn:
    """An S3 client (moto behind it) refused one object: a log file encrypted with a KMS
    key the ingest's role may not use answers AccessDenied to GetObject, night after night."""

    def __init__(self, client: Any, key: str) -> None:
        self.client, self.key = client, key

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def get_object(self, **kw: Any) -> Any:
        from botocore.exceptions import ClientError

        if kw["Key"] == self.key:
            error = {"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}
            raise ClientError(error, "GetObject")
        return self.client.get_object(**kw)


def test_an_s3_log_object_that_does_not_read_is_a_bad_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks the `except (OSError, EOFError, ...)` in `memlife/cloudtrail.py::read_log`
    for S3 sources: an object that does not read is named in ``bad_files`` and the rest
    are read (module docstring: one bad object must not stop every night's run)."""
    import boto3
    from moto import mock_aws

    from tests.support.aws_state import CREDENTIALS

    for k, v in CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="trail")
        for name, rid in (("a", "m-9"), ("b", "m-1")):
            body = json.dumps({"Records": [_get(rid, "2025-05-01T10:00:00Z")]})
            s3.put_object(Bucket="trail", Key=f"logs/{name}.json", Body=body.encode())
        ledger = AccessLedger(tmp_path / "ledger")
        report = ledger.ingest_cloudtrail(
            "s3://trail/logs/", s3_client=_DeniedOn(s3, "logs/a.json")
        )
    assert _ids(ledger) == ["m-1"]
    assert len(report.bad_files) == 1 and "logs/a.json" in report.bad_files[0]


# ---------------------------------------------------------------------------------------
# memlife/ledger_merge.py


def test_reads_written_out_of_order_merge_as_if_in_order(tmp_path: Path) -> None:
    """Attacks `("accessed_at", "ascending")` in `memlife/ledger_merge.py::reads_by_record`:
    `AccessTimes.sorted` takes each slice as sorted (its last, and `since`'s search).
    Rows are stored in the order they came (an agent's clock, a CloudTrail file's events),
    so a later read written first must still be the last, and one before the record's
    creation must not count."""
    from memlife.ledger_merge import merge_into_view
    from memlife.model import MemoryRecord, MemoryType, plan_view

    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    ledger.append("u1", NS, "r1", at=T0 + timedelta(hours=2))
    ledger.append("u1", NS, "r1", at=T0)
    stats = ledger.actor_stats()
    assert stats[("u1", "r1")].last == T0 + timedelta(hours=2)
    rec = MemoryRecord(
        id="r1",
        actor_id="u1",
        namespace=NS,
        memory_type=MemoryType.semantic,
        content="x",
        created_at=T0 + timedelta(hours=1),
    )
    merged = merge_into_view(plan_view(rec), stats)
    assert merged.access_count == 1
    assert merged.last_accessed == (T0 + timedelta(hours=2)).timestamp()


def test_a_namespaces_list_holding_no_text_is_a_bad_event(tmp_path: Path) -> None:
    """Attacks `all(isinstance(n, str) for n in value)` in `memlife/cloudtrail.py::
    _first_namespace`: ``namespaces: [7]`` is a bad event naming the field (not a crash of
    the ingest in the namespace's actor pattern), and the file's other events count."""
    event = _get("m-9", "2025-05-01T10:00:00Z")
    event["responseElements"]["memoryRecord"]["namespaces"] = [7]
    trail = _trail(tmp_path, a=[event, _get("m-1", "2025-05-01T11:00:00Z")])
    ledger = AccessLedger(tmp_path / "ledger")
    report = ledger.ingest_cloudtrail(trail)
    assert report.skipped["bad_event"] == 1
    assert report.bad_events == [
        f"{trail.resolve().as_posix()}/a.json: "
        "Records[0].responseElements.memoryRecord.namespaces is list, not a list of text"
    ]
    assert _ids(ledger) == ["m-1"]


def test_a_log_file_nested_too_deep_is_a_bad_file(tmp_path: Path) -> None:
    """Attacks `RecursionError` in the except of `memlife/cloudtrail.py::read_log`: a
    hostile file nested past the parser's depth is named in ``bad_files``, not a
    traceback that stops the ingest; the other files are read."""
    trail = _trail(tmp_path, b=[_get("m-1", "2025-05-01T10:00:00Z")])
    (trail / "a.json").write_text('{"Records": ' + "[" * 200_000 + "]" * 200_000 + "}")
    ledger = AccessLedger(tmp_path / "ledger")
    report = ledger.ingest_cloudtrail(trail)
    assert len(report.bad_files) == 1 and "a.json: RecursionError" in report.bad_files[0]
    assert _ids(ledger) == ["m-1"]


def test_summaries_that_are_no_list_are_a_bad_event() -> None:
    """Attacks `not isinstance(summaries, list)` in `memlife/cloudtrail.py::read_hits`:
    ``memoryRecordSummaries: 5`` is a BadEvent naming the field, not a TypeError."""
    from memlife.cloudtrail import BadEvent, read_hits

    event = _retrieve("2025-05-01T10:00:00Z", namespace=NS)
    event["responseElements"]["memoryRecordSummaries"] = 5
    with pytest.raises(BadEvent) as caught:
        read_hits(event)
    assert caught.value.field == "responseElements.memoryRecordSummaries"


def test_an_entry_of_records_that_is_no_object_is_named(tmp_path: Path) -> None:
    """Attacks the BadEvent in `memlife/cloudtrail.py::is_memory_read`: an entry of
    ``Records`` that is no object is reported by index, not passed over in silence."""
    trail = _trail(tmp_path, a=[5, _get("m-1", "2025-05-01T10:00:00Z")])  # type: ignore[list-item]
    ledger = AccessLedger(tmp_path / "ledger")
    report = ledger.ingest_cloudtrail(trail)
    assert report.skipped["bad_event"] == 1
    assert report.bad_events[0].endswith("a.json: Records[0] is int, not an object")
    assert _ids(ledger) == ["m-1"]


def test_a_gzip_bomb_is_a_bad_file_and_members_and_padding_still_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks the bound in `memlife/cloudtrail.py::_gunzip` (left by this audit: a small
    file that inflates past any log file was inflated whole, then parsed, in the nightly
    run). A file inflating past ``MAX_LOG_BYTES`` (made 1 MiB here) is a bad file named by
    key, the others are read; a log in two gzip members with zero padding after them reads
    as gzip.decompress reads it."""
    import gzip

    import memlife.cloudtrail as cloudtrail

    monkeypatch.setattr(cloudtrail, "MAX_LOG_BYTES", 1 << 20)
    trail = tmp_path / "trail"
    trail.mkdir()
    bomb = b'{"Records": [' + b" " * (2 << 20) + b"]}"
    (trail / "a.json.gz").write_bytes(gzip.compress(bomb))
    doc = json.dumps({"Records": [_get("m-1", "2025-05-01T10:00:00Z")]}).encode()
    half = len(doc) // 2
    two = gzip.compress(doc[:half]) + gzip.compress(doc[half:]) + b"\x00" * 8
    (trail / "b.json.gz").write_bytes(two)
    assert cloudtrail.read_log("b", lambda: two) == json.loads(doc)["Records"]
    ledger = AccessLedger(tmp_path / "ledger")
    report = ledger.ingest_cloudtrail(trail)
    assert len(report.bad_files) == 1 and "a.json.gz" in report.bad_files[0], report.bad_files
    assert _ids(ledger) == ["m-1"]
    truncated = gzip.compress(doc)[:-12]
    with pytest.raises(cloudtrail.BadLogFile, match="EOFError"):
        cloudtrail.read_log("c", lambda: truncated)
