"""CloudTrail data events -> memory reads: which AgentCore records were read, by whom, when.

AgentCore keeps no ``lastAccessedAt``; the access ledger learns of reads from recall
telemetry and from CloudTrail data events for ``GetMemoryRecord`` / ``RetrieveMemoryRecords``
delivered to S3 (or a folder) as gzipped JSON. This module only reads and interprets those
files; :meth:`memlife.ledger.AccessLedger.ingest_cloudtrail` writes the rows and remembers
which files it has read (memlife/ledger_ingest.py: each row once, erased records' never).

A file that does not read (a truncated ``.json.gz``, not JSON, ``Records`` not a list) is a
:class:`BadLogFile` naming its key; an event with a field of the wrong shape (``namespaces``
a mapping) is a :class:`BadEvent` naming the field. The ingest skips and reports either and
reads the rest: one bad object must not stop every night's run.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple, TypeGuard

from memlife.errors import InputError
from memlife.text import query_sha256

log = logging.getLogger("memlife.cloudtrail")
BAD_EVENTS_KEPT = 100  # examples a report keeps; every one is counted (skipped["bad_event"])


class ReadHit(NamedTuple):
    """One memory record one read event returned (the ledger's row, field for field)."""

    actor_id: str
    namespace: str
    record_id: str
    accessed_at: datetime
    rank: int | None = None
    query_sha256: str | None = None


# A CloudTrail log file holds about five minutes of one region's events: a few MB once
# inflated. Past this it is no log file (and would be parsed whole into memory).
MAX_LOG_BYTES = 256 << 20


class BadLogFile(InputError):
    """A log file that does not read; the message names its key."""


class BadEvent(InputError):
    """An event with a field of the wrong shape: ``field`` (a path in the event) and why."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field} {reason}")
        self.field, self.reason = field, reason


@dataclass
class IngestReport:
    """What an ingest (:meth:`memlife.ledger.AccessLedger.ingest_cloudtrail`) did."""

    files: int = 0  # log files read
    already_ingested: int = 0  # log files skipped: read by an earlier ingest
    events: int = 0  # AgentCore memory read events seen
    rows: int = 0  # ledger rows written
    erased_rows: int = 0  # rows left out: their records were erased (a count, never an id)
    # rows left out: an earlier ingest of their file wrote them (a forced ingest: they were
    # compacted, rewritten by an erasure, or written before per-file parts)
    already_written_rows: int = 0
    skipped: Counter[str] = field(default_factory=Counter)  # events without a row, by reason
    # files that did not read ("<key>: <why>"): skipped, not marked (read again next time)
    bad_files: list[str] = field(default_factory=list)
    # events of the wrong shape ("<key>: Records[i].<field> <why>"), the first BAD_EVENTS_KEPT
    bad_events: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "files": self.files,
            "already_ingested": self.already_ingested,
            "events": self.events,
            "rows": self.rows,
            "skipped": dict(self.skipped),
        }
        for name in ("erased_rows", "already_written_rows"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        if self.bad_files:
            out["bad_files"] = list(self.bad_files)
        if self.bad_events:
            out["bad_events"] = list(self.bad_events)
        return out


AGENTCORE_SOURCE = "bedrock-agentcore.amazonaws.com"
READ_EVENTS = frozenset({"GetMemoryRecord", "RetrieveMemoryRecords"})
_ACTOR_IN_NAMESPACE = re.compile(r"/(?:actors|users)/([^/]+)")


def is_memory_read(event: object) -> TypeGuard[Mapping[str, Any]]:
    """An AgentCore memory read; an entry of ``Records`` that is no object is a BadEvent."""
    if not isinstance(event, Mapping):
        raise BadEvent("<event>", f"is {type(event).__name__}, not an object")
    name = event.get("eventName")  # a list here raised TypeError and stopped the whole ingest
    return (
        event.get("eventSource") == AGENTCORE_SOURCE
        and isinstance(name, str)
        and (name in READ_EVENTS)
    )


def actor_from_namespace(namespace: str | None) -> str | None:
    """``/users/u1/facts`` -> ``u1``; ``/strategies/s/actors/u1`` -> ``u1``; else None."""
    if not namespace:
        return None
    m = _ACTOR_IN_NAMESPACE.search(namespace)
    return m.group(1) if m and "{" not in m.group(1) else None


def _event_time(event: Mapping[str, Any]) -> datetime | None:
    raw = event.get("eventTime")
    if not isinstance(raw, str):
        return None
    try:
        dt = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        # 9999-12-31T23:00-05:00 is past the calendar in UTC: OverflowError, a bad time
        return dt.astimezone(UTC) if dt.tzinfo else None
    except (ValueError, OverflowError):
        return None


def _as_dict(value: object, field: str) -> Mapping[str, Any]:
    """An object field; missing or null is empty (CloudTrail leaves responses out)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BadEvent(field, f"is {type(value).__name__}, not an object")
    return value


def _text(value: object, field: str) -> str | None:
    """An optional text field: None when missing, null or empty."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise BadEvent(field, f"is {type(value).__name__}, not text")
    return value


def _first_namespace(value: object, field: str) -> str | None:
    """The first of a ``namespaces`` list of text (a mapping printed "error: 0")."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise BadEvent(field, f"is {type(value).__name__}, not a list of text")
    return value[0] if value else None


OWN_CALL = "memlife-store"  # in the user agent of memlife's own AgentCore calls


def read_hits(
    event: Mapping[str, Any],
    actor_resolver: Callable[[Mapping[str, Any]], str | None] | None = None,
) -> tuple[list[ReadHit], str | None]:
    """The records one AgentCore read event returned, and why there are none (or None)."""
    when = _event_time(event)
    if when is None:
        return [], "bad_event_time"
    if event.get("errorCode") is not None:
        return [], "failed_call"  # denied, not found, throttled: nothing was read
    if OWN_CALL in str(event.get("userAgent") or ""):
        return [], "own_call"  # memlife's own read: recall logs what it returned itself
    req = _as_dict(event.get("requestParameters"), "requestParameters")
    resp = _as_dict(event.get("responseElements"), "responseElements")
    name = event.get("eventName")
    asked_ns = _text(req.get("namespace"), "requestParameters.namespace")

    hits: list[tuple[str, str | None, int | None]] = []  # (record id, namespace, rank)
    qsha: str | None = None
    if name == "GetMemoryRecord":
        where = "responseElements.memoryRecord"
        rec = _as_dict(resp.get("memoryRecord"), where)
        rid = _text(req.get("memoryRecordId"), "requestParameters.memoryRecordId") or _text(
            rec.get("memoryRecordId"), f"{where}.memoryRecordId"
        )
        ns = _first_namespace(rec.get("namespaces"), f"{where}.namespaces")
        if rid:
            hits.append((rid, asked_ns or ns, None))
    else:  # RetrieveMemoryRecords
        criteria = _as_dict(req.get("searchCriteria"), "requestParameters.searchCriteria")
        query = criteria.get("searchQuery")
        qsha = query_sha256(query) if isinstance(query, str) and query else None
        summaries = resp.get("memoryRecordSummaries")
        if summaries is not None and not isinstance(summaries, list):
            kind = type(summaries).__name__
            raise BadEvent("responseElements.memoryRecordSummaries", f"is {kind}, not a list")
        for i, s in enumerate(summaries or [], start=1):
            where = f"responseElements.memoryRecordSummaries[{i - 1}]"
            s = _as_dict(s, where)
            rid = _text(s.get("memoryRecordId"), f"{where}.memoryRecordId")
            ns = _first_namespace(s.get("namespaces"), f"{where}.namespaces")
            if rid:
                hits.append((rid, asked_ns or ns, i))
    if not hits:
        return [], "no_record_ids"

    rows: list[ReadHit] = []
    asked_actor = _text(req.get("actorId"), "requestParameters.actorId")
    for rid, ns, rank in hits:
        actor = asked_actor or actor_from_namespace(ns)
        if not actor and actor_resolver is not None:
            actor = actor_resolver(event)
        if not actor:
            return [], "no_actor"
        rows.append(ReadHit(str(actor), str(ns or ""), rid, when, rank, qsha))
    return rows, None


def _gunzip(data: bytes, limit: int) -> bytes:
    """``data`` gunzipped (every member, as gzip.decompress), refusing more than ``limit``
    bytes out: a small file that inflates to gigabytes (a gzip bomb in a bucket the ingest
    reads) was inflated whole, then parsed, by the nightly run."""
    out = bytearray()
    rest = data
    while rest:
        inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        out += inflate.decompress(rest, limit + 1 - len(out))
        if len(out) > limit:
            raise ValueError(f"inflates past {limit} bytes")
        if not inflate.eof:
            raise EOFError("compressed file ended before the end-of-stream marker")
        rest = inflate.unused_data.lstrip(b"\x00")  # gzip pads members with zeros
    return bytes(out)


def read_log(key: str, load: Callable[[], bytes]) -> list[object]:
    """The entries of one log file's ``Records`` (a file without one, a digest, has none),
    as written: an entry that is no object is the ingest's to report. A file that does not
    read is a BadLogFile naming ``key``."""
    try:
        data = load()
        if data[:2] == b"\x1f\x8b":
            data = _gunzip(data, MAX_LOG_BYTES)
        doc = json.loads(data)
    except (OSError, EOFError, zlib.error, ValueError, RecursionError) as exc:
        # OSError: unreadable, or gzip's BadGzipFile; EOFError: a truncated .gz;
        # ValueError: not JSON, not UTF-8
        raise BadLogFile(f"{key}: {type(exc).__name__}: {exc}") from None
    records = doc.get("Records") if isinstance(doc, dict) else None
    if records is not None and not isinstance(records, list):
        raise BadLogFile(f"{key}: Records is {type(records).__name__}, not a list")
    return list(records or [])


def file_hits(
    key: str,
    load: Callable[[], bytes],
    report: IngestReport,
    actor_resolver: Callable[[Mapping[str, Any]], str | None] | None = None,
) -> list[ReadHit] | None:
    """The reads one log file holds, counted into ``report``; None when the file does not
    read (named in ``report.bad_files`` and a warning). An event of the wrong shape is
    skipped, named (key, index, field) and counted as ``skipped["bad_event"]``."""
    try:
        entries = read_log(key, load)
    except BadLogFile as exc:
        report.bad_files.append(str(exc))
        log.warning("CloudTrail: skipped a log file that does not read: %s", exc)
        return None
    hits: list[ReadHit] = []
    bad: list[str] = []
    for i, event in enumerate(entries):
        try:
            if not is_memory_read(event):
                continue
            report.events += 1
            got, why = read_hits(event, actor_resolver)
        except BadEvent as exc:
            where = f"Records[{i}]" + ("" if exc.field == "<event>" else f".{exc.field}")
            bad.append(f"{key}: {where} {exc.reason}")
            continue
        if why:
            report.skipped[why] += 1
        hits += got
    if bad:
        report.skipped["bad_event"] += len(bad)
        report.bad_events += bad[: max(0, BAD_EVENTS_KEPT - len(report.bad_events))]
        log.warning("CloudTrail: skipped %d bad event(s), the first: %s", len(bad), bad[0])
    return hits


def is_log_name(name: str) -> bool:
    return name.endswith((".json.gz", ".json")) and not Path(name).name.startswith(".")


def legacy_name(key: str) -> str:
    """The name an ingest before full keys marked a file by: its base name."""
    return key.rsplit("/", 1)[-1]


def log_files(source: str, s3_client: Any) -> Iterator[tuple[str, Callable[[], bytes]]]:
    """(full key, loader) per log file, in key order: ``s3://bucket/key``, or the file's
    absolute path. The ingest marks each file read by its full key: two files sharing a
    base name in two folders are two files (the second was skipped as already read)."""
    if source.startswith("s3://"):
        bucket, _, prefix = source[len("s3://") :].partition("/")
        if s3_client is None:
            import boto3

            s3_client = boto3.client("s3")
        keys: list[str] = []
        for page in s3_client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix
        ):
            keys += [o["Key"] for o in page.get("Contents", []) if is_log_name(o["Key"])]
        for key in sorted(keys):
            yield f"s3://{bucket}/{key}", functools.partial(_read_object, s3_client, bucket, key)
        return
    root = Path(source)
    if not root.is_dir():
        raise FileNotFoundError(f"CloudTrail source {source!r} is not a folder or s3:// URL")
    root = root.resolve()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and is_log_name(p.name)):
        yield path.as_posix(), path.read_bytes


def _read_object(s3_client: Any, bucket: str, key: str) -> bytes:
    """The object's bytes; an object S3 will not give (AccessDenied under a KMS key the role
    cannot use, NoSuchKey after a lifecycle rule) is an OSError, a bad file like any other:
    it stopped the whole ingest, every night."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        body: bytes = s3_client.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as exc:
        raise OSError(f"{exc.response.get('Error', {}).get('Code', 'error')} from S3") from None
    except BotoCoreError as exc:
        raise OSError(type(exc).__name__) from None
    return body
