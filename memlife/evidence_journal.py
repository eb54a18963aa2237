"""The journal cross-check of ``memlife receipts verify``: journal <-> Parquet <-> receipts.

The journal is the writer's own record; the bucket may have been rewritten consistently
(memlife/evidence.py). Whether an operation the journal holds otherwise than its sealed
row moved on *after* the run sealed is told by who moved it (journal/base.py ``Mover``),
never by comparing two workers' wall clocks: a retry on a worker whose clock is behind
is still a later run's move, and a clock set ahead hides no move of the sealing run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from memlife.audit import ReceiptSink
from memlife.evidence import _mismatched, _norm, _when
from memlife.evidence_key import as_written
from memlife.journal import Operation, OpKind
from memlife.model import utcnow
from memlife.receipts import operation_key
from memlife.run_receipts import loads

# the states an operation may have reached since a row showed it in the first one
LATER = {"PLANNED": {"PLANNED", "APPLIED", "FAILED", "RECEIPTED"},
         "FAILED": {"FAILED", "APPLIED", "RECEIPTED"}, "APPLIED": {"APPLIED", "RECEIPTED"},
         "RECEIPTED": {"RECEIPTED"}}  # fmt: skip


def expiry(journal: object, started_at: object) -> Callable[[object], bool]:
    """Whether the journal may have dropped, by now, a finished operation of an action
    (``receipts verify`` asks of one it no longer holds). The DynamoDB journal's TTL drops
    a receipted operation ``kept_for(kind)`` after its receipt, as designed, while its
    receipts are kept for years: past that, counted from the run's start (no operation of
    the run was receipted before it), a missing row is expired, not evidence the journal
    never saw (audit 51x3). Never for a journal that keeps them (SQLite)."""
    kept_for = getattr(journal, "kept_for", None)
    started = _when(started_at) if isinstance(started_at, str) else None
    if kept_for is None or started is None:
        return lambda action: False
    now = utcnow()

    def expired(action: object) -> bool:
        try:
            kind = OpKind(str(action))
        except ValueError:  # no action of ours: never expired
            return False
        return bool(now >= started + kept_for(kind))

    return expired


def verify_journal(
    rows: list[dict[str, Any]], journal_ops: Sequence[Operation], sink: ReceiptSink, v: Any,
    finished_at: str | None = None, sealed_by: int = 1, secret: bytes = b"",
    expired: Callable[[object], bool] | None = None,
) -> None:  # fmt: skip
    """Journal <-> Parquet <-> receipts, both ways.

    A row is the operation as it was when the run sealed: ``rows`` are those of its result
    receipt, the ``sealed_by``-th of the run's receipts (1-based). An operation the journal
    holds otherwise may only have moved forward in the state machine, and only by a move
    made after that seal, which its last mover tells (``moved_by``, ``moved_after_receipts``):

      - another run (the retry queue of a later night, a manual run): after the seal;
      - this run, in an attempt begun once ``sealed_by`` receipts existed (a rerun): after;
      - this run, in an attempt begun before (the sealing attempt itself, or one the seal
        followed): the seal should hold the move, so JOURNAL_PARQUET_MISMATCH (a Parquet
        rewritten to an earlier state, or the run's own worker moving it after sealing).

    No clock is read for these. Fallback, only for an operation whose last move recorded no
    mover (journal rows written before movers were, or a caller that named none): the old
    wall-clock rule, moved after the row's ``updated_at`` and the receipt's ``finished_at``;
    those are times written by possibly different workers, so skew can mislead it.
    ``expired`` (:func:`expiry`): a row the journal no longer holds once its TTL may have
    dropped it is JOURNAL_EXPIRED, a note."""
    by_id = {o.operation_id: o for o in journal_ops}
    sealed = _when(finished_at)
    seen: dict[str, str] = {}
    for r in rows:
        oid = r["operation_id"]
        seen[oid] = r["state"]
        o = by_id.get(oid)
        # expired only where the operation was receipted (the TTL starts there): its
        # receipt is in the bucket; a never-receipted row (a terminal failure) is never dropped
        if (
            o is None
            and expired is not None
            and expired(r.get("action"))
            and sink.get(operation_key(oid)) is not None
        ):
            v.note("JOURNAL_EXPIRED", operation_id=oid, record_id=r["record_id"])
            continue
        if o is None:
            v.problem("PARQUET_OP_NOT_IN_JOURNAL", operation_id=oid, record_id=r["record_id"])
            continue
        outcome = o.outcome.value if o.outcome else None
        changed = (o.state.value, outcome) != (r["state"], r.get("outcome"))
        # what the operation is never changes after planning: the row must say the journal's
        ident = {"record_id": o.record_id, "action": o.kind.value, "actor_id": o.actor_id,
                 "namespace": o.namespace, "replacement_id": o.replacement_id,
                 "reason_codes": list(o.reasons), "policy_version": o.policy_version}  # fmt: skip
        if (
            any(k in r and _norm(r[k]) != want for k, want in ident.items())
            or o.state.value not in LATER.get(r["state"], set())
            or (r["state"] == "RECEIPTED" and outcome != r.get("outcome"))
            or (changed and not moved_after_seal(o, r, sealed_by, sealed))
        ):
            v.problem("JOURNAL_PARQUET_MISMATCH", operation_id=oid, record_id=r["record_id"])
    for oid, o in by_id.items():
        if oid not in seen and o.state.value in ("APPLIED", "RECEIPTED", "FAILED"):
            v.problem("JOURNAL_OP_NOT_IN_PARQUET", operation_id=oid, record_id=o.record_id)
        if o.state.value != "RECEIPTED":
            continue
        body = sink.get(operation_key(oid))
        if body is None:
            if seen.get(oid) != "RECEIPTED":  # else reported with the Parquet row
                v.problem("OPERATION_RECEIPT_MISSING", operation_id=oid, record_id=o.record_id)
            continue
        doc = loads(body)
        if doc is None:
            v.problem("RECEIPT_UNREADABLE", key=operation_key(oid), operation_id=oid)
            continue
        row = {"record_id": o.record_id, "action": o.kind.value,
               "outcome": o.outcome.value if o.outcome else None, "replacement_id": o.replacement_id,
               "content_sha256": as_written(o.content_sha256, doc.get("content_sha256"), secret), "reason_codes": list(o.reasons), "run_id": o.run_id,
               "actor_id": o.actor_id, "namespace": o.namespace}  # fmt: skip
        for field_name in _mismatched(doc, row):
            v.problem(
                "RECEIPT_FIELD_MISMATCH", operation_id=oid, field=field_name, against="journal"
            )


def moved_after_seal(
    o: Operation, row: dict[str, Any], sealed_by: int, finished: datetime | None
) -> bool:
    """Whether the journal's last move of ``o`` came after the seal that wrote ``row``.

    By the mover when one is recorded: another run than the operation's own, or its own
    run in an attempt begun after ``sealed_by`` of its receipts existed. Else (a row from
    before movers were recorded) by wall clock: later than the row and than ``finished``."""
    if o.moved_by is not None:
        return o.moved_by != o.run_id or (o.moved_after_receipts or 0) >= sealed_by
    then, now = _when(row.get("updated_at")), _when(o.updated_at)
    if then is not None and now is not None and now <= then:
        return False  # not changed since the row, by the clocks: yet it differs
    return not (finished is not None and now is not None and now <= finished)
