"""Import: JSONL records into a store, line by line, never changing a record silently.

Each line is read with a size bound (1 MiB by default; a longer line is skipped to its
newline, never held), checked for nesting depth before it is decoded, decoded and
validated on its own: one bad line is reported by line, id and field and the rest goes
on. A content larger than the policy's ``limits.content_max_bytes`` is a field error.

An id that is already in the store is a conflict: reported, skipped. ``update=True``
turns conflicts into updates, journaled and receipted as a manual run, but never across
actors and never through a held (legal_hold / retained) record unless ``allow_held``.
A second line with an id seen earlier in the same file is reported (DUPLICATE_ID) and
skipped: the first line wins, and nobody wonders which. Content erased for that actor
is refused (ERASED_CONTENT). A ``created_at`` more than a small skew after ``now`` is
imported but reported (FUTURE_CREATED_AT); consolidation never lets it win. A declared
``provenance.content_sha256`` that is not the content's hash is a field error: the
pipeline trusts that hash, so it must not name another content. A record imported as
superseded whose ``replaced_by`` is not an active record of its own actor and namespace
(in the store or the same file) is imported as written and reported (REPLACEMENT_NOT_ACTIVE,
REPLACEMENT_OUT_OF_SCOPE): invariants 3 and 8 are the file's to keep, and it is told.
"""

from __future__ import annotations

import os
import sys
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Generic, TypeVar

from memlife.errors import MemlifeError
from memlife.fast_record import fast_record
from memlife.import_lines import line_bound
from memlife.import_links import check_links
from memlife.import_parse import (
    MAX_DEPTH,
    Chunk,
    Parsed,
    Threads,
    check_declared_sha256,
    checked_text,
)
from memlife.import_parse import json_depth as json_depth  # re-exported
from memlife.import_removed import rowid_mark, with_brought_back
from memlife.import_turns import Limits, NoWorkers, TurnFailed, import_in_turns
from memlife.import_write import (
    Flushed,
    SeenIds,
    drop_repeats,
    row_content_chars,
    row_superseded,
    write_batch,
)
from memlife.journal import Operation, OpKind, Outcome
from memlife.lease import scoped as lease_scoped
from memlife.model import (
    FUTURE_SKEW,
    MemoryRecord,
    RecordError,
    Status,
    parse_record_line,
    utcnow,
)
from memlife.policy import Policy, load_policy
from memlife.stores.base import MAX_BATCH, BatchResult, MemoryStore, chunked
from memlife.stores.sqlite import SqliteStore, row_to_record
from memlife.tombstones import insert_new

BATCH = 500  # records a write (the record path: any store)
# rows a transaction on the SQLite row path. Large on purpose: ids in real files are often
# random (uuids), and each commit writes every index page its rows touched; at 500 rows a
# commit a shuffled 1M-line file imported ~6x slower than the same file in id order
# (BENCHMARKS.md, "Import in random id order"). ~25 MB of demo rows a batch; two in flight.
ROWS_BATCH = 20_000
# ... and at most this much content a batch: 20,000 memories of 64 KiB would hold 1.3 GB
ROWS_BATCH_CHARS = 8_000_000
# a parser's unit: whole lines, ~7,000 demo records (pyarrow's per-call costs amortised)
BLOCK_BYTES = 4 << 20
PARSE_THREADS = 1  # in this process: a parsing thread beside the reader and the writer
TURN_WORKERS = 2  # the default: two processes parsing and writing in turn (import_turns)
# a smaller file imports in this process: starting two workers costs ~1 s
TURNS_MIN_BYTES = 16 << 20
ROWS_PATH = True  # False: the record path for every store (tests compare the two)


class ImportWorkerError(MemlifeError, RuntimeError):
    """A parsing worker process failed: the import stopped; what was stored stays stored."""


