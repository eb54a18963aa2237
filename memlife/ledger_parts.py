"""Which access-ledger part files are live: a part written to replace others (a day's
compaction, an erasure's rewrite) names them in its metadata, and a crash between its
write and their removal leaves both; a part cut short (a full disk, a partial copy of the
home) is named and left out, else every night and every erasure stopped on it."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

# a part written to replace others (a day's compaction, an erasure's rewrite) names them
REPLACING = "part-r-"
REPLACES = b"memlife.replaces"
# listings of a ledger whose parts another process keeps rewriting before one is settled
LIST_ATTEMPTS = 8
T = TypeVar("T")
L = TypeVar("L")


def readable(part: Path) -> bool:
    """A part whose footer reads and whose columns are the ledger's (:func:`foreign`). One
    that is not (cut short: a full disk, a partial copy of the home; or another tool's
    file) is named and left out: else every night stopped on it."""
    try:
        meta = pq.read_metadata(part)
        problem = foreign(meta.schema.to_arrow_schema(), _footer_nulls(meta))
    except FileNotFoundError:
        return False  # gone since listed: rewritten by another process, not damaged
    except (OSError, pa.ArrowInvalid) as exc:
        problem = str(exc)
    if problem:
        warnings.warn(f"access ledger: unreadable part {part}: {problem}", RuntimeWarning, 2)
        return False
    return True


# the columns a part must hold, with the kind of Arrow type each must be; the others
# (rank, query_sha256) may be missing (read as null) but not of another kind
_REQUIRED = ("actor_id", "namespace", "record_id", "accessed_at")


def _text(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


_KIND = {"actor_id": _text, "namespace": _text, "record_id": _text,
         "accessed_at": pa.types.is_timestamp, "rank": pa.types.is_integer,
         "query_sha256": _text}  # fmt: skip


def foreign(schema: pa.Schema, nulls: Mapping[str, int]) -> str | None:
    """Why a part with these columns (and these null counts) holds no ledger rows, or None.
    A file another tool put in the prefix (DuckDB, Athena, by hand) may miss a column or
    name no actor: such a read was credited to the neighbouring record (reads_by_record
    sorts it after another's rows), and on S3 every night raised on it (audit 50h)."""
    for name, kind in _KIND.items():
        at = schema.get_field_index(name)
        if at < 0:
            if name in _REQUIRED:
                return f"no column {name}"
            continue
        if not kind(schema.field(at).type):
            return f"column {name} is {schema.field(at).type}"
        if name in _REQUIRED and nulls.get(name, 0):
            return f"column {name} holds nulls"
    return None


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table``'s rows in ``schema`` (columns by name; a missing optional one as nulls), or
    ValueError saying why it holds none (:func:`foreign`)."""
    nulls = {n: table.column(n).null_count for n in table.column_names}
    if problem := foreign(table.schema, nulls):
        raise ValueError(problem)
    cols = [
        table.column(f.name).cast(f.type) if f.name in table.column_names
        else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]  # fmt: skip
    return pa.Table.from_arrays(cols, schema=schema)


def _footer_nulls(meta: pq.FileMetaData) -> dict[str, int]:
    """Null counts per top-level column from the footer's statistics (absent: none known)."""
    out: dict[str, int] = {}
    for i in range(meta.num_row_groups):
        group = meta.row_group(i)
        for j in range(group.num_columns):
            col, stats = group.column(j), group.column(j).statistics
            if stats is not None and stats.has_null_count:
                out[col.path_in_schema] = out.get(col.path_in_schema, 0) + stats.null_count
    return out


def replaced(parts: Sequence[Path]) -> set[Path]:
    """The parts that replacing parts among ``parts`` name (their metadata)."""
    gone: set[Path] = set()
    for p in parts:
        if p.name.startswith(REPLACING):
            meta = pq.read_schema(p).metadata or {}
            if REPLACES in meta:
                gone |= {p.parent / n for n in json.loads(meta[REPLACES])}
    return gone


def live_parts(root: Path) -> list[Path]:
    """The readable parts under ``root`` no other part replaces. A part gone between the
    listing and its footer check was rewritten by another process (a night's compaction,
    an erasure, an online worker's scrub: none waits for a reader), which writes the
    replacement first: the parts are listed again. Left out, its other reads were missing
    from the night's scores (audit 51d)."""
    if not root.is_dir():
        return []
    for _ in range(LIST_ATTEMPTS):
        listed = sorted(root.glob("date=*/part-*.parquet"))
        every = [p for p in listed if readable(p)]
        if len(every) < len(listed) and not all(p.exists() for p in listed):
            continue
        try:
            gone = replaced(every)
        except FileNotFoundError:
            continue
        return [p for p in every if p not in gone] if gone else every
    raise FileNotFoundError(f"access ledger {root}: parts kept changing while listed")


def settled(listing: Callable[[], L], read: Callable[[L], T]) -> T:
    """``read`` of the parts ``listing`` gives, listed again while one it listed goes before
    it is read (FileNotFoundError: rewritten by another process, its replacement written
    first, so a fresh listing holds its rows). A night's read failed on it (audit 51d)."""
    for _ in range(LIST_ATTEMPTS - 1):
        try:
            return read(listing())
        except FileNotFoundError:
            continue
    return read(listing())


def access_problem(
    actor_id: object, namespace: object, record_id: object, rank: object
) -> str | None:
    """Why one access cannot be a ledger row, or None. Taken into the buffer, such a row
    failed every later flush of the process: none of its accesses were written (audit 50h)."""
    for name, value in (("actor_id", actor_id), ("namespace", namespace), ("record_id", record_id)):
        if not isinstance(value, str) or not value:
            return f"{name} must be a non-empty string"
    if rank is not None and (
        isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= 2**31 - 1
    ):
        return "rank must be a whole number from 1 (the best hit) to 2**31-1, or None"
    return None
