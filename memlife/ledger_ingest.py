"""Rows into the access ledger, each once: erasures honoured, a CloudTrail log file's days
written under names of their own (:class:`memlife.ledger.AccessLedger` calls this module).

Every write (an online flush, a CloudTrail ingest) goes through :func:`write_checked`: rows
of records an erasure removed are left out, and rows an erasure committed while they were
written are scrubbed after.

A CloudTrail log file's rows go, day by day, to a part named after the file's bytes
(``date=D/part-ct-<sha256>.parquet``: a write under that name replaces the part, never adds
one); each day written is marked (``sha256:<digest>#date=D`` under ``_ingested/cloudtrail``)
and, once every day is, the file (``sha256:<digest>#parts``, then the plain marker by key
that :meth:`~memlife.ledger.AccessLedger.cloudtrail_ingested` reads). So:

- the same file under another key (a folder moved, a synced copy) is read once, then
  skipped as ingested: its reads are the same reads;

- a rerun after a failure part way (the file is not marked) writes the file's days again
  under the same names: a day written before is replaced, not added to;
- a forced ingest (``force=True``) of a marked file rewrites a day only while the file's
  own part still holds it. A day marked written whose part is gone was folded into another
  part by a compaction, or rewritten by an erasure: its rows are there (or erased) and the
  day is left as it is. So is every day of a file a version before per-file parts ingested
  (marked without ``#parts``: its rows are in parts of other names). Rows left so are
  counted (``IngestReport.already_written_rows``), never written twice.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

from memlife import cloudtrail
from memlife.cloudtrail import IngestReport, ReadHit

PART = "part-ct-"  # a part holding one log file's rows of one day


class Row(Protocol):
    @property
    def actor_id(self) -> str: ...

    @property
    def record_id(self) -> str: ...

    @property
    def accessed_at(self) -> datetime: ...


R = TypeVar("R", bound=Row)


class Ledger(Protocol):
    """What this module uses of :class:`memlife.ledger.AccessLedger` (S3AccessLedger:
    markers and parts are objects)."""

    _lock: Any

    def erase(self, record_ids: Iterable[str], actor_id: str | None = None) -> int: ...

    def files(self) -> Sequence[Path | str]: ...

    def cloudtrail_ingested(self, key: str) -> bool: ...

    def _ingested(self, name: str) -> bool: ...

    def _mark_ingested(self, name: str) -> None: ...

    def _write_named(self, day: str, name: str, table: Any) -> None: ...


def by_day(rows: Sequence[R]) -> list[tuple[str, list[R]]]:
    """``rows`` by the UTC day of ``accessed_at``, days in order."""
    days: dict[date, list[R]] = {}
    for r in rows:
        days.setdefault(r.accessed_at.astimezone(UTC).date(), []).append(r)
    return [(day.isoformat(), part) for day, part in sorted(days.items())]


def write_checked(
    ledger: Ledger,
    rows: Sequence[R],
    stores: Sequence[Any],
    write: Callable[[str, list[R]], bool],
    failed: Callable[[list[R]], None] | None = None,
) -> tuple[list[R], int]:
    """``rows`` less those of records an erasure of ``stores`` removed, day by day to
    ``write`` (False: that day is not written); rows an erasure committed meanwhile are
    scrubbed after (its own scrub read the files before they existed). ``failed`` gets the
    rows of the day that raised and of the days after. Returns (the rows written, the
    number of erased records' rows left out)."""
    from memlife.tombstones import erased_times, reused

    try:  # throttled: nothing is written, the rows wait for a later write (audit 51x3)
        erased = erased_times(stores, {(r.actor_id, r.record_id) for r in rows})
    except BaseException:
        if failed is not None:
            failed(list(rows))
        raise
    again = reused(stores, set(erased))

    def gone(r: R) -> bool:
        """The erased record's read: any read of an erased id, but one after the id's last
        erasure where the actor holds the id again with a text no tombstone names."""
        pair = (r.actor_id, r.record_id)
        if pair not in erased:
            return False
        read = r.accessed_at if r.accessed_at.tzinfo else r.accessed_at.replace(tzinfo=UTC)
        return pair not in again or read <= erased[pair]

    days = by_day([r for r in rows if not gone(r)])
    written: list[R] = []
    for i, (day, part) in enumerate(days):
        try:
            if write(day, part):
                written += part
        except BaseException:
            if failed is not None:
                failed([r for _, later in days[i:] for r in later])
            raise
    since = erased_times(stores, {(r.actor_id, r.record_id) for r in written})
    late: dict[str, set[str]] = {}  # actor -> ids erased meanwhile
    for (actor, rid), at in since.items():
        if at != erased.get((actor, rid)):
            late.setdefault(actor, set()).add(rid)
    for actor, ids in late.items():  # every read written of it is the erased record's
        ledger.erase(ids, actor_id=actor)
    return written, len(rows) - sum(len(part) for _, part in days)


def part_name(key: str) -> str:
    """The name of the part (in each day's folder) holding the rows of the log file ``key``."""
    return f"{PART}{hashlib.sha256(key.encode()).hexdigest()[:32]}.parquet"


def day_marker(key: str, day: str) -> str:
    """The marker of a day of ``key`` written (no log key ends so: they end in .json[.gz])."""
    return f"{key}#date={day}"


def parts_marker(key: str) -> str:
    """The marker of a file ingested with per-file parts (written before its plain marker)."""
    return f"{key}#parts"


def days_to_write(
    ledger: Ledger, key: str, marked: bool, days: Iterable[str], live: Callable[[], set[str]]
) -> set[str]:
    """The days of the log file ``key`` (``marked``: ingested before) to write now;
    ``live()``: ``date=D/<name>`` of every stored part."""
    days = set(days)
    if marked and not ledger._ingested(parts_marker(key)):
        return set()  # ingested before per-file parts: the rows are in parts of other names
    done = {d for d in days if ledger._ingested(day_marker(key, d))}
    if not done:
        return days  # no day written before (the common case: nothing is listed)
    name = part_name(key)
    return {d for d in days if d not in done or f"date={d}/{name}" in live()}


def ingest(
    ledger: Ledger,
    source: str,
    stores: Sequence[Any],
    table: Callable[[Sequence[ReadHit]], Any],
    actor_resolver: Callable[[Mapping[str, Any]], str | None] | None,
    s3_client: Any,
    force: bool,
) -> IngestReport:
    """:meth:`memlife.ledger.AccessLedger.ingest_cloudtrail` (``table``: rows -> its table)."""
    report = IngestReport()
    live = functools.cache(
        lambda: {"/".join(str(f).replace("\\", "/").rsplit("/", 2)[-2:]) for f in ledger.files()}
    )
    for key, load in cloudtrail.log_files(source, s3_client):
        marked = ledger.cloudtrail_ingested(key)
        if marked and not force:
            report.already_ingested += 1
            continue
        body: list[bytes] = []
        hits = cloudtrail.file_hits(key, kept_reads(load, body), report, actor_resolver)
        if hits is None:
            continue
        # the file's parts and day markers are named after its bytes: the same log file
        # under another key (a folder moved, an `aws s3 sync` copy) is the same reads
        ident = content_id(body[0])  # read: file_hits gave hits
        if not force and ledger._ingested(parts_marker(ident)):
            report.already_ingested += 1
            ledger._mark_ingested(key)
            continue
        days = days_to_write(ledger, ident, marked, (d for d, _ in by_day(hits)), live)
        name = part_name(ident)

        def write(
            day: str, rows: list[ReadHit], ident: str = ident, name: str = name,
            days: set[str] = days,
        ) -> bool:  # fmt: skip
            if day not in days:
                report.already_written_rows += len(rows)
                return False
            ledger._write_named(day, name, table(rows))  # replaces what a failed run wrote
            ledger._mark_ingested(day_marker(ident, day))
            return True

        with ledger._lock:
            written, erased = write_checked(ledger, hits, stores, write)
        report.rows += len(written)
        report.erased_rows += erased
        report.files += 1
        ledger._mark_ingested(parts_marker(ident))
        ledger._mark_ingested(key)
    return report


def content_id(body: bytes) -> str:
    """A log file's identity for its parts and markers: its bytes, not where it lies."""
    return "sha256:" + hashlib.sha256(body).hexdigest()


def kept_reads(load: Callable[[], bytes], into: list[bytes]) -> Callable[[], bytes]:
    """``load``, keeping what it read in ``into`` (the file is read once)."""

    def read() -> bytes:
        into.append(load())
        return into[-1]

    return read