@dataclass
class ImportReport:
    imported: int = 0
    updated: int = 0
    unchanged: int = 0  # the id exists with exactly this record: re-import is idempotent
    invalid: list[RecordError] = field(default_factory=list)
    conflicts: list[dict[str, Any]] = field(default_factory=list)  # skipped lines, with a code
    warnings: list[dict[str, Any]] = field(default_factory=list)  # imported, but worth a look
    run: dict[str, Any] | None = None  # the manual run of --update

    def as_json(self) -> dict[str, Any]:
        return {
            "imported": self.imported,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "invalid": [e.as_dict() for e in self.invalid],
            "conflicts": self.conflicts,
            "warnings": self.warnings,
            "update_run": None
            if self.run is None
            else {k: self.run[k] for k in ("run_id", "status", "receipt")},
        }

    @property
    def ok(self) -> bool:
        return not self.invalid and not self.conflicts


def bounded_lines(fh: IO[bytes], max_bytes: int) -> Iterator[tuple[int, bytes | None]]:
    """(line number, raw line) pairs; None for a line over ``max_bytes`` (skipped unread)."""
    n = 0
    while True:
        raw = fh.readline(max_bytes + 1)
        if not raw:
            return
        n += 1
        if len(raw) > max_bytes and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):  # drain the rest in bounded chunks
                raw = fh.readline(max_bytes)
            yield n, None
            continue
        yield n, raw


def line_blocks(fh: IO[bytes], max_bytes: int, block: int) -> Iterator[tuple[int, bytes] | int]:
    """(first line number, whole lines) blocks, or the number of a line over ``max_bytes``,
    which is drained, never held (a longer line inside a block is the worker's to report).
    What is held is bounded by ``max_bytes + block``."""
    for item in line_spans(fh, max_bytes, block):
        yield item if isinstance(item, int) else (item[0], item[2])


def line_spans(fh: IO[bytes], max_bytes: int, block: int) -> Iterator[tuple[int, int, bytes] | int]:
    """:func:`line_blocks` with each block's offset in the file: (first line, offset, lines)."""
    n, buf, start = 1, b"", fh.tell()  # start: the file offset of buf[0]
    while True:
        data = fh.read(block)
        if not data:
            if buf:
                yield n, start, buf  # the last line, without a newline
            return
        buf += data
        cut = buf.rfind(b"\n") + 1
        if cut:
            yield n, start, buf[:cut]
            n += buf.count(b"\n", 0, cut)
            buf, start = buf[cut:], start + cut
        if len(buf) > max_bytes:  # a line longer than the bound, its newline not yet read
            yield n
            n, buf = n + 1, b""
            while data:
                data = fh.read(block)
                end = data.find(b"\n")
                if end >= 0:
                    buf = data[end + 1 :]
                    break
            start = fh.tell() - len(buf)


def parse_line(raw: bytes, n: int, *, content_max: int, max_depth: int = MAX_DEPTH) -> MemoryRecord:
    """One line -> a record, or RecordError naming line, id and field."""
    text = checked_text(raw, n, max_depth)
    record = fast_record(raw)  # None: not plainly valid, the checked path below decides
    if record is None:
        try:
            record = parse_record_line(text, n)
        except RecursionError:  # belt and braces: the depth check should have caught it
            raise RecordError(None, "<json>", "nested too deeply", n) from None
        check_declared_sha256(record, n)
    size = len(record.content.encode("utf-8"))
    if size > content_max:
        raise RecordError(record.id, "content", f"{size} bytes, over the limit of {content_max}", n)
    return record


def import_file(
    store: MemoryStore,
    path: Path,
    *,
    policy: Policy | str | None = None,
    update: bool = False,
    allow_held: bool = False,
    now: datetime | None = None,
    receipts: str | None = None,
    max_line_bytes: int | None = None,
    workers: int | None = None,
) -> ImportReport:
    """Import a JSONL file. ``workers`` (a SQLite store): processes that parse and write in
    turn (import_turns); 0: parse in this process, on a thread beside the reader and the
    writer; None: two processes for a file of TURNS_MIN_BYTES or more on two cores or
    more, else 0. Either way the stored rows and report are the same. Records a receipted
    removal had taken out are imported and named (``PREVIOUSLY_DELETED``, import_removed)."""
    mark = rowid_mark(store)
    report = _import_file(store, path, policy=policy, update=update, allow_held=allow_held,
                          now=now, receipts=receipts, max_line_bytes=max_line_bytes,
                          workers=workers)  # fmt: skip
    report.warnings = with_brought_back(store, mark, report.warnings)
    return report


