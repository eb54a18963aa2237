"""Audit 49f: the operation journal's state machine on both backends (SQLite and DynamoDB
on moto), attacked with rows edited by hand and with two writers at once.

1. A row the journal never writes (a state, kind or outcome outside its enums, a time or
   reasons it cannot read, an attempt count that is no count or that its state
   contradicts: PLANNED after attempts, APPLIED/RECEIPTED/FAILED with none) was read as
   it was: every read of the journal ended in a bare ValueError naming neither the
   operation nor the field (each night's retry queue, ``by_run``, ``ops failed``), and a
   FAILED operation rewritten to PLANNED with its attempts kept was replayed as new.
2. ``SqliteJournal.resolve`` wrote unconditionally after its read: an operator's stale
   ``dismiss`` undid another's ``requeue`` (and, once the night had retried it, turned a
   retryable failure into a dismissed terminal one, never retried and listed nowhere);
   the DynamoDB journal refuses that write (conditional on a terminal failure).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.journal import (
    JournalStateError,
    Operation,
    OpKind,
    OpState,
    Outcome,
    SqliteJournal,
    operation_id,
)
from memlife.journal.dynamodb import DynamoJournal
from memlife.journal.dynamodb_items import op_key
from tests.support.aws_state import aws_state

T0 = datetime(2026, 11, 1, tzinfo=UTC)


@contextmanager
def two_handles(backend: str, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """Two handles on one journal: two processes (two connections, two clients)."""
    if backend == "sqlite":
        yield SqliteJournal.at(tmp_path / "journal.db"), SqliteJournal.at(tmp_path / "journal.db")
        return
    with aws_state("inprocess") as (_, state):
        yield DynamoJournal(state), DynamoJournal(state)


@pytest.fixture(params=["sqlite", "dynamodb"])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    with two_handles(request.param, tmp_path) as handles:
        yield handles


# the resolve race was SQLite's alone: DynamoDB's write was conditional already (the control)
RACE_BACKENDS = ["sqlite", "dynamodb"]


def op(rid: str, run: str = "run-49f") -> Operation:
    return Operation(
        operation_id=operation_id(run, OpKind.delete, [rid]),
        run_id=run,
        kind=OpKind.delete,
        actor_id="u-1",
        namespace="/users/u-1/facts",
        record_id=rid,
        reasons=["HARD_EXPIRED"],
        policy_version="p1",
        content_sha256="ab" * 32,
    )


def edit(journal: Any, op_id: str, field: str, value: Any) -> None:
    """A hand edit of one stored field, beside the journal (sqlite3 / the DynamoDB API)."""
    if isinstance(journal, SqliteJournal):
        journal.connection.execute(
            f"UPDATE operations SET {field}=? WHERE operation_id=?", (value, op_id)
        )
        return
    name = {"state": "st"}.get(field, field)
    typed = {"N": str(value)} if field == "attempts" else {"S": str(value)}
    journal.state.ddb.update_item(
        TableName=journal.state.table, Key=op_key(op_id),
        UpdateExpression="SET #f = :v", ExpressionAttributeNames={"#f": name},
        ExpressionAttributeValues={":v": typed},
    )  # fmt: skip


def reads(journal: Any, op_id: str, state: str = "PLANNED") -> list[Callable[[], Any]]:
    """The reads that meet the row. SQLite's retry queue selects only the states it
    resumes (an index on state); DynamoDB's reads every open item, then judges it."""
    found = [
        lambda: journal.get(op_id),
        lambda: journal.by_run("run-49f"),
        lambda: journal.for_record("m-1"),
    ]
    if not isinstance(journal, SqliteJournal) or state in ("PLANNED", "APPLIED"):
        found.append(lambda: journal.due(T0))
    return found


# -- 1. rows the journal never writes --------------------------------------------------------
BAD_VALUES = [
    ("state", "DONE"),
    ("kind", "nuke"),
    ("outcome", "vanished"),
    ("reasons", "not json"),
    ("created_at", "yesterday"),
    ("next_retry_at", "soon"),
]


@pytest.mark.parametrize(("field", "value"), BAD_VALUES)
def test_a_value_the_journal_never_writes_is_refused_naming_operation_and_field(
    pair: tuple[Any, Any], field: str, value: str
) -> None:
    journal, _ = pair
    a, _b = journal.plan([op("m-1"), op("m-2")])
    edit(journal, a.operation_id, field, value)
    for read in reads(journal, a.operation_id, value if field == "state" else "PLANNED"):
        with pytest.raises(JournalStateError) as info:
            read()
        message = str(info.value)
        assert a.operation_id in message and field in message, message
        assert value not in message  # the field is named, its stored value never printed


