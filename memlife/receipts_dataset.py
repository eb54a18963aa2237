"""Receipts as a dataset: every run's operations as Hive-partitioned Parquet, on its own prefix.

Layout (under the receipts root, ``file://`` or ``s3://``; docs/receipts.md)::

    dataset/operations/date=YYYY-MM-DD/run_id=<run_id>/part-0.parquet
    dataset/operations/date=YYYY-MM-DD/run_id=<run_id>/part-NNN.parquet   (a later seal's)

``date`` is the run's processing cutoff (UTC), the same day as its ``runs/yyyy/mm/dd/``
folder. The prefix holds Parquet only, so ``pyarrow.dataset``, DuckDB
(``read_parquet(..., hive_partitioning = true)``) and Athena (partition projection) read
it as one table. Columns are typed (timestamps are timestamps) and carry the run's mode,
cutoff, policy version and service identity beside each operation. Content-free: ids,
codes, hashes, counts and times, as every receipt. Files are create-only like receipts:
each seal of a run (a crashed attempt's failure receipt, then the rerun's completion) writes
its own file, ``part-0``, then ``part-001``, ``part-002``, ...; each holds all of the run's
operations as they stood at that seal, so a reader takes the run's latest file only (the
greatest name: ``latest_parts``; docs/receipts.md shows the DuckDB view that does so).
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from memlife.audit import ReceiptSink
from memlife.journal import Operation

PREFIX = "dataset/operations"

# the file's columns; date and run_id come from the path (hive partitions)
SCHEMA = pa.schema(
    [
        pa.field("operation_id", pa.string(), nullable=False),
        pa.field("actor_id", pa.string(), nullable=False),
        pa.field("namespace", pa.string(), nullable=False),
        pa.field("record_id", pa.string(), nullable=False),
        pa.field("action", pa.string(), nullable=False),
        pa.field("reason_codes", pa.list_(pa.string())),
        pa.field("outcome", pa.string()),
        pa.field("state", pa.string()),
        pa.field("attempts", pa.int32()),
        pa.field("replacement_id", pa.string()),
        pa.field("content_sha256", pa.string()),
        pa.field("updated_at", pa.timestamp("us", tz="UTC")),
        pa.field("mode", pa.string()),
        pa.field("cutoff", pa.timestamp("us", tz="UTC")),
        pa.field("policy_version", pa.string()),
        pa.field("service_identity", pa.string()),
    ]
)

_KEY = re.compile(
    rf"^{PREFIX}/date=(\d{{4}}-\d{{2}}-\d{{2}})/run_id=([^/]+)/part-(0|\d{{3}})\.parquet$"
)


def is_part_key(key: str) -> bool:
    """Whether ``key`` names a partition file (``part-0.parquet``, ``part-NNN.parquet``)."""
    return _KEY.match(key) is not None


def dataset_key(run_id: str, cutoff: datetime, n: int = 0) -> str:
    """The run's ``n``th partition file: part-0.parquet, then part-001.parquet, ... (names
    that sort in the order they were written)."""
    day = cutoff.astimezone(UTC).date().isoformat()
    part = "0" if n == 0 else f"{n:03d}"
    return f"{PREFIX}/date={day}/run_id={run_id}/part-{part}.parquet"


def operations_table(
    ops: Sequence[Operation], *, mode: str, cutoff: datetime, service_identity: str
) -> pa.Table:
    cut = cutoff.astimezone(UTC)
    rows = [
        {
            "operation_id": o.operation_id,
            "actor_id": o.actor_id,
            "namespace": o.namespace,
            "record_id": o.record_id,
            "action": o.kind.value,
            "reason_codes": list(o.reasons),
            "outcome": o.outcome.value if o.outcome else None,
            "state": o.state.value,
            "attempts": o.attempts,
            "replacement_id": o.replacement_id,
            "content_sha256": o.content_sha256,
            "updated_at": o.updated_at.astimezone(UTC) if o.updated_at else None,
            "mode": mode,
            "cutoff": cut,
            "policy_version": o.policy_version,
            "service_identity": service_identity,
        }
        for o in ops
    ]
    return pa.Table.from_pylist(rows, schema=SCHEMA)


class DatasetPart(NamedTuple):
    """A partition file as written: its key and the sha256 of its bytes (the run receipt
    seals both: ``evidence.seal``)."""

    key: str
    sha256: str


def write_operations(
    sink: ReceiptSink, ops: Sequence[Operation], *, run_id: str, cutoff: datetime, mode: str
) -> DatasetPart | None:
    """Create this seal's partition file of the run; its key and digest, or None when
    there is nothing to write (or no free name).

    Create-only: an earlier seal's file stays as written (as receipts do); this one takes
    the next name, so the run's latest file is its latest seal's operations.
    """
    if not ops:
        return None
    from memlife.receipts import service_identity

    table = operations_table(ops, mode=mode, cutoff=cutoff, service_identity=service_identity())
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    body = buf.getvalue()
    for n in range(1000):
        key = dataset_key(run_id, cutoff, n)
        if sink.put_new(key, body, "application/vnd.apache.parquet"):
            return DatasetPart(key, hashlib.sha256(body).hexdigest())
    return None


# -- reading ---------------------------------------------------------------------------------


def partition_keys(
    sink: ReceiptSink, since: date | None = None, until: date | None = None
) -> Iterator[tuple[date, str, str]]:
    """(cutoff date, run id, key) of each run's latest partition file (its latest seal's:
    an earlier attempt's file holds the run's operations as they stood then), by date
    folder, oldest first."""
    days = _day_prefixes(since, until)
    prefixes = [f"{PREFIX}/date={d.isoformat()}/" for d in days] if days else [f"{PREFIX}/"]
    for prefix in prefixes:
        latest: dict[tuple[str, str], str] = {}
        for key in sink.list(prefix):
            m = _KEY.match(key)
            if m is None:
                continue
            day = date.fromisoformat(m.group(1))
            if (since and day < since) or (until and day > until):
                continue
            run = (m.group(1), m.group(2))
            latest[run] = max(latest.get(run, key), key)
        for (day_s, run_id), key in sorted(latest.items()):
            yield date.fromisoformat(day_s), run_id, key


def sealed_part(sink: ReceiptSink, day: date, run_id: str) -> str | None:
    """The file the run's result sealed (its receipt's ``dataset_key``), or None for a run
    sealed before receipts named it (the reader then takes the greatest name). A file added
    beside the sealed one is not read (``receipts verify``: DATASET_NOT_SEALED)."""
    from memlife.review import latest_receipt

    receipt = latest_receipt(sink, f"runs/{day:%Y/%m/%d}/{run_id}")
    evidence = (receipt or {}).get("evidence")
    key = evidence.get("dataset_key") if isinstance(evidence, dict) else None
    if isinstance(key, str) and is_part_key(key) and f"/run_id={run_id}/" in key:
        return key
    return None


def _day_prefixes(since: date | None, until: date | None) -> list[date] | None:
    """One listing per day for a bounded range (cheap on S3); None: list everything."""
    if since is None or until is None or (until - since).days > 366:
        return None
    return [since + timedelta(days=i) for i in range((until - since).days + 1)]


def record_history(
    sink: ReceiptSink, record_id: str, *, since: date | None = None, until: date | None = None
) -> list[dict[str, Any]]:
    """Every operation on ``record_id`` across runs, oldest first (ids, codes, times)."""
    rows: list[dict[str, Any]] = []
    for day, run_id, key in partition_keys(sink, since, until):
        body = sink.get(sealed_part(sink, day, run_id) or key)
        if body is None:
            continue
        # read whole, then filtered: `read_table(buffer, filters=...)` goes through Arrow's
        # dataset scanner, whose threads aborted the process at exit about one run in three
        # (pyarrow 26: "terminate called without an active exception", exit 134)
        table = pq.read_table(io.BytesIO(body))
        table = table.filter(pc.equal(table["record_id"], record_id))
        for row in table.to_pylist():
            rows.append({"date": day.isoformat(), "run_id": run_id, **row})
    rows.sort(
        key=lambda r: (
            r["cutoff"] or datetime.min.replace(tzinfo=UTC),
            r["updated_at"] or datetime.min.replace(tzinfo=UTC),
        )
    )
    return rows


def runs_between(sink: ReceiptSink, since: date | None, until: date | None) -> list[Any]:
    """Runs whose cutoff day is within [since, until], read from the ``runs/yyyy/mm/dd/``
    folders (one listing per day for a bounded range), oldest first."""
    from memlife.review import run_info, run_prefixes

    days = _day_prefixes(since, until)
    prefixes = [f"runs/{d:%Y/%m/%d}/" for d in days] if days else ["runs/"]
    runs = []
    for prefix in prefixes:
        # a run folder by its manifest or by a receipt (a run whose manifest is gone is
        # still listed; a manifest that does not parse reads as {}: ``verify`` names both)
        for run_prefix in run_prefixes(sink.list(prefix)):
            parts = run_prefix.split("/")  # runs/yyyy/mm/dd/run_id
            try:
                day = date(int(parts[1]), int(parts[2]), int(parts[3]))
            except (IndexError, ValueError):
                continue
            if (since and day < since) or (until and day > until):
                continue
            runs.append(run_info(sink, run_prefix))
    runs.sort(key=lambda r: (str(r.manifest.get("cutoff") or (r.receipt or {}).get("cutoff") or ""),
                             r.started_at))  # fmt: skip
    return runs