def _import_file(
    store: MemoryStore,
    path: Path,
    *,
    policy: Policy | str | None,
    update: bool,
    allow_held: bool,
    now: datetime | None,
    receipts: str | None,
    max_line_bytes: int | None,
    workers: int | None,
) -> ImportReport:
    pol = policy if isinstance(policy, Policy) else load_policy(policy)
    now, report = now or utcnow(), ImportReport()
    content_max = pol.limits.content_max_bytes
    max_line_bytes = max_line_bytes or line_bound(content_max)
    future_after = now + FUTURE_SKEW
    # a SQLite store takes rows built by import_parse (columnar where it can); --update
    # and other stores take records (and --update is a receipted manual run)
    if isinstance(store, SqliteStore) and not update and ROWS_PATH:
        count = _turn_workers(workers, path)
        try:
            if count and sys.executable:
                _import_in_turns(store, path, report, count, content_max, max_line_bytes,
                                 future_after)  # fmt: skip
                return _in_line_order(report)
        except NoWorkers:  # no child processes allowed here: parse in this process
            pass
        with Threads(PARSE_THREADS) as parsers:
            _import_rows(store, path, report, parsers, content_max, max_line_bytes, future_after)
        return _in_line_order(report)

    batches = _Batches[MemoryRecord](
        store, report, update, lambda rs: insert_new(store, rs), lambda r: r
    )
    with batches, path.open("rb") as fh:
        for n, raw in bounded_lines(fh, max_line_bytes):
            if raw is None:
                report.invalid.append(
                    RecordError(None, "<line>", f"longer than {max_line_bytes} bytes", n)
                )
                continue
            if not raw.strip():
                continue
            try:
                record = parse_line(raw, n, content_max=content_max)
            except RecordError as exc:
                report.invalid.append(exc)
                continue
            batches.add(n, record.id, record.created_at > future_after, record)
    if batches.updates:
        _apply_updates(store, batches.updates, report, pol, allow_held, now, receipts)
    check_links(store, batches.superseded, report)  # once the file's updates are in too
    return _in_line_order(report)


def _in_line_order(report: ImportReport) -> ImportReport:
    """Skipped lines in line order (whatever the batches were), none also warned as imported."""
    report.conflicts.sort(key=lambda c: int(c["line"]))
    skipped = {(c["line"], "FUTURE_CREATED_AT") for c in report.conflicts}
    report.warnings = [w for w in report.warnings if (w["line"], w["code"]) not in skipped]
    return report


def _turn_workers(workers: int | None, path: Path) -> int:
    if workers is not None:
        return workers
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if (cores or 1) < 2 or path.stat().st_size < TURNS_MIN_BYTES:
        return 0
    return TURN_WORKERS


def _import_in_turns(
    store: SqliteStore,
    path: Path,
    report: ImportReport,
    count: int,
    content_max: int,
    max_line_bytes: int,
    future_after: datetime,
) -> None:
    def over_long(n: int) -> tuple[None, str, str, int]:
        return (None, "<line>", f"longer than {max_line_bytes} bytes", n)

    with path.open("rb") as fh:
        opened = os.fstat(fh.fileno())  # the workers read this file, not what the name is later
        try:
            out = import_in_turns(
                store.path, path.resolve(), line_spans(fh, max_line_bytes, BLOCK_BYTES), count,
                Limits(content_max, max_line_bytes, future_after, (opened.st_dev, opened.st_ino)),
                over_long, ROWS_BATCH, ROWS_BATCH_CHARS,
            )  # fmt: skip
        except TurnFailed as exc:
            raise ImportWorkerError(
                f"import stopped {exc}; the transactions before it are stored whole; "
                "running the same import again finishes it (stored lines count as unchanged)"
            ) from exc
    report.invalid += out.invalid
    report.conflicts += out.held + out.written.conflicts
    report.warnings += out.warnings + out.written.warnings
    report.imported += out.written.imported
    report.unchanged += out.written.unchanged
    check_links(store, out.written.superseded, report)


