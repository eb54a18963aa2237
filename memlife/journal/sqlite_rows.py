"""How an operation is kept in the SQLite journal (memlife/journal/sqlite.py): its columns,
and a stored row read back into an ``Operation``, each field checked as it is parsed."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from memlife.journal.base import Operation, OpKind, OpState, Outcome, checked, stored_field

COLS = (
    "operation_id", "run_id", "kind", "actor_id", "namespace", "record_id", "reasons",
    "policy_version", "content_sha256", "replacement_id", "state", "outcome", "attempts",
    "next_retry_at", "last_error", "payload", "created_at", "updated_at",
)  # fmt: skip
SELECT = (
    f"SELECT {', '.join(COLS)}, resolution, resolved_at, moved_by, moved_after_receipts "
    "FROM operations"
)


def when(v: str | None) -> datetime | None:
    return datetime.fromisoformat(v) if v else None


def _outcome(v: str | None) -> Outcome | None:
    return Outcome(v) if v else None


def _text(v: Any) -> str:
    """A text column as the journal writes it. SQLite's column types are advisory: a BLOB
    put there by hand came back as bytes and ended every night's retry queue in a bare
    TypeError (sorting a shard of bytes), where DynamoDB refuses it by name (audit 53f)."""
    if not isinstance(v, str):
        raise TypeError("not text")
    return v


def _opt_text(v: Any) -> str | None:
    return None if v is None else _text(v)


def row_of(row: tuple[Any, ...]) -> Operation:
    """A stored row (``SELECT``'s columns). A row edited by hand (a state, kind or outcome
    outside the enums, a time or reasons unreadable, attempts its state denies) is a
    JournalStateError naming the operation and the field (base.stored_field, base.checked)."""
    oid = row[0]

    def f(name: str, parse: Callable[[Any], Any], raw: Any) -> Any:
        return stored_field(oid, name, parse, raw)

    return checked(Operation(
        operation_id=oid, run_id=f("run_id", _text, row[1]), kind=f("kind", OpKind, row[2]),
        actor_id=f("actor_id", _text, row[3]), namespace=f("namespace", _text, row[4]),
        record_id=f("record_id", _text, row[5]), reasons=f("reasons", json.loads, row[6]),
        policy_version=f("policy_version", _text, row[7]),
        content_sha256=f("content_sha256", _opt_text, row[8]),
        replacement_id=f("replacement_id", _opt_text, row[9]),
        state=f("state", OpState, row[10]), outcome=f("outcome", _outcome, row[11]),
        attempts=row[12], next_retry_at=f("next_retry_at", when, row[13]),
        last_error=f("last_error", _opt_text, row[14]), payload=f("payload", _opt_text, row[15]),
        created_at=f("created_at", when, row[16]), updated_at=f("updated_at", when, row[17]),
        resolution=f("resolution", _opt_text, row[18]),
        resolved_at=f("resolved_at", when, row[19]), moved_by=f("moved_by", _opt_text, row[20]),
        moved_after_receipts=row[21],
    ))  # fmt: skip
