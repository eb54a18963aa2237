"""CloudTrail data events -> memory reads: which AgentCore records were read, by whom, when.

AgentCore keeps no ``lastAccessedAt``; the access ledger learns of reads from recall
telemetry and from CloudTrail data events for ``GetMemoryRecord`` / ``RetrieveMemoryRecords``
delivered to S3 (or a folder) as gzipped JSON. This module only reads and interprets those
files; :meth:`memlife.ledger.AccessLedger.ingest_cloudtrail` writes the rows and remembers
which files it has read.
"""

from __future__ import annotations

import functools
import gzip
import json
import re
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from memlife.text import query_sha256


class ReadHit(NamedTuple):
    """One memory record one read event returned (the ledger's row, field for field)."""

    actor_id: str
    namespace: str
    record_id: str
    accessed_at: datetime
    rank: int | None = None
    query_sha256: str | None = None


AGENTCORE_SOURCE = "bedrock-agentcore.amazonaws.com"
READ_EVENTS = frozenset({"GetMemoryRecord", "RetrieveMemoryRecords"})
_ACTOR_IN_NAMESPACE = re.compile(r"/(?:actors|users)/([^/]+)")


def is_memory_read(event: Mapping[str, Any]) -> bool:
    return event.get("eventSource") == AGENTCORE_SOURCE and event.get("eventName") in READ_EVENTS


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
    except ValueError:
        return None
    return dt.astimezone(UTC) if dt.tzinfo else None


def _as_dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def read_hits(
    event: Mapping[str, Any],
    actor_resolver: Callable[[Mapping[str, Any]], str | None] | None = None,
) -> tuple[list[ReadHit], str | None]:
    """The records one AgentCore read event returned, and why there are none (or None)."""
    when = _event_time(event)
    if when is None:
        return [], "bad_event_time"
    req = _as_dict(event.get("requestParameters"))
    resp = _as_dict(event.get("responseElements"))
    name = event.get("eventName")

    hits: list[tuple[str, str | None, int | None]] = []  # (record id, namespace, rank)
    qsha: str | None = None
    if name == "GetMemoryRecord":
        rid = req.get("memoryRecordId")
        rec = _as_dict(resp.get("memoryRecord"))
        rid = rid or rec.get("memoryRecordId")
        nss = rec.get("namespaces") or []
        if isinstance(rid, str) and rid:
            hits.append((rid, req.get("namespace") or (nss[0] if nss else None), None))
    else:  # RetrieveMemoryRecords
        criteria = _as_dict(req.get("searchCriteria"))
        query = criteria.get("searchQuery")
        qsha = query_sha256(query) if isinstance(query, str) and query else None
        summaries = resp.get("memoryRecordSummaries") or []
        for i, s in enumerate(summaries if isinstance(summaries, list) else [], start=1):
            s = _as_dict(s)
            rid = s.get("memoryRecordId")
            nss = s.get("namespaces") or []
            if isinstance(rid, str) and rid:
                hits.append((rid, req.get("namespace") or (nss[0] if nss else None), i))
    if not hits:
        return [], "no_record_ids"

    rows: list[ReadHit] = []
    for rid, ns, rank in hits:
        actor = req.get("actorId") or actor_from_namespace(ns)
        if not actor and actor_resolver is not None:
            actor = actor_resolver(event)
        if not actor:
            return [], "no_actor"
        rows.append(ReadHit(str(actor), str(ns or ""), rid, when, rank, qsha))
    return rows, None


def parse_log(data: bytes) -> list[Mapping[str, Any]]:
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc = json.loads(data)
    records = doc.get("Records") if isinstance(doc, dict) else None
    return [r for r in records or [] if isinstance(r, Mapping)]


def is_log_name(name: str) -> bool:
    return name.endswith((".json.gz", ".json")) and not Path(name).name.startswith(".")


def log_files(source: str, s3_client: Any) -> Iterator[tuple[str, Callable[[], bytes]]]:
    """(unique name, loader) per log file, in name order."""
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
            yield Path(key).name, functools.partial(_read_object, s3_client, bucket, key)
        return
    root = Path(source)
    if not root.is_dir():
        raise FileNotFoundError(f"CloudTrail source {source!r} is not a folder or s3:// URL")
    for path in sorted(p for p in root.rglob("*") if p.is_file() and is_log_name(p.name)):
        yield path.name, path.read_bytes


def _read_object(s3_client: Any, bucket: str, key: str) -> bytes:
    body: bytes = s3_client.get_object(Bucket=bucket, Key=key)["Body"].read()
    return body
