"""Reading the receipts dataset (memlife/receipts_dataset.py writes it): each run's file,
a record's history across runs, and the runs of a date range.

A run's file is the one its result's receipt sealed (``evidence.dataset_key``); for a run
sealed before receipts named it, the greatest name (its latest seal's). ``receipts
verify`` reports any other file of the run (memlife/evidence_dataset.py).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyarrow as pa
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
    return _sealed(sink, day, run_id, latest)[0]


def _sealed(
    sink: ReceiptSink, day: date, run_id: str, latest: str | None
) -> tuple[str | None, str | None, bool]:
    """(the file to read, the sha256 its seal names or None, whether the run's receipt
    seals a file: False without a receipt, or for a run that sealed no operation)."""
    receipt = latest_receipt(sink, f"runs/{day:%Y/%m/%d}/{run_id}")
    if receipt is None:
        return None, None, False
    evidence = receipt.get("evidence")
    if receipt.get("mode") == "dry_run" or (
        isinstance(evidence, dict) and "parquet_key" in evidence and not evidence["parquet_key"]
    ):  # sealed no operation: no file under its id is its evidence (not a legacy run's)
        return None, None, False
    key = evidence.get("dataset_key") if isinstance(evidence, dict) else None
    if isinstance(key, str) and is_part_key(key) and f"/run_id={run_id}/" in key:
        digest = evidence.get("dataset_sha256") if isinstance(evidence, dict) else None
        return key, digest if isinstance(digest, str) else None, True
    return latest, None, True


def _day_prefixes(since: date | None, until: date | None) -> list[date] | None:
    """One listing per day for a bounded range (cheap on S3); None: list everything."""
    if since is None or until is None or (until - since).days > 366:
        return None
    return [since + timedelta(days=i) for i in range((until - since).days + 1)]


def record_history(
    sink: ReceiptSink, record_id: str, *, since: date | None = None, until: date | None = None,
    problems: list[dict[str, str]] | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """Every operation on ``record_id`` across runs, oldest first (ids, codes, times), each
    with ``store``: the store its run's manifest names (None before manifests named it).
    Record ids are unique within one actor and store only; the rows say whose they are.

    Only sealed evidence is read, and a gap in it is never read as "no operation": into
    ``problems`` go each run whose sealed file differs from its seal (its rows are left
    out: DATASET_DIGEST_MISMATCH), whose sealed file is gone (DATASET_PART_MISSING, also
    for a run whose whole dataset folder is gone), and whose file no receipt seals
    (DATASET_NOT_SEALED: a run killed before its receipt, or a receipt removed)."""
    return _operations(sink, lambda t: pc.equal(t["record_id"], record_id), since, until, problems)


def _operations(
    sink: ReceiptSink, keep: Callable[[pa.Table], pa.ChunkedArray], since: date | None,
    until: date | None, problems: list[dict[str, str]] | None,
) -> list[dict[str, Any]]:  # fmt: skip
    """The sealed operations rows ``keep`` selects, oldest first (``record_history``)."""
    from memlife.evidence import sha256

    found = problems if problems is not None else []
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for day, run_id, key in partition_keys(sink, since, until):
        seen.add(run_id)
        part, digest, receipted = _sealed(sink, day, run_id, key)
        if not receipted:
            found.append({"code": "DATASET_NOT_SEALED", "run_id": run_id, "key": key})
            continue
        body = sink.get(part) if part is not None else None
        if body is None:
            found.append({"code": "DATASET_PART_MISSING", "run_id": run_id, "key": str(part)})
            continue
        if digest is not None and sha256(body) != digest:
            found.append({"code": "DATASET_DIGEST_MISMATCH", "run_id": run_id, "key": str(part)})
            continue
        # read whole, then filtered: `read_table(buffer, filters=...)` goes through Arrow's
        # dataset scanner, whose threads aborted the process at exit about one run in three
        # (pyarrow 26: "terminate called without an active exception", exit 134), and on the
        # calling thread: `read_table` (threads on or off) still aborted about one process in
        # ten at exit (6 of 70, session 29); `ParquetFile.read(use_threads=False)` 0 of 120
        table = pq.ParquetFile(io.BytesIO(body)).read(use_threads=False)
        table = table.filter(keep(table))
        if table.num_rows:
            store = run_info(sink, f"runs/{day:%Y/%m/%d}/{run_id}").store
        for row in table.to_pylist():
            rows.append({"date": day.isoformat(), "run_id": run_id, **row, "store": store})
            rows += _finished_later(sink, rows[-1], found)
    found += _sealed_files_gone(sink, since, until, seen)
    rows.sort(
        key=lambda r: (
            r["cutoff"] or datetime.min.replace(tzinfo=UTC),
            r["updated_at"] or datetime.min.replace(tzinfo=UTC),
        )
    )
    return rows


def _finished_later(
    sink: ReceiptSink, row: dict[str, Any], problems: list[dict[str, str]]
) -> list[dict[str, Any]]:
    """The operation's own receipt, where a sealed row shows it unfinished (FAILED with a
    retry, APPLIED with its receipt owed) and a later run (the next night's retry queue)
    finished it: that run's dataset holds only its own operations, so the sealed row said
    "delete failed" for good while the record was deleted (audit 52f). One row, state
    RECEIPTED, ``after_seal`` True; a receipt that is not the row's operation is a gap."""
    from memlife.evidence import _mismatched, _when
    from memlife.receipts import operation_key
    from memlife.run_receipts import loads

    if row["state"] == "RECEIPTED":
        return []
    key = operation_key(row["operation_id"])
    body = sink.get(key)
    if body is None:  # not finished (or a deferral: its receipt is under deferrals/)
        return []
    doc = loads(body)
    if (
        doc is None
        or doc.get("outcome") in (None, "failed")
        or _mismatched(doc, row, skip=("outcome",))
    ):
        problems.append({"code": "RECEIPT_FIELD_MISMATCH", "run_id": row["run_id"], "key": key})
        return []
    when = _when(doc.get("timestamp"))
    return [{**row, "outcome": doc["outcome"], "state": "RECEIPTED", "attempts": doc.get("attempts"),
             "updated_at": when or row["updated_at"], "after_seal": True}]  # fmt: skip


# how far a superseded record's hand-over is followed (status._repoint walks as far)
MAX_HANDOVERS = 64


def handed_on(
    sink: ReceiptSink, rows: list[dict[str, Any]], *, since: date | None = None,
    until: date | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """What a superseded record was handed on to: when its replacement was superseded in
    its turn, the run re-pointed the record to the new replacement (``status._repoint``)
    with no operation of its own, so ``rows`` (the record's history) still end at the first
    replacement. One row per later supersede down the chain, oldest first: ``action``
    ``handed_on``, the run that superseded ``via``, the ``replacement_id`` it now names.
    One more read of the dataset (every supersede in it); its gaps are those the record's
    own history reported."""
    done = [r for r in rows if r["action"] == "supersede" and r["outcome"] == "superseded"]
    if not done:
        return []
    last = done[-1]
    # a later operation on the record itself (deleted, restored, superseded anew) ends it
    ends = [r["cutoff"] for r in rows[rows.index(last) + 1 :] if r["cutoff"] is not None]
    end = min(ends) if ends else None
    supersedes: dict[str, list[dict[str, Any]]] = {}
    for r in _operations(sink, _supersede, since, until, None):
        if (r["actor_id"], r["store"]) == (last["actor_id"], last["store"]):
            supersedes.setdefault(r["record_id"], []).append(r)
    out: list[dict[str, Any]] = []
    via, after, seen = last["replacement_id"], last["cutoff"], {last["record_id"]}
    while via and via not in seen and len(out) < MAX_HANDOVERS:
        seen.add(via)
        later = [r for r in supersedes.get(via, [])
                 if r["replacement_id"] and r["cutoff"] is not None
                 and (after is None or r["cutoff"] >= after)
                 and (end is None or r["cutoff"] < end)]  # fmt: skip
        if not later:
            break
        step = later[0]
        out.append({**last, "date": step["date"], "run_id": step["run_id"], "action": "handed_on",
                    "reason_codes": ["REPLACEMENT_SUPERSEDED"], "outcome": "re-pointed",
                    "replacement_id": step["replacement_id"], "via": via,
                    "cutoff": step["cutoff"], "updated_at": step["updated_at"],
                    "operation_id": step["operation_id"], "mode": step["mode"]})  # fmt: skip
        via, after = step["replacement_id"], step["cutoff"]
    return out


def _supersede(table: pa.Table) -> pa.ChunkedArray:
    return pc.and_(pc.equal(table["action"], "supersede"), pc.equal(table["outcome"], "superseded"))


def _sealed_files_gone(
    sink: ReceiptSink, since: date | None, until: date | None, listed: set[str]
) -> list[dict[str, str]]:
    """Runs whose receipt seals a dataset file under a folder that is not there at all."""
    days = _day_prefixes(since, until)
    prefixes = [f"runs/{d:%Y/%m/%d}/" for d in days] if days else ["runs/"]
    out = []
    for prefix in prefixes:
        for run_prefix in run_prefixes(sink.list(prefix)):
            run_id = run_prefix.rsplit("/", 1)[1]
            day = _run_day(run_prefix)
            if (
                run_id in listed
                or "-dry-" in run_id  # a dry run writes no dataset: not read for nothing
                or day is None
                or (since and day < since)
                or (until and day > until)
            ):
                continue
            evidence = (latest_receipt(sink, run_prefix) or {}).get("evidence")
            key = evidence.get("dataset_key") if isinstance(evidence, dict) else None
            if isinstance(key, str) and sink.get(key) is None:
                out.append({"code": "DATASET_PART_MISSING", "run_id": run_id, "key": key})
    return out


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
            day = _run_day(run_prefix)
            if day is None or (since and day < since) or (until and day > until):
                continue
            runs.append(run_info(sink, run_prefix))
    runs.sort(key=lambda r: (str(r.manifest.get("cutoff") or (r.receipt or {}).get("cutoff") or ""),
                             r.started_at))  # fmt: skip
    return runs


def _run_day(run_prefix: str) -> date | None:
    """The cutoff day of a run folder ``runs/yyyy/mm/dd/run_id``; None for any other key."""
    parts = run_prefix.split("/")
    try:
        return date(int(parts[1]), int(parts[2]), int(parts[3]))
    except (IndexError, ValueError):
        return None
