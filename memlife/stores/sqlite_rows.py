"""Which stored row planning could not read, and which field of it.

The planner's fast path reads view rows as they come from SQLite (no pydantic: about 1M
rows a night), so a row someone wrote by hand, or a damaged file, reached it unchecked: an
unknown ``memory_type`` was a KeyError that ended the whole run and printed the stored
value. Checking every page first cost ~1 us a row (a tenth of the dry run's CPU), so the
check runs only after a shard failed to plan (``SqliteStore.corrupt_row``, called by
run_planning): a page is checked column by column, with whole-column operations (a set
per column; ``math.fsum`` refuses anything but numbers, ``str.join`` anything but text),
and only a column that fails is searched row by row. A bad value is a CorruptRecordError
naming the record and the field, never the value: its shard stops and is reported, the
rest of the run goes on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from memlife.errors import CorruptRecordError
from memlife.model import MemoryType, RetentionClass, Source, Status


def _one_of(enum: Any) -> Callable[[Iterable[Any]], object]:
    allowed = frozenset(m.value for m in enum)

    def check(values: Iterable[Any]) -> object:
        if not allowed.issuperset(values):
            raise ValueError
        return None

    return check


def _numbers(values: Iterable[Any]) -> object:
    return math.fsum(values)  # TypeError on text, bytes or None


def _numbers_or_none(values: Iterable[Any]) -> object:
    return math.fsum(set(values) - {None})


def _text(values: Iterable[Any]) -> object:
    return "".join(values)  # TypeError on anything but str


def _text_or_none(values: Iterable[Any]) -> object:
    return "".join(set(values) - {None})


# column of a view row (stores/sqlite.py _VIEW_COLUMNS) -> (the record's field, its check)
VIEW_CHECKS: dict[int, tuple[str, Callable[[Iterable[Any]], object]]] = {
    0: ("id", _text),
    3: ("memory_type", _one_of(MemoryType)),
    4: ("subject", _text_or_none),
    5: ("owner", _text_or_none),
    6: ("source", _one_of(Source)),
    7: ("created_at", _numbers),
    8: ("last_accessed_at", _numbers_or_none),
    9: ("access_count", _numbers),
    10: ("last_verified_at", _numbers_or_none),
    11: ("expires_at", _numbers_or_none),
    12: ("retention_class", _one_of(RetentionClass)),
    13: ("status", _one_of(Status)),
    14: ("status_changed_at", _numbers_or_none),
    17: ("negated", _numbers),
    18: ("confidence", _numbers),
}


def _iso_dates(values: Iterable[Any]) -> object:
    from datetime import datetime

    return [datetime.fromisoformat(v) for v in values]  # TypeError / ValueError


def _iso_dates_or_none(values: Iterable[Any]) -> object:
    return _iso_dates(set(values) - {None})


def _provenance(values: Iterable[Any]) -> object:
    import json

    from memlife.model import Provenance

    for v in values:  # TypeError on bytes or None, ValueError on junk or a wrong key
        Provenance.model_validate(json.loads(v))
    return None


# column of a record row (stores/sqlite.py COLUMNS, the SELECT that builds records) -> check
RECORD_CHECKS: dict[int, tuple[str, Callable[[Iterable[Any]], object]]] = {
    0: ("id", _text),
    1: ("actor_id", _text),
    2: ("namespace", _text),
    3: ("memory_type", _one_of(MemoryType)),
    4: ("subject", _text_or_none),
    5: ("content", _text),
    6: ("owner", _text_or_none),
    7: ("confidence", _numbers),
    8: ("source", _one_of(Source)),
    9: ("created_at", _iso_dates),
    10: ("last_accessed_at", _iso_dates_or_none),
    11: ("access_count", _numbers),
    12: ("last_verified_at", _iso_dates_or_none),
    13: ("expires_at", _iso_dates_or_none),
    14: ("retention_class", _one_of(RetentionClass)),
    15: ("status", _one_of(Status)),
    16: ("status_changed_at", _iso_dates_or_none),
    17: ("provenance", _provenance),
}


def corrupt_field(record_id: object, field: str) -> CorruptRecordError:
    """The error for one field of a stored row that cannot be read (never its value)."""
    rid = record_id if isinstance(record_id, str) else "<not text>"
    return CorruptRecordError(rid, field, "the stored value is not one this field can hold")


def corrupt_record(row: tuple[Any, ...]) -> CorruptRecordError:
    """The error for a record row that did not build: the field at fault, never its value
    (a field no check refuses: the row as a whole)."""
    try:
        checked([row], RECORD_CHECKS)
    except CorruptRecordError as exc:
        return exc
    rid = str(row[0]) if isinstance(row[0], str) else "<not text>"
    return CorruptRecordError(rid, "<row>", "the stored row does not build a record")


def checked(
    rows: Sequence[tuple[Any, ...]],
    checks: dict[int, tuple[str, Callable[[Iterable[Any]], object]]],
) -> None:
    """Raise CorruptRecordError for the first row holding a value ``checks`` refuses."""
    if not rows:
        return
    columns = list(zip(*rows, strict=True))
    for i, (field, check) in checks.items():
        try:
            check(columns[i])
        except (TypeError, ValueError):
            for row in rows:
                try:
                    check((row[i],))
                except (TypeError, ValueError):
                    raise CorruptRecordError(
                        str(row[0]) if isinstance(row[0], str) else "<not text>",
                        field,
                        "the stored value is not one this field can hold",
                    ) from None
