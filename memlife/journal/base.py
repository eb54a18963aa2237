"""The operation journal: every change is an operation with an explicit state machine.

    PLANNED --apply--> APPLIED --receipt--> RECEIPTED
       |
       +----fail----> FAILED, retryable (next_retry_at set) --due--> APPLIED ...
                      FAILED, terminal  (no next_retry_at): never replayed; an operator
                      lists it (`memlife ops failed`) and requeues or dismisses it

Operation ids are deterministic (run key + action + record ids), so re-running the same
run after a crash finds its own operations and resumes each from its state: nothing is
applied twice, nothing receipted twice. Shaped after AWS Powertools idempotency: a small
persistence protocol (this file), one backend per file (sqlite.py).

Every transition records who made it (``Mover``): the acting run's id and how many run
receipts that run already had when this attempt of it began. ``receipts verify`` judges
by it whether an operation moved after its run sealed (memlife/evidence_journal.py),
never by comparing the wall clocks of two workers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple, Protocol, TypedDict, TypeVar

from memlife.errors import JournalStateError as JournalStateError  # moved; re-exported


class OpState(StrEnum):
    PLANNED = "PLANNED"
    APPLIED = "APPLIED"
    RECEIPTED = "RECEIPTED"
    FAILED = "FAILED"


class OpKind(StrEnum):
    delete = "delete"  # hard-expired or pending past grace
    write_replacement = "write_replacement"
    supersede = "supersede"
    quarantine = "quarantine"
    restore = "restore"
    purge = "purge"
    erase = "erase"
    update = "update"  # import --update: a manual, receipted overwrite
    hold_release = "hold_release"
    reactivate = "reactivate"  # erasure withdrew a replacement: its kept sources come back
    review = "review"  # a reviewer's decision on a review item (keep / verify / dispute)
    hold = "hold"  # a legal hold placed


class Outcome(StrEnum):
    deleted = "deleted"
    already_absent = "already_absent"  # gone before we got there: done, not failed
    written = "written"
    superseded = "superseded"
    quarantined = "quarantined"
    restored = "restored"
    released = "released"
    reviewed = "reviewed"
    held = "held"
    failed = "failed"
    skipped = "skipped"
    updated = "updated"


ALLOWED: dict[OpState, frozenset[OpState]] = {
    OpState.PLANNED: frozenset({OpState.APPLIED, OpState.FAILED}),
    OpState.FAILED: frozenset({OpState.APPLIED, OpState.FAILED}),
    OpState.APPLIED: frozenset({OpState.RECEIPTED}),
    OpState.RECEIPTED: frozenset(),
}


class Mover(NamedTuple):
    """Who moves an operation: the acting run (``run_id``) and how many receipts of its own
    that run had when this attempt of it began (``after_receipts``: 0 for an attempt that
    began before the run sealed anything; N for a rerun begun after its N-th receipt)."""

    run_id: str
    after_receipts: int = 0


def operation_id(run_key: str, kind: OpKind, record_ids: Iterable[str]) -> str:
    raw = "\x1f".join([run_key, kind.value, *sorted(record_ids)])
    return "op-" + hashlib.sha256(raw.encode()).hexdigest()[:32]


@dataclass
class Operation:
    operation_id: str
    run_id: str
    kind: OpKind
    actor_id: str
    namespace: str
    record_id: str
    reasons: list[str]
    policy_version: str
    content_sha256: str | None = None
    replacement_id: str | None = None
    state: OpState = OpState.PLANNED
    outcome: Outcome | None = None
    attempts: int = 0
    next_retry_at: datetime | None = None
    last_error: str | None = None  # an error code, never content
    payload: str | None = None  # e.g. the replacement record (content!) until receipted
    created_at: datetime | None = None
    updated_at: datetime | None = None
    resolution: str | None = None  # an operator's decision on a terminal failure
    resolved_at: datetime | None = None
    # the last transition's mover (``Mover``); None: written before movers were recorded,
    # or by a caller that named none
    moved_by: str | None = None
    moved_after_receipts: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class MemoOutcome(TypedDict):
    """A consolidation group's settled outcome (``Journal.outcomes``)."""

    outcome: str
    retry_at: datetime | None


class Rejection(TypedDict):
    """A group's consolidation refusals so far (``Journal.rejection``)."""

    attempts: int
    code: str
    next_attempt_at: datetime | None