@pytest.mark.parametrize(
    ("state", "attempts"),
    [("PLANNED", 2), ("FAILED", 0), ("APPLIED", 0), ("RECEIPTED", 0), ("FAILED", -1)],
)
def test_a_state_its_attempt_count_contradicts_is_refused(
    pair: tuple[Any, Any], state: str, attempts: int
) -> None:
    """PLANNED is never tried; every other state was, at least once. A terminal failure
    rewritten to PLANNED (its attempts kept) was handed to the night as new work."""
    journal, _ = pair
    (a,) = journal.plan([op("m-1")])
    journal.transition(a.operation_id, OpState.FAILED, outcome=Outcome.failed,
                       error="LEGAL_HOLD")  # fmt: skip  # terminal: never due by itself
    edit(journal, a.operation_id, "state", state)
    edit(journal, a.operation_id, "attempts", attempts)
    for read in reads(journal, a.operation_id, state):
        with pytest.raises(JournalStateError, match=f"{a.operation_id}.*attempts"):
            read()


def test_sqlite_attempts_that_are_no_number_are_refused(tmp_path: Path) -> None:
    """SQLite's column types are advisory: text in ``attempts`` was read as text, and the
    next transition failed on ``attempts + 1`` (TypeError), the run's seal on int32."""
    journal = SqliteJournal.at(tmp_path / "journal.db")
    (a,) = journal.plan([op("m-1")])
    edit(journal, a.operation_id, "attempts", "x")
    with pytest.raises(JournalStateError, match=f"{a.operation_id}.*attempts"):
        journal.get(a.operation_id)


def test_rows_the_journal_writes_read_back_on_every_state(pair: tuple[Any, Any]) -> None:
    """Control: every state the machine reaches reads back, with its attempt count."""
    journal, _ = pair
    planned, failed, retry, applied, done = (op(f"m-{i}") for i in range(5))
    journal.plan([planned, failed, retry, applied, done])
    journal.transition(failed.operation_id, OpState.FAILED, error="LEGAL_HOLD")
    journal.transition(retry.operation_id, OpState.FAILED, error="THROTTLED", next_retry_at=T0)
    journal.transition(applied.operation_id, OpState.APPLIED, outcome=Outcome.deleted)
    journal.transition(done.operation_id, OpState.APPLIED, outcome=Outcome.already_absent)
    journal.transition(done.operation_id, OpState.RECEIPTED)
    got = {o.record_id: (o.state, o.attempts) for o in journal.by_run("run-49f")}
    assert got == {
        "m-0": (OpState.PLANNED, 0),
        "m-1": (OpState.FAILED, 1),
        "m-2": (OpState.FAILED, 1),
        "m-3": (OpState.APPLIED, 1),
        "m-4": (OpState.RECEIPTED, 1),
    }
    assert {o.record_id for o in journal.due(T0)} == {"m-0", "m-2", "m-3"}


def test_a_legacy_sqlite_row_without_a_mover_still_reads(tmp_path: Path) -> None:
    """Control: the check is about values the journal never writes, not about columns a
    row written before they existed lacks (moved_by, resolution read None)."""
    journal = SqliteJournal.at(tmp_path / "journal.db")
    (a,) = journal.plan([op("m-1")])
    journal.transition(a.operation_id, OpState.APPLIED, outcome=Outcome.deleted)
    con = sqlite3.connect(tmp_path / "journal.db")
    with con:
        con.execute("UPDATE operations SET moved_by=NULL, moved_after_receipts=NULL, "
                    "resolution=NULL, resolved_at=NULL")  # fmt: skip
    con.close()
    got = journal.get(a.operation_id)
    assert got is not None and got.state is OpState.APPLIED and got.moved_by is None


# -- 2. two operators deciding one terminal failure at once ----------------------------------
def stale_read(monkeypatch: pytest.MonkeyPatch, stale: Any, move: Callable[[], None]) -> None:
    """Between ``stale``'s read of the operation and its write, ``move()`` runs (another
    process). The DynamoDB journal's resolve reads nothing first: it moves first."""
    if not isinstance(stale, SqliteJournal):
        move()
        return
    read = stale.get

    def get_then_other_moves(op_id: str) -> Operation | None:
        seen = read(op_id)
        monkeypatch.setattr(stale, "get", read)  # once
        move()
        return seen

    monkeypatch.setattr(stale, "get", get_then_other_moves)


