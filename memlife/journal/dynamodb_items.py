"""How an operation is kept in the DynamoDB state table (memlife/journal/dynamodb.py): its
item (``op#{id}``/``op``, the ``open`` index keys while due), and the membership items
that find it by run (``jrun#``) and by record (``jrec#``, the replacement's too)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from memlife.journal.base import (
    JournalStateError,
    Operation,
    OpKind,
    OpState,
    Outcome,
    checked,
    stored_field,
)
from memlife.state.dynamodb import OPEN_BUCKETS, key

ITEM_MAX = 400 * 1024  # DynamoDB's item size limit: attribute names and values, UTF-8
# what an operation's later states add to its item (outcome, last_error, next_retry_at,
# moved_by, moved_after_receipts, resolution...: a few hundred bytes): an operation
# planned within them of the limit could not be moved on (audit 52m2)
GROWTH = 1024


def item_bytes(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB counts it (names and values; text as UTF-8, binary as
    its bytes, a number about its digits: the journal's items hold nothing else)."""
    size = 0
    for name, value in item.items():
        ((kind, v),) = value.items()
        size += len(name.encode()) + (len(v) if kind == "B" else len(str(v).encode()))
    return size


def op_key(operation_id: str) -> dict[str, Any]:
    return key(f"op#{operation_id}", "op")


def open_keys(op_id: str, created: str) -> dict[str, Any]:
    bucket = hashlib.sha256(op_id.encode()).digest()[0] % OPEN_BUCKETS
    return {"open_pk": {"S": f"open#{bucket}"}, "open_sk": {"S": f"{created}#{op_id}"}}


def text(item: dict[str, Any], name: str) -> str | None:
    v = item.get(name)
    return v["S"] if v is not None else None


def number(item: dict[str, Any], name: str) -> int | None:
    v = item.get(name)
    return int(v["N"]) if v is not None else None


def when(v: str | None) -> datetime | None:
    return datetime.fromisoformat(v) if v else None


def from_item(item: dict[str, Any]) -> Operation:
    """A stored item, each field checked as it is parsed (an item edited by hand is a
    JournalStateError naming the operation and field: base.stored_field, base.checked).
    Every field: an optional text of another type was a bare KeyError (audit 51f)."""
    oid = item["pk"]["S"][3:]

    def f(name: str, parse: Callable[[dict[str, Any]], Any]) -> Any:
        return stored_field(oid, name, parse, item)

    def s(attr: str) -> Callable[[dict[str, Any]], str]:
        return lambda i: i[attr]["S"]

    return checked(Operation(
        operation_id=oid,
        run_id=f("run_id", s("run_id")),
        kind=f("kind", lambda i: OpKind(i["kind"]["S"])),
        actor_id=f("actor_id", s("actor_id")),
        namespace=f("namespace", s("namespace")),
        record_id=f("record_id", s("record_id")),
        reasons=f("reasons", lambda i: json.loads(i["reasons"]["S"])),
        policy_version=f("policy_version", s("policy_version")),
        content_sha256=f("content_sha256", lambda i: text(i, "content_sha256")),
        replacement_id=f("replacement_id", lambda i: text(i, "replacement_id")),
        state=f("state", lambda i: OpState(i["st"]["S"])),
        outcome=f("outcome", lambda i: Outcome(v) if (v := text(i, "outcome")) else None),
        attempts=f("attempts", lambda i: int(i["attempts"]["N"])),
        next_retry_at=f("next_retry_at", lambda i: when(text(i, "next_retry_at"))),
        last_error=f("last_error", lambda i: text(i, "last_error")),
        payload=f("payload", lambda i: text(i, "payload")),
        created_at=f("created_at", lambda i: when(text(i, "created_at"))),
        updated_at=f("updated_at", lambda i: when(text(i, "updated_at"))),
        resolution=f("resolution", lambda i: text(i, "resolution")),
        resolved_at=f("resolved_at", lambda i: when(text(i, "resolved_at"))),
        moved_by=f("moved_by", lambda i: text(i, "moved_by")),
        moved_after_receipts=f("moved_after_receipts", lambda i: number(i, "moved_after_receipts")),
    ))  # fmt: skip


def to_item(op: Operation, now: str) -> dict[str, Any]:
    item: dict[str, Any] = {
        **op_key(op.operation_id),
        "run_id": {"S": op.run_id},
        "kind": {"S": op.kind.value},
        "actor_id": {"S": op.actor_id},
        "namespace": {"S": op.namespace},
        "record_id": {"S": op.record_id},
        "reasons": {"S": json.dumps(op.reasons)},
        "policy_version": {"S": op.policy_version},
        "st": {"S": OpState.PLANNED.value},
        "attempts": {"N": "0"},
        "created_at": {"S": now},
        "updated_at": {"S": now},
        **open_keys(op.operation_id, now),
    }
    for name in ("content_sha256", "replacement_id", "payload"):
        value = getattr(op, name)
        if value is not None:
            item[name] = {"S": value}
    return item


def memberships(op: Operation, expires: int | None = None) -> list[dict[str, Any]]:
    pks = [f"jrun#{op.run_id}", f"jrec#{op.record_id}"]
    if op.replacement_id and op.replacement_id != op.record_id:
        pks.append(f"jrec#{op.replacement_id}")
    items = [key(pk, op.operation_id) for pk in pks]
    if expires is not None:
        for it in items:
            it["expires_at"] = {"N": str(expires)}
    return items


def refuse_too_large(ops: list[Operation], now: str) -> None:
    """JournalStateError, before ``plan`` writes anything, for an operation DynamoDB cannot
    hold in one item (a payload over 400 KB: an imported record's source_event is bounded
    only by the 1 MiB line). The batch's transaction failed, the operations before it were
    put one by one and planned (the next night carried them out), and its own put raised
    a bare ClientError naming neither record nor field (audit 52ii)."""
    for op in ops:
        item = to_item(op, now)
        size = item_bytes(item)
        if size > ITEM_MAX - GROWTH:
            field = max(item, key=lambda name: item_bytes({name: item[name]}))
            raise JournalStateError(
                f"{op.operation_id}: {op.kind.value} of record {op.record_id} is {size} bytes "
                f"(its {field} the largest); a DynamoDB item holds at most {ITEM_MAX}, "
                f"{GROWTH} of them kept for its later states: nothing of this batch was planned"
            )
