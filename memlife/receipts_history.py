"""Reading the receipts dataset (memlife/receipts_dataset.py writes it): each run's file,
a record's history across runs, and the runs of a date range.

A run's file is the one its result's receipt sealed (``evidence.dataset_key``); for a run
sealed before receipts named it, the greatest name (its latest seal's). ``receipts
verify`` reports any other file of the run (memlife/evidence_dataset.py).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from memlife.audit import ReceiptSink
from memlife.receipts_dataset import PART_KEY, PREFIX, is_part_key
from memlife.review import latest_receipt, run_info, run_prefixes


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
            m = PART_KEY.match(key)
            if m is None:
                continue
            day = date.fromisoformat(m.group(1))
            if (since and day < since) or (until and day > until):
                continue
            run = (m.group(1), m.group(2))
            latest[run] = max(latest.get(run, key), key)
        for (day_s, run_id), key in sorted(latest.items()):
            yield date.fromisoformat(day_s), run_id, key


def sealed_part(sink: ReceiptSink, day: date, run_id: str, latest: str) -> str | None:
    """The run's file to read: the one its result sealed (its receipt's ``dataset_key``),
    else, for a run sealed before receipts named it, ``latest`` (the greatest name). None:
    no run of that id has a receipt in that day's folder (a run's files lie under its
    cutoff day, as its run folder does), so nothing there is a run's evidence. A file added
    beside the sealed one is not read (``receipts verify``: DATASET_NOT_SEALED)."""
    receipt = latest_receipt(sink, f"runs/{day:%Y/%m/%d}/{run_id}")
    if receipt is None:
        return None
    evidence = receipt.get("evidence")
    key = evidence.get("dataset_key") if isinstance(evidence, dict) else None
    if isinstance(key, str) and is_part_key(key) and f"/run_id={run_id}/" in key:
        return key
    return latest


def _day_prefixes(since: date | None, until: date | None) -> list[date] | None:
    """One listing per day for a bounded range (cheap on S3); None: list everything."""
    if since is None or until is None or (until - since).days > 366:
        return None
    return [since + timedelta(days=i) for i in range((until - since).days + 1)]


def record_history(
    sink: ReceiptSink, record_id: str, *, since: date | None = None, until: date | None = None
) -> list[dict[str, Any]]:
    """Every operation on ``record_id`` across runs, oldest first (ids, codes, times), each
    with ``store``: the store its run's manifest names (None before manifests named it).
    Record ids are unique within one actor and store only; the rows say whose they are."""
    rows: list[dict[str, Any]] = []
    for day, run_id, key in partition_keys(sink, since, until):
        part = sealed_part(sink, day, run_id, key)
        body = sink.get(part) if part is not None else None
        if body is None:
            continue
        # read whole, then filtered: `read_table(buffer, filters=...)` goes through Arrow's
        # dataset scanner, whose threads aborted the process at exit about one run in three
        # (pyarrow 26: "terminate called without an active exception", exit 134)
        table = pq.read_table(io.BytesIO(body))
        table = table.filter(pc.equal(table["record_id"], record_id))
        if table.num_rows:
            store = run_info(sink, f"runs/{day:%Y/%m/%d}/{run_id}").store
        for row in table.to_pylist():
            rows.append({"date": day.isoformat(), "run_id": run_id, **row, "store": store})
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