@pytest.mark.parametrize("backend", RACE_BACKENDS)
def test_a_stale_dismiss_does_not_undo_another_operators_requeue(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with two_handles(backend, tmp_path) as (alice, bob):
        stale_dismiss_after_requeue(alice, bob, monkeypatch)


def stale_dismiss_after_requeue(alice: Any, bob: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    (a,) = alice.plan([op("m-1")])
    alice.transition(a.operation_id, OpState.FAILED, outcome=Outcome.failed, error="LEGAL_HOLD")
    stale_read(monkeypatch, alice, lambda: bob.resolve(a.operation_id, "requeued", at=T0,
                                                       retry_at=T0))  # fmt: skip
    with pytest.raises(JournalStateError, match="not a terminal failure"):
        alice.resolve(a.operation_id, "dismissed", at=T0)
    now = bob.get(a.operation_id)
    assert now is not None and (now.resolution, now.next_retry_at) == ("requeued", T0)
    assert [o.operation_id for o in bob.due(T0)] == [a.operation_id]


@pytest.mark.parametrize("backend", RACE_BACKENDS)
def test_a_stale_dismiss_does_not_end_a_failure_the_night_retried_since(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bob requeued it; the night retried it and it failed again, retryably (THROTTLED,
    due in 5 minutes). Alice's dismiss, decided on what she read before, landed on that
    retryable failure: on SQLite it became a dismissed terminal failure (never retried,
    listed by ``ops failed`` only with --all)."""
    with two_handles(backend, tmp_path) as (alice, bob):
        stale_dismiss_after_a_retry(alice, bob, monkeypatch)


def stale_dismiss_after_a_retry(alice: Any, bob: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    (a,) = alice.plan([op("m-1")])
    alice.transition(a.operation_id, OpState.FAILED, outcome=Outcome.failed, error="LEGAL_HOLD")

    def requeued_and_failed_again() -> None:
        bob.resolve(a.operation_id, "requeued", at=T0, retry_at=T0)
        bob.transition(a.operation_id, OpState.FAILED, outcome=Outcome.failed,
                       error="THROTTLED", next_retry_at=T0 + timedelta(minutes=5))  # fmt: skip

    stale_read(monkeypatch, alice, requeued_and_failed_again)
    with pytest.raises(JournalStateError, match="not a terminal failure"):
        alice.resolve(a.operation_id, "dismissed", at=T0)
    now = bob.get(a.operation_id)
    assert now is not None and now.next_retry_at == T0 + timedelta(minutes=5)
    assert now.resolution is None and now.attempts == 2
    assert [o.operation_id for o in bob.due(T0 + timedelta(hours=1))] == [a.operation_id]


def test_a_dismiss_then_a_requeue_in_turn_both_stand(pair: tuple[Any, Any]) -> None:
    """Control: decisions one after another (no race) behave alike on both journals: a
    dismissed failure may still be requeued; a requeued one is no terminal failure."""
    alice, bob = pair
    (a,) = alice.plan([op("m-1")])
    alice.transition(a.operation_id, OpState.FAILED, outcome=Outcome.failed, error="LEGAL_HOLD")
    assert alice.resolve(a.operation_id, "dismissed", at=T0).resolution == "dismissed"
    back = bob.resolve(a.operation_id, "requeued", at=T0, retry_at=T0)
    assert (back.resolution, back.next_retry_at) == ("requeued", T0)
    with pytest.raises(JournalStateError, match="not a terminal failure"):
        alice.resolve(a.operation_id, "dismissed", at=T0)


def test_two_writers_move_one_operation_once_on_both_journals(
    pair: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control (two claimers): both read the operation PLANNED; the second to write is
    refused and the attempt counted once, on SQLite as on DynamoDB."""
    first, second = pair
    (a,) = first.plan([op("m-1")])
    read = first.get

    def get_then_second_moves(op_id: str) -> Operation | None:
        seen = read(op_id)
        monkeypatch.setattr(first, "get", read)
        second.transition(op_id, OpState.APPLIED, outcome=Outcome.deleted)
        return seen

    monkeypatch.setattr(first, "get", get_then_second_moves)
    with pytest.raises(JournalStateError, match="another writer"):
        first.transition(a.operation_id, OpState.APPLIED, outcome=Outcome.deleted)
    now = second.get(a.operation_id)
    assert now is not None and (now.state, now.attempts) == (OpState.APPLIED, 1)