def _import_rows(
    store: SqliteStore,
    path: Path,
    report: ImportReport,
    pool: Threads,
    content_max: int,
    max_line_bytes: int,
    future_after: datetime,
) -> None:
    """The row path in this process: parsing threads turn blocks of lines into rows; this
    thread merges them in file order into batches (ROWS_BATCH valid lines or
    ROWS_BATCH_CHARS of content, one transaction each), and repeated ids, conflicts,
    warnings and the report come out as the serial loop's
    (tests/unit/test_parallel_import.py). At most ``2 * threads + 1`` blocks are in flight."""
    batches = _Batches[tuple[Any, ...]](
        store, report, False, store.insert_rows, row_to_record,
        size=ROWS_BATCH, max_chars=ROWS_BATCH_CHARS, chars_of=row_content_chars,
        is_superseded=row_superseded,
    )  # fmt: skip
    ready: deque[tuple[int, Parsed | None]] = deque()  # None: the workers' next result

    def take(first_line: int, parsed: Parsed | None) -> None:
        if parsed is None:
            parsed = pool.result()
        for args in parsed.errors:
            report.invalid.append(RecordError(*args))
        for n, row, future in parsed.rows:
            batches.add(n, row[0], future, row)

    with batches, path.open("rb") as fh:
        for item in line_blocks(fh, max_line_bytes, BLOCK_BYTES):
            if isinstance(item, int):
                bad = (None, "<line>", f"longer than {max_line_bytes} bytes", item)
                ready.append((item, Parsed(errors=[bad])))
            else:
                pool.submit(Chunk(item[0], item[1], content_max, max_line_bytes, future_after))
                ready.append((item[0], None))
            while pool.in_flight > 2 * pool.count:
                take(*ready.popleft())
        while ready:
            take(*ready.popleft())
    check_links(store, batches.superseded, report)


T = TypeVar("T")


class _Batches(Generic[T]):
    """Valid lines in file order -> batches (``size`` lines, or ``max_chars`` of content as
    ``chars_of`` counts it) written on one writer thread while the caller parses the next
    (SQLite releases the GIL while it writes). At most two batches are in memory, and the
    report is merged in file order: a batch's DUPLICATE_ID lines, then its write. ``T``: a record (serial path) or its store row (parallel path)."""

    def __init__(
        self,
        store: MemoryStore,
        report: ImportReport,
        update: bool,
        write: Callable[[list[T]], BatchResult],
        record_of: Callable[[T], MemoryRecord],
        size: int | None = None,
        max_chars: int | None = None,
        chars_of: Callable[[T], int] | None = None,
        is_superseded: Callable[[T], bool] | None = None,
    ):
        self.store, self.report, self.update = store, report, update
        self.size = size or BATCH  # read at construction: tests set BATCH
        self.max_chars, self.chars_of, self.chars = max_chars, chars_of, 0
        self.write, self.record_of = write, record_of
        self.parsed: list[tuple[int, str, bool, T]] = []
        self.updates: list[tuple[int, MemoryRecord]] = []
        self.pending: Future[Flushed] | None = None
        self.held: list[dict[str, Any]] = []
        self.is_superseded = is_superseded or (lambda r: r.status is Status.superseded)  # type: ignore[attr-defined]  # T is a MemoryRecord wherever no predicate is given
        self.superseded: list[tuple[int, str]] = []  # (line, id) imported as superseded

    def add(self, n: int, record_id: str, future: bool, item: T) -> None:
        self.parsed.append((n, record_id, future, item))
        if self.chars_of is not None:
            self.chars += self.chars_of(item)
        if len(self.parsed) >= self.size or (self.max_chars and self.chars >= self.max_chars):
            self.hand_over()

    def flush(self, batch: list[tuple[int, str, T]]) -> Flushed:
        """On the writer thread: the only code that touches the store during the loop."""
        return write_batch(
            self.store, batch, self.write, self.record_of, self.is_superseded, self.update
        )

    def merge_pending(self) -> None:
        report = self.report
        if self.pending is not None:
            done = self.pending.result()
            self.pending = None
            report.imported += done.imported
            report.unchanged += done.unchanged
            self.superseded.extend(done.superseded)
            report.warnings.extend(done.warnings)  # PREVIOUSLY_DELETED of unchanged lines
            self.updates.extend(done.updates)
            report.conflicts.extend(done.conflicts)
        report.conflicts.extend(self.held)
        self.held.clear()

    def hand_over(self) -> None:
        """Drop repeated ids (DUPLICATE_ID, first line wins), then queue the rest to store."""
        parsed, self.parsed, self.chars = self.parsed, [], 0
        seen = drop_repeats(self.seen, [(n, rid, future) for n, rid, future, _ in parsed])
        self.held += seen.held
        self.report.warnings += seen.warnings
        dropped = seen.dropped
        batch = [(n, rid, item) for n, rid, _, item in parsed if n not in dropped]
        self.merge_pending()
        if batch:
            self.pending = self.writer.submit(self.flush, batch)

    def __enter__(self) -> _Batches[T]:
        self.seen = SeenIds()
        self.writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memlife-import")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        try:
            if exc_type is None:
                self.hand_over()
                self.merge_pending()
        finally:
            self.writer.shutdown(wait=True)  # a batch being written commits or rolls back whole
            self.seen.close()