class GroupInReview(TypedDict):
    """A group refused too often, waiting for a person (``Journal.groups_in_review``)."""

    group_key: str
    actor_id: str
    namespace: str
    attempts: int
    code: str
    since: str


_T = TypeVar("_T")
_EDITED = "is not one the journal writes (a row edited by hand? mend or remove it)"


def stored_field(operation_id: str, name: str, parse: Callable[[Any], _T], raw: Any) -> _T:
    """One stored field of an operation, parsed. A value the journal never writes (a state,
    kind or outcome outside its enums, a time or reasons it cannot read: a row edited by
    hand) is a JournalStateError naming the operation and the field, never the value; it
    was a bare ValueError that ended every read of the journal, each night's retry queue
    first (audit 49f)."""
    try:
        return parse(raw)
    except (ValueError, TypeError, KeyError):  # JSONDecodeError is a ValueError
        # from None: the parser's message quotes the value
        raise JournalStateError(f"journal operation {operation_id}: its {name} {_EDITED}") from None


SECRET_BYTES = 32  # the run secret: secrets.token_bytes(32), made once per store


def checked_secret(value: object, where: str) -> bytes:
    """The stored run secret, as it was made (``SECRET_BYTES`` bytes), or JournalStateError
    naming where it is kept, never the value. A row cut short or of another type was used
    as found: a 4-byte key keyed every later receipt's content hash (anyone can try it), a
    text stopped a rerun with a TypeError after its first changes (audit 51a)."""
    if isinstance(value, bytes | bytearray | memoryview):
        if len(value) == SECRET_BYTES:
            return bytes(value)
        what = f"{len(value)} bytes"
    else:
        what = "missing" if value is None else f"a {type(value).__name__}"
    raise JournalStateError(
        f"{where}: the run secret is damaged ({what}, not {SECRET_BYTES} bytes): receipts, "
        "replacement ids and manual run ids are keyed by it, so nothing runs on it. Put it "
        "back from a backup of the store; if it is lost, remove it and a new one is made "
        "(evidence written before then no longer verifies by content)"
    )


def checked(op: Operation) -> Operation:
    """A stored operation whose fields agree as the state machine leaves them: PLANNED is
    never tried (0 attempts, no outcome), every other state was (1 attempt or more).
    Anything else (a FAILED row set back to PLANNED by hand, its attempts kept) is refused,
    not resumed as new work (audit 49f)."""
    n = op.attempts
    if type(n) is not int or n < 0:
        raise JournalStateError(f"journal operation {op.operation_id}: its attempts {_EDITED}")
    if (op.state is OpState.PLANNED) != (n == 0):
        raise JournalStateError(
            f"journal operation {op.operation_id}: its attempts do not fit its state "
            f"{op.state.value}: PLANNED is never tried, every other state was (a row edited "
            "by hand? mend or remove it)"
        )
    if op.state is OpState.PLANNED and op.outcome is not None:
        raise JournalStateError(f"journal operation {op.operation_id}: its outcome {_EDITED}")
    # a failure always carries ``failed`` and work done never does (lifecycle's transitions):
    # a terminal failure edited to APPLIED was receipted as finished by the next night and
    # left `ops failed`; a receipted one edited to FAILED with a retry was replayed (51f)
    if (op.state is OpState.FAILED) != (op.outcome is Outcome.failed) and op.outcome is not None:
        raise JournalStateError(
            f"journal operation {op.operation_id}: its outcome does not fit its state "
            f"{op.state.value} (a row edited by hand? mend or remove it)"
        )
    # work done always says what it did (lifecycle's only move to APPLIED names it): an
    # APPLIED row with none was receipted by the next night as done, the delete it owed
    # never carried out, never failed, never listed (audit 53f)
    if op.state in (OpState.APPLIED, OpState.RECEIPTED) and op.outcome is None:
        raise JournalStateError(
            f"journal operation {op.operation_id}: {op.state.value} with no outcome "
            "(a row edited by hand? mend or remove it)"
        )
    mar = op.moved_after_receipts  # SQLite's column types are advisory: text passed (51f)
    if mar is not None and (type(mar) is not int or mar < 0):
        raise JournalStateError(
            f"journal operation {op.operation_id}: its moved_after_receipts {_EDITED}"
        )
    if not isinstance(op.reasons, list) or not all(isinstance(r, str) for r in op.reasons):
        raise JournalStateError(f"journal operation {op.operation_id}: its reasons {_EDITED}")
    return op


