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
imported but reported (FUTURE_CREATED_AT); consolidation never lets it win.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import numpy as np

from memlife.fast_record import fast_record
from memlife.journal import Operation, OpKind, Outcome
from memlife.model import (
    FUTURE_SKEW,
    MemoryRecord,
    RecordError,
    RetentionClass,
    Status,
    parse_record_line,
    utcnow,
)
from memlife.policy import Policy, load_policy
from memlife.stores.base import MAX_BATCH, MemoryStore, chunked
from memlife.tombstones import insert_new

MAX_LINE_BYTES = 1 << 20
MAX_DEPTH = 16  # a record is 3 deep; 16 leaves room and stops a 100,000-deep line cold
BATCH = 500
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_OPEN = np.zeros(256, np.int8)
_OPEN[[ord("{"), ord("[")]] = 1
_OPEN[[ord("}"), ord("]")]] = -1


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


def json_depth(raw: bytes) -> int:
    """Deepest nesting of objects/arrays in a JSON text, brackets inside strings ignored."""
    bare = _STRING.sub(b'""', raw)
    if not bare:
        return 0
    steps = _OPEN[np.frombuffer(bare, np.uint8)].astype(np.int64)
    return int(np.cumsum(steps).max(initial=0))


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


def parse_line(raw: bytes, n: int, *, content_max: int, max_depth: int = MAX_DEPTH) -> MemoryRecord:
    """One line -> a record, or RecordError naming line, id and field."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(None, "<encoding>", f"not UTF-8 at byte {exc.start}", n) from None
    # depth <= number of opening brackets (those inside strings only overcount): a record
    # line has 3, so the regex-and-numpy depth scan runs only for unusual lines
    if raw.count(b"{") + raw.count(b"[") > max_depth and json_depth(raw) > max_depth:
        raise RecordError(None, "<json>", f"nested deeper than {max_depth} levels", n)
    record = fast_record(raw)  # None: not plainly valid, the checked path below decides
    try:
        record = record or parse_record_line(text, n)
    except RecursionError:  # belt and braces: the depth check should have caught it
        raise RecordError(None, "<json>", "nested too deeply", n) from None
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
    max_line_bytes: int = MAX_LINE_BYTES,
) -> ImportReport:
    pol = policy if isinstance(policy, Policy) else load_policy(policy)
    now = now or utcnow()
    report = ImportReport()
    updates: list[tuple[int, MemoryRecord]] = []

    def flush(batch: list[tuple[int, MemoryRecord]]) -> _Flushed:
        """On the writer thread: the only code that touches the store during the loop."""
        out = _Flushed()
        res = insert_new(store, [r for _, r in batch])
        out.imported = len(res.succeeded)
        line_of = {r.id: n for n, r in batch}
        by_id = {r.id: r for _, r in batch}
        existing = [f.id for f in res.failed if f.code == "ID_EXISTS"]
        current = {i: store.get(i) for i in existing}
        for f in res.failed:
            if f.code == "ID_EXISTS" and current.get(f.id) == by_id[f.id]:
                out.unchanged += 1
            elif f.code == "ID_EXISTS" and update:
                out.updates.append((line_of[f.id], by_id[f.id]))
            else:
                out.conflicts.append({"line": line_of[f.id], "id": f.id, "code": f.code})
        return out

    # The store writes a batch on one writer thread while this thread parses the next
    # (SQLite releases the GIL while it writes). At most two batches are in memory, and
    # the report is merged here in file order: a batch's DUPLICATE_ID lines, then its flush.
    pending: Future[_Flushed] | None = None
    held: list[dict[str, Any]] = []

    def merge_pending() -> None:
        nonlocal pending
        if pending is not None:
            done = pending.result()
            pending = None
            report.imported += done.imported
            report.unchanged += done.unchanged
            updates.extend(done.updates)
            report.conflicts.extend(done.conflicts)
        report.conflicts.extend(held)
        held.clear()

    def hand_over(parsed: list[tuple[int, MemoryRecord]]) -> None:
        """Drop repeated ids (DUPLICATE_ID, first line wins), then queue the rest to store."""
        nonlocal pending
        earlier = seen.first_lines([r.id for _, r in parsed])
        batch: list[tuple[int, MemoryRecord]] = []
        for n, record in parsed:
            first = earlier.get(record.id)
            if first is not None:
                held.append(
                    {"line": n, "id": record.id, "code": "DUPLICATE_ID", "first_line": first}
                )
                continue
            earlier[record.id] = n
            if record.created_at > now + FUTURE_SKEW:
                report.warnings.append(
                    {"line": n, "id": record.id, "field": "created_at", "code": "FUTURE_CREATED_AT"}
                )
            batch.append((n, record))
        seen.add([(r.id, n) for n, r in batch])
        merge_pending()
        if batch:
            pending = writer.submit(flush, batch)

    parsed: list[tuple[int, MemoryRecord]] = []
    with (
        _SeenIds() as seen,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="memlife-import") as writer,
        path.open("rb") as fh,
    ):
        for n, raw in bounded_lines(fh, max_line_bytes):
            if raw is None:
                report.invalid.append(
                    RecordError(None, "<line>", f"longer than {max_line_bytes} bytes", n)
                )
                continue
            if not raw.strip():
                continue
            try:
                parsed.append((n, parse_line(raw, n, content_max=pol.limits.content_max_bytes)))
            except RecordError as exc:
                report.invalid.append(exc)
                continue
            if len(parsed) >= BATCH:
                hand_over(parsed)
                parsed = []
        hand_over(parsed)
        merge_pending()
    if updates:
        _apply_updates(store, updates, report, pol, allow_held, now, receipts)
    return report


class _SeenIds:
    """Each id of the file's valid lines with its first line, in a private temporary SQLite
    database (on disk, a small page cache): a dict of a 1M-line file's ids would hold
    ~130 MB, and import memory must stay flat in the number of records."""

    def __init__(self) -> None:
        self._con = sqlite3.connect("")  # "": a temporary database, deleted on close
        self._con.execute("CREATE TABLE seen (id TEXT PRIMARY KEY, line INTEGER) WITHOUT ROWID")

    def first_lines(self, ids: list[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for chunk in chunked(ids, 500):
            q = f"SELECT id, line FROM seen WHERE id IN ({', '.join('?' * len(chunk))})"
            out.update(self._con.execute(q, chunk).fetchall())
        return out

    def add(self, pairs: list[tuple[str, int]]) -> None:
        self._con.executemany("INSERT INTO seen VALUES (?, ?)", pairs)

    def __enter__(self) -> _SeenIds:
        return self

    def __exit__(self, *exc: object) -> None:
        self._con.close()


@dataclass
class _Flushed:
    """What one batch's write found, merged into the report on the reading thread."""

    imported: int = 0
    unchanged: int = 0
    updates: list[tuple[int, MemoryRecord]] = field(default_factory=list)
    conflicts: list[dict[str, Any]] = field(default_factory=list)


