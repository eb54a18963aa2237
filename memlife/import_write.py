"""What every import path does once its lines are parsed: drop repeated ids, write a batch,
and say what the write found. The serial loop (importer._Batches) and the worker processes
that write in turn (import_turns) share these, so their reports cannot drift apart."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from memlife.model import MemoryRecord, Status
from memlife.sql_in import in_chunks
from memlife.stores.base import BatchResult, MemoryStore
from memlife.stores.sqlite import COLUMNS

T = TypeVar("T")
_CONTENT = COLUMNS.index("content")
_STATUS = COLUMNS.index("status")
_SUPERSEDED = Status.superseded.value  # read once: an enum member's .value is a descriptor call


def row_content_chars(row: tuple[Any, ...]) -> int:
    """A store row's content length (a batch is bounded by content as well as rows)."""
    return len(row[_CONTENT])


def row_superseded(row: tuple[Any, ...]) -> bool:
    return bool(row[_STATUS] == _SUPERSEDED)


class SeenIds:
    """Each id of the file's valid lines with its first line, in a private temporary SQLite
    database (on disk, a small page cache): a dict of a 1M-line file's ids would hold
    ~130 MB, and import memory must stay flat in the number of records. Lookups and
    inserts go in id order: with random ids (uuids) that halves their cost (BENCHMARKS.md,
    "Import in random id order")."""

    CACHE_KIB = 16 << 10  # the table's page cache: 16 MiB, bounded

    def __init__(self) -> None:
        self._con = sqlite3.connect("")  # "": a temporary database, deleted on close
        self._con.execute(f"PRAGMA cache_size=-{self.CACHE_KIB}")
        self._con.execute("CREATE TABLE seen (id TEXT PRIMARY KEY, line INTEGER) WITHOUT ROWID")

    def claim(self, pairs: list[tuple[str, int]]) -> dict[str, int] | None:
        """Record each (id, line) not seen before; None when every id was new (the common
        case: one insert pass, no lookup), else each id's first line. In (id, line) order,
        so of two lines with one id here the first is kept."""
        before = self._con.total_changes
        self._con.executemany("INSERT OR IGNORE INTO seen VALUES (?, ?)", sorted(pairs))
        if self._con.total_changes - before == len(pairs):
            return None
        out: dict[str, int] = {}
        for qs, chunk in in_chunks(sorted({rid for rid, _ in pairs})):
            out.update(self._con.execute(f"SELECT id, line FROM seen WHERE id IN ({qs})", chunk))
        return out

    def close(self) -> None:
        self._con.close()


@dataclass
class Repeats:
    """One run of valid lines after the repeated-id check: the lines skipped (DUPLICATE_ID,
    first line named) and FUTURE_CREATED_AT warnings; every other line is written."""

    held: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)

    @property
    def dropped(self) -> set[int]:
        return {h["line"] for h in self.held}


def drop_repeats(seen: SeenIds, lines: list[tuple[int, str, bool]]) -> Repeats:
    """``lines``: (line, id, created in the future) in file order. The first line of an
    id wins, here and in every later call on the same ``seen``."""
    out = Repeats()
    first = seen.claim([(rid, n) for n, rid, _ in lines])
    for n, rid, future in lines:
        if first is not None and first[rid] != n:
            out.held.append(
                {"line": n, "id": rid, "code": "DUPLICATE_ID", "first_line": first[rid]}
            )
            continue
        if future:
            out.warnings.append(
                {"line": n, "id": rid, "field": "created_at", "code": "FUTURE_CREATED_AT"}
            )
    return out


@dataclass
class Flushed:
    """What one or more batch writes found, merged into the report in file order."""

    imported: int = 0
    unchanged: int = 0
    updates: list[tuple[int, MemoryRecord]] = field(default_factory=list)
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    # (line, id) of the file's superseded records, stored now or found unchanged
    superseded: list[tuple[int, str]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)  # PREVIOUSLY_DELETED

    def extend(self, other: Flushed) -> None:
        self.imported += other.imported
        self.unchanged += other.unchanged
        self.updates += other.updates
        self.conflicts += other.conflicts
        self.superseded += other.superseded
        self.warnings += other.warnings


def write_batch(
    store: MemoryStore,
    batch: list[tuple[int, str, T]],
    write: Callable[[list[T]], BatchResult],
    record_of: Callable[[T], MemoryRecord],
    is_superseded: Callable[[T], bool],
    update: bool,
) -> Flushed:
    """Write one batch of (line, id, item) and sort what came back: stored, unchanged (the
    id holds exactly this record), an update to make (``update``) or a conflict."""
    out = Flushed()
    res = write([item for _, _, item in batch])
    out.imported = len(res.succeeded)
    line_of = {rid: n for n, rid, _ in batch}
    by_id = {rid: item for _, rid, item in batch}
    stored = list(res.succeeded)
    existing = [f.id for f in res.failed if f.code == "ID_EXISTS"]
    current = {i: store.get(i) for i in existing}
    unchanged: list[str] = []
    for f in res.failed:
        if f.code == "ID_EXISTS" and current.get(f.id) == record_of(by_id[f.id]):
            unchanged.append(f.id)
        elif f.code == "ID_EXISTS" and update:
            out.updates.append((line_of[f.id], record_of(by_id[f.id])))
        else:
            out.conflicts.append({"line": line_of[f.id], "id": f.id, "code": f.code})
    out.unchanged = len(unchanged)
    # an unchanged line may be one a killed run of this import stored before it could warn:
    # its links and removals are checked as a stored line's, so a rerun reports as a whole run
    out.superseded = sorted(
        (line_of[rid], rid) for rid in stored + unchanged if is_superseded(by_id[rid])
    )
    if unchanged:
        from memlife.import_removed import unchanged_back  # the journal: only when needed

        out.warnings = unchanged_back(store, unchanged)
    return out


def update_conflict(store: MemoryStore, new: MemoryRecord, allow_held: bool) -> str | None:
    """Why ``--update`` may not overwrite the stored record with ``new`` (None: it may), read
    under the store's lease just before the update is journaled: a record erased since its
    batch found it (RECORD_MISSING), or a text erased meanwhile (ERASED_CONTENT), is never
    journaled as the update's payload, which a refused operation keeps (audit 51vi)."""
    from memlife.tombstones import refusal

    old = store.get(new.id)
    if old is None:
        return "RECORD_MISSING"
    if old.actor_id != new.actor_id:
        return "ACTOR_MISMATCH"
    if old.namespace != new.namespace:
        return "NAMESPACE_MISMATCH"
    if (old.held or new.held) and not allow_held:
        return "HELD"
    return refusal(store, new)