def check_move(op: Operation, to: OpState, outcome: Outcome | None) -> None:
    """A move along ALLOWED that leaves a row ``checked`` reads back: APPLIED names what was
    done (SQLite wrote such a row and refused it only on the read back; DynamoDB kept it)."""
    if to not in ALLOWED[op.state]:
        raise JournalStateError(f"{op.operation_id}: {op.state} -> {to} is not allowed")
    if to is OpState.APPLIED and (outcome is None or outcome is Outcome.failed):
        raise JournalStateError(f"{op.operation_id}: APPLIED needs what was done, not {outcome}")


def stored(op: Operation | None, operation_id: str) -> Operation:
    """The operation a backend just wrote, read back: absent means the journal lost it."""
    if op is None:
        raise JournalStateError(f"{operation_id}: not in the journal after its write")
    return op


class Journal(Protocol):
    def plan(self, ops: Sequence[Operation]) -> list[Operation]:
        """Insert new operations; return each as stored (an existing one keeps its state)."""
        ...

    def get(self, operation_id: str) -> Operation | None: ...

    def transition(
        self,
        operation_id: str,
        to: OpState,
        *,
        outcome: Outcome | None = None,
        error: str | None = None,
        next_retry_at: datetime | None = None,
        at: datetime | None = None,
        by: Mover | None = None,
    ) -> Operation:
        """Move one operation along ALLOWED; raises JournalStateError otherwise. ``by``: the
        run (attempt) making the move, recorded as ``moved_by`` / ``moved_after_receipts``
        (None records no mover: verify then falls back to its wall-clock rule)."""
        ...

    def by_run(self, run_id: str) -> list[Operation]: ...

    def run_secret(self) -> bytes:
        """A random key made once per store (create-only): a manual run's id is keyed by it,
        so an erasure's request (a subject it was asked by) cannot be guessed from the run
        id or the manifest by anyone holding only the receipts."""
        ...

    def due(self, now: datetime, limit: int = 10_000) -> list[Operation]:
        """The first ``limit`` of ``due_pages``."""
        ...

    def due_pages(self, now: datetime, page_size: int = 1000) -> Iterator[list[Operation]]:
        """Every operation left unfinished: PLANNED, APPLIED, or FAILED *retryable* (it has a
        next_retry_at) whose time has come. A terminal failure is never due again."""
        ...

    def terminal_failures(self, include_resolved: bool = False) -> list[Operation]: ...

    def resolve(
        self,
        operation_id: str,
        resolution: str,
        at: datetime | None = None,
        retry_at: datetime | None = None,
    ) -> Operation: ...

    def for_record(self, record_id: str) -> list[Operation]: ...

    def for_records(self, record_ids: Sequence[str]) -> dict[str, list[Operation]]:
        """``for_record`` of each id, read together where the backend can."""
        ...

    def forget_payloads(self, record_ids: Sequence[str]) -> int:
        """Drop stored payloads mentioning these records (erasure)."""
        ...

    # The consolidation memo (apply/groups.py): a group's settled outcome by memo key (a
    # digest of members, content hashes, policy version and consolidator; no content).
    def outcomes(self, memo_keys: Sequence[str]) -> dict[str, MemoOutcome]:
        """``{memo_key: {"outcome": code, "retry_at": datetime | None}}`` for those known."""
        ...

    def remember_outcome(
        self,
        memo_key: str,
        actor_id: str,
        namespace: str,
        outcome: str,
        retry_at: datetime | None,
        at: datetime,
    ) -> None: ...

    def forget_outcome(self, memo_key: str) -> None: ...

    # Consolidation refusals of a group (apply/groups.py) and the groups they sent to review
    # (memlife ops): attempts, last code and next attempt by group key; no content.
    def rejection(self, group_key: str) -> Rejection | None: ...

    def reject(
        self,
        group_key: str,
        actor_id: str,
        namespace: str,
        code: str,
        next_attempt_at: datetime | None,
        at: datetime,
    ) -> None: ...

    def clear_rejection(self, group_key: str) -> None: ...

    def groups_in_review(self) -> list[GroupInReview]: ...