@lease_scoped  # the lease the update run takes is given back however the updates end
def _apply_updates(
    store: MemoryStore,
    updates: list[tuple[int, MemoryRecord]],
    report: ImportReport,
    policy: Policy,
    allow_held: bool,
    now: datetime,
    receipts: str | None,
) -> None:
    """--update: a receipted manual run; each change re-checked against the record as it is."""
    from memlife.erase import erase_freed
    from memlife.import_write import update_conflict
    from memlife.lease import for_store
    from memlife.quarantine import manual_run

    # the lease from these checks on (audit 51vi): an erasure landing after the batches
    # found the ids had its text journaled as a refused update's payload, kept for good
    for_store(store, "import-update", "manual:import_update")  # given back by lease_scoped
    ok: list[tuple[int, MemoryRecord]] = []
    for n, new in updates:
        code = update_conflict(store, new, allow_held)
        if code:
            report.conflicts.append({"line": n, "id": new.id, "code": code})
        else:
            ok.append((n, new))
    if not ok:
        return
    run = manual_run(
        store, "import_update", [r.id for _, r in ok], policy=policy, receipts=receipts, now=now
    )
    line_of = {r.id: n for n, r in ok}
    reasons = ["MANUAL_IMPORT_UPDATE", *(["ALLOW_HELD"] if allow_held else [])]
    # the payload is the imported record: the update applier (apply/appliers/update.py)
    # re-checks scope, hold and tombstones against the record as it is now, also on resume
    new_op = run.executor.new_op
    ops = run.journal.plan([
        new_op(OpKind.update, r.actor_id, r.namespace, r.id, reasons, r.sha256, payload=r.to_json())
        for _, r in ok
    ])  # fmt: skip
    done: list[Operation] = []
    for batch in chunked(ops, MAX_BATCH):
        done += run.executor.run_lifecycle(batch, run.tally)
    report.conflicts += [{"line": line_of[o.record_id], "id": o.record_id, "code": o.last_error
                          or "FAILED"} for o in done if o.outcome is not Outcome.updated]  # fmt: skip
    run.extra["updated"] = updated = [o.record_id for o in done if o.outcome is Outcome.updated]
    report.updated += len(updated)
    check_links(store, [(line_of[i], i) for i in updated], report)  # warned as inserts are
    report.run = run.finish()
    # a hold the update lifted: the erasures it deferred run now, as `hold release` runs them
    erase_freed(store, [r.id for _, r in ok if r.id in updated and not r.held], policy, receipts)