def _is_held(r: MemoryRecord) -> bool:
    return r.retention_class is RetentionClass.legal_hold or r.status is Status.retained


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
    from memlife.quarantine import manual_run

    ok: list[tuple[int, MemoryRecord]] = []
    for n, new in updates:
        old = store.get(new.id)
        code = None
        if old is not None and old.actor_id != new.actor_id:
            code = "ACTOR_MISMATCH"
        elif old is not None and old.namespace != new.namespace:
            code = "NAMESPACE_MISMATCH"
        elif old is not None and (_is_held(old) or _is_held(new)) and not allow_held:
            code = "HELD"
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
    ops = run.journal.plan(
        [
            run.executor.new_op(
                OpKind.update, r.actor_id, r.namespace, r.id, reasons, r.sha256, payload=r.to_json()
            )
            for _, r in ok
        ]
    )
    done: list[Operation] = []
    for batch in chunked(ops, MAX_BATCH):
        done += run.executor.run_lifecycle(batch, run.tally)
    for o in done:
        if o.outcome is Outcome.updated:
            report.updated += 1
        else:
            report.conflicts.append(
                {"line": line_of[o.record_id], "id": o.record_id, "code": o.last_error or "FAILED"}
            )
    run.extra["updated"] = [o.record_id for o in done if o.outcome is Outcome.updated]
    report.run = run.finish()
