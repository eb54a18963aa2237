"""Audit 51f: the operation journal's state machine, SQLite and DynamoDB (moto) side by side.

1. A row edited by hand to an outcome its state cannot have passed audit 49f's check (it
   compared attempts with the state only): a terminal failure set to APPLIED (outcome
   ``failed`` kept) was handed to the next night as work done, which receipted it and
   took it off ``ops failed`` with no operator's decision; a receipted delete set to a
   retryable FAILED was replayed. SQLite read text in ``moved_after_receipts`` as it was
   (DynamoDB refuses it: ``receipts verify`` then failed on a bare TypeError), and
   DynamoDB's optional text attributes of another type were a bare KeyError.
2. The run secret (since session 50 it keys replacement ids too) was read back unchecked:
   stored as text it was a bare TypeError (SQLite) or KeyError (DynamoDB) in every apply
   run and verify; a short or empty one was used as it was, so receipts' content hashes
   and replacement ids were keyed by a key anyone can guess.
3. On an operation id two runs share, DynamoDB's ``by_run`` listed the other run's
   operation (``plan`` writes the run membership before its conditional put); SQLite's
   does not.

Plus a parity test: every transition, the run secret and the kept gate verdict give the
same answers on both journals.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from memlife.apply import Tally
from memlife.apply.lifecycle import run_lifecycle
from memlife.audit import FileSink, dumps
from memlife.evidence_gate import keep_verdict, verify_gate
from memlife.journal import (
    JournalStateError,
    Mover,
    Operation,
    OpKind,
    OpState,
    Outcome,
    SqliteJournal,
    operation_id,
    read_run_secret,
)
from memlife.journal.dynamodb import DynamoJournal
from memlife.journal.dynamodb_items import op_key
from memlife.review import Verification
from memlife.state.dynamodb import key
from memlife.stores.base import ItemFailure
from memlife.stores.sqlite import SqliteStore
from tests.support.aws_state import aws_state
from tests.unit.test_ops_engine import T0, executor, rec

RUN = "run-51f"


@pytest.fixture(params=["sqlite", "dynamodb"])
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        yield SqliteJournal.at(tmp_path / "journal.db")
        return
    with aws_state("inprocess") as (_, state):
        yield DynamoJournal(state)


@pytest.fixture()
def sqlite_journal(tmp_path: Path) -> SqliteJournal:
    return SqliteJournal.at(tmp_path / "journal.db")


@pytest.fixture()
def dynamo_journal() -> Iterator[DynamoJournal]:
    with aws_state("inprocess") as (_, state):
        yield DynamoJournal(state)


def op(rid: str, run: str = RUN, kind: OpKind = OpKind.delete) -> Operation:
    return Operation(
        operation_id=operation_id(run, kind, [rid]),
        run_id=run,
        kind=kind,
        actor_id="u-1",
        namespace="/users/u-1/facts",
        record_id=rid,
        reasons=["HARD_EXPIRED"],
        policy_version="p1",
        content_sha256="ab" * 32,
    )


def edit(journal: Any, op_id: str, field: str, typed: dict[str, Any]) -> None:
    """One stored field edited by hand beside the journal: ``typed`` is DynamoDB's form
    ({"S": ...} / {"N": ...}); SQLite gets its value."""
    if isinstance(journal, SqliteJournal):
        column = "state" if field == "st" else field
        value = next(iter(typed.values()))
        value = int(value) if "N" in typed and column == "attempts" else value
        journal.connection.execute(
            f"UPDATE operations SET {column}=? WHERE operation_id=?", (value, op_id)
        )
        return
    journal.state.ddb.update_item(
        TableName=journal.state.table, Key=op_key(op_id), UpdateExpression="SET #f = :v",
        ExpressionAttributeNames={"#f": field}, ExpressionAttributeValues={":v": typed},
    )  # fmt: skip


def reads(journal: Any, op_id: str) -> list[Any]:
    return [lambda: journal.get(op_id), lambda: journal.by_run(RUN), lambda: journal.due(T0)]


# -- 1. an outcome its state cannot have ------------------------------------------------------
def test_a_terminal_failure_edited_to_applied_is_refused(journal: Any) -> None:
    (a,) = journal.plan([op("m-1")])
    journal.transition(a.operation_id, OpState.FAILED, outcome=Outcome.failed, error="LEGAL_HOLD")
    edit(journal, a.operation_id, "st", {"S": "APPLIED"})  # attempts (1) kept: fits APPLIED
    for read in reads(journal, a.operation_id):
        with pytest.raises(JournalStateError, match=f"{a.operation_id}.*outcome"):
            read()


def test_a_receipted_delete_edited_to_a_retryable_failure_is_refused(journal: Any) -> None:
    (a,) = journal.plan([op("m-1")])
    journal.transition(a.operation_id, OpState.APPLIED, outcome=Outcome.deleted)
    journal.transition(a.operation_id, OpState.RECEIPTED)
    edit(journal, a.operation_id, "st", {"S": "FAILED"})
    edit(journal, a.operation_id, "next_retry_at", {"S": T0.isoformat()})
    if isinstance(journal, DynamoJournal):  # back in the retry queue's index, as a hand edit would
        edit(journal, a.operation_id, "open_pk", {"S": "open#0"})
        edit(journal, a.operation_id, "open_sk", {"S": f"x#{a.operation_id}"})
    for read in reads(journal, a.operation_id):
        with pytest.raises(JournalStateError, match=f"{a.operation_id}.*outcome"):
            read()


def test_control_every_outcome_the_machine_writes_reads_back(journal: Any) -> None:
    """Control: FAILED with ``failed`` (or none, a bare transition), APPLIED and RECEIPTED
    with what was done, a requeued failure done at last: all read back as written."""
    ops = [op(f"m-{i}") for i in range(5)]
    journal.plan(ops)
    ids = [o.operation_id for o in ops]
    journal.transition(ids[0], OpState.FAILED, outcome=Outcome.failed, error="LEGAL_HOLD")
    journal.transition(ids[1], OpState.FAILED, error="THROTTLED", next_retry_at=T0)
    journal.transition(ids[2], OpState.APPLIED, outcome=Outcome.deleted)
    journal.transition(ids[3], OpState.APPLIED, outcome=Outcome.already_absent)
    journal.transition(ids[3], OpState.RECEIPTED)
    journal.transition(ids[4], OpState.FAILED, outcome=Outcome.failed, error="X", next_retry_at=T0)
    journal.transition(ids[4], OpState.APPLIED, outcome=Outcome.deleted, by=Mover("r2", 1))
    got = {o.record_id: (o.state, o.outcome) for o in journal.by_run(RUN)}
    assert got == {
        "m-0": (OpState.FAILED, Outcome.failed),
        "m-1": (OpState.FAILED, None),
        "m-2": (OpState.APPLIED, Outcome.deleted),
        "m-3": (OpState.RECEIPTED, Outcome.already_absent),
        "m-4": (OpState.APPLIED, Outcome.deleted),
    }


def _terminal_delete(home: Path) -> tuple[SqliteStore, FileSink, str]:
    """A delete the store refused for good (a terminal failure, listed for an operator)."""
    store, sink = SqliteStore(home / "memlife.db"), FileSink(home / "receipts")
    r = rec("m-exp", expires_at=T0 - timedelta(days=1))
    store.put_many([r])
    ex = executor(store, sink, T0)
    (o,) = ex.journal.plan([ex.new_op(OpKind.delete, r.actor_id, r.namespace, r.id,
                                      ["HARD_EXPIRED"], r.sha256)])  # fmt: skip
    refuse = {o.operation_id: ItemFailure(r.id, "VALIDATION", retryable=False)}
    run_lifecycle(ex, [o], Tally(), lambda _batch: refuse)
    return store, sink, o.operation_id


def test_the_next_night_does_not_receipt_a_terminal_failure_edited_to_applied(home: Path) -> None:
    """The operator's list loses the failure and the evidence gains a receipt for it, with
    no operator's decision and the record never deleted."""
    store, sink, oid = _terminal_delete(home)
    try:
        store.connection.execute(
            "UPDATE operations SET state='APPLIED' WHERE operation_id=?", (oid,)
        )
        with pytest.raises(JournalStateError, match=f"{oid}.*outcome"):
            executor(store, sink, T0 + timedelta(days=1), key="n1").resume_due(Tally())
        assert not (home / "receipts" / "operations" / f"{oid}.json").exists()
    finally:
        store.close()


def test_control_a_terminal_failure_waits_for_an_operator(home: Path) -> None:
    store, sink, oid = _terminal_delete(home)
    try:
        ex = executor(store, sink, T0 + timedelta(days=1), key="n1")
        ex.resume_due(Tally())
        assert [o.operation_id for o in ex.journal.terminal_failures()] == [oid]
        assert not (home / "receipts" / "operations" / f"{oid}.json").exists()
        assert store.get("m-exp") is not None
    finally:
        store.close()


# -- 1b. fields one backend checked and the other did not -------------------------------------
def test_sqlite_moved_after_receipts_that_is_no_count_is_refused(sqlite_journal: Any) -> None:
    (a,) = sqlite_journal.plan([op("m-1")])
    sqlite_journal.transition(a.operation_id, OpState.APPLIED, outcome=Outcome.deleted,
                              by=Mover(RUN, 1))  # fmt: skip
    edit(sqlite_journal, a.operation_id, "moved_after_receipts", {"S": "x"})
    with pytest.raises(JournalStateError, match=f"{a.operation_id}.*moved_after_receipts"):
        sqlite_journal.get(a.operation_id)


def test_control_dynamodb_moved_after_receipts_that_is_no_count_is_refused(
    dynamo_journal: Any,
) -> None:
    (a,) = dynamo_journal.plan([op("m-1")])
    dynamo_journal.transition(a.operation_id, OpState.APPLIED, outcome=Outcome.deleted,
                              by=Mover(RUN, 1))  # fmt: skip
    edit(dynamo_journal, a.operation_id, "moved_after_receipts", {"N": "1.5"})
    with pytest.raises(JournalStateError, match=f"{a.operation_id}.*moved_after_receipts"):
        dynamo_journal.get(a.operation_id)


@pytest.mark.parametrize(
    "field",
    ["content_sha256", "replacement_id", "last_error", "payload", "resolution", "moved_by"],
)
def test_dynamodb_optional_text_of_another_type_is_refused_naming_it(
    dynamo_journal: Any, field: str
) -> None:
    (a,) = dynamo_journal.plan([op("m-1")])
    edit(dynamo_journal, a.operation_id, field, {"N": "7"})
    with pytest.raises(JournalStateError, match=f"{a.operation_id}.*{field}"):
        dynamo_journal.get(a.operation_id)


# -- 2. the run secret ------------------------------------------------------------------------
def _set_secret(journal: Any, typed: dict[str, Any]) -> None:
    journal.run_secret()
    if isinstance(journal, SqliteJournal):
        value = next(iter(typed.values()))
        journal.connection.execute("UPDATE secrets SET value=? WHERE name='run'", (value,))
        return
    journal.state.ddb.update_item(
        TableName=journal.state.table, Key=key("meta", "runsecret"), UpdateExpression="SET #k = :v",
        ExpressionAttributeNames={"#k": "key"}, ExpressionAttributeValues={":v": typed},
    )  # fmt: skip


def _existing(journal: Any) -> bytes | None:
    """The dry run's read (never creating it): read_run_secret over the store's file, or
    DynamoJournal.existing_run_secret."""
    if isinstance(journal, SqliteJournal):
        return read_run_secret(SimpleNamespace(connection=journal.connection, lock=journal.lock))
    secret: bytes | None = journal.existing_run_secret()
    return secret


@pytest.mark.parametrize(
    "typed",
    [{"S": "ab" * 32}, {"B": b"\x07"}, {"B": b"k" * 16}],
    ids=["hex-as-text", "one-byte", "sixteen-bytes"],
)
def test_a_run_secret_that_is_not_the_journals_key_is_refused(journal: Any, typed: Any) -> None:
    _set_secret(journal, typed)
    for read in (journal.run_secret, lambda: _existing(journal)):
        with pytest.raises(JournalStateError, match="run secret"):
            read()


def test_control_the_run_secret_is_made_once_and_read_alike(journal: Any) -> None:
    assert _existing(journal) is None  # a dry run's read makes none
    made = journal.run_secret()
    assert len(made) == 32 and journal.run_secret() == made == _existing(journal)


# -- 3. an operation id two runs share ---------------------------------------------------------
def _shared_id(journal: Any) -> str:
    first = op("m-1")
    journal.plan([first])
    other = dataclasses.replace(first, run_id="run-other", record_id="m-2")
    (kept,) = journal.plan([other])  # the id exists: the first run's operation stands
    assert kept.run_id == RUN and kept.record_id == "m-1"
    return first.operation_id


def test_dynamodb_by_run_lists_only_the_runs_own_operations(dynamo_journal: Any) -> None:
    _shared_id(dynamo_journal)
    assert dynamo_journal.by_run("run-other") == []
    assert [o.record_id for o in dynamo_journal.by_run(RUN)] == ["m-1"]


def test_control_sqlite_by_run_lists_only_the_runs_own_operations(sqlite_journal: Any) -> None:
    _shared_id(sqlite_journal)
    assert sqlite_journal.by_run("run-other") == []
    assert [o.record_id for o in sqlite_journal.by_run(RUN)] == ["m-1"]


# -- parity: the same answers on both journals -------------------------------------------------
def _norm(o: Operation | None) -> dict[str, Any] | None:
    if o is None:
        return None
    d = dataclasses.asdict(o)
    d.pop("created_at"), d.pop("updated_at")  # the wall clock of each write
    return d


def _scenario(journal: Any, tmp: Path) -> list[Any]:
    """Every transition the machine allows, the refusals, an operator's decisions, the
    queue, the run secret and the gate verdict kept under it."""
    out: list[Any] = []
    a, b, c, d = (op(f"m-{i}") for i in range(4))
    a = dataclasses.replace(a, payload='{"id": "m-0"}')
    out.append([_norm(x) for x in journal.plan([a, b, c, d])])
    moves = [
        (a, OpState.FAILED, {"outcome": Outcome.failed, "error": "T", "next_retry_at": T0}),
        (a, OpState.APPLIED, {"outcome": Outcome.deleted, "by": Mover(RUN, 2)}),
        (a, OpState.RECEIPTED, {"by": Mover(RUN, 2)}),
        (b, OpState.FAILED, {"outcome": Outcome.failed, "error": "V"}),
        (c, OpState.APPLIED, {"outcome": Outcome.already_absent}),
    ]
    for o, to, kw in moves:
        out.append(_norm(journal.transition(o.operation_id, to, **kw)))
        out.append(_norm(journal.get(o.operation_id)))
    for o, to in [(a, OpState.APPLIED), (c, OpState.FAILED), (d, OpState.RECEIPTED)]:
        with pytest.raises(JournalStateError):
            journal.transition(o.operation_id, to)
    out.append([_norm(x) for x in journal.terminal_failures()])
    out.append(_norm(journal.resolve(b.operation_id, "requeued", at=T0, retry_at=T0)))
    with pytest.raises(JournalStateError):
        journal.resolve(b.operation_id, "dismissed")  # requeued: no longer terminal
    out.append(sorted(x.record_id for x in journal.due(T0)))
    out.append(_norm(journal.transition(b.operation_id, OpState.APPLIED, outcome=Outcome.deleted)))
    out.append(sorted(x.operation_id for x in journal.by_run(RUN)))
    out.append({k: [_norm(x) for x in v] for k, v in journal.for_records(["m-0", "m-9"]).items()})
    # the run secret and the gate verdict kept create-only under it (evidence_gate, 50j)
    secret = journal.run_secret()
    out.append((len(secret), journal.run_secret() == secret, _existing(journal) == secret))
    prefix = f"runs/2026/11/01/{RUN}"
    sink = FileSink(tmp / "receipts")
    ctx = SimpleNamespace(config=SimpleNamespace(dry_run=False), sink=sink, prefix=prefix,
                          run_id=RUN)  # fmt: skip
    first = keep_verdict(ctx, {"blocked": False, "cases": 9}, secret)  # type: ignore[arg-type]
    again = keep_verdict(ctx, {"blocked": False, "cases": 8}, secret)  # type: ignore[arg-type]
    assert first is not None and again is not None
    out.append((first.gate, first.rerun, again.gate, again.rerun, again.sha256 == first.sha256))
    receipt = {"gate": first.gate, "evidence": first.evidence()}
    sink.put_new(f"{prefix}/receipt.json", dumps(receipt))
    codes = []
    for key_ in (secret, b"x" * 32):  # this store's key, then another's
        v = Verification(RUN)
        verify_gate(sink, SimpleNamespace(prefix=prefix, run_id=RUN), v, key_)
        codes.append([p["code"] for p in v.problems])
    out.append(codes)
    return out


def test_both_journals_answer_every_transition_the_same(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir(), (tmp_path / "d").mkdir()
    on_sqlite = _scenario(SqliteJournal.at(tmp_path / "s" / "journal.db"), tmp_path / "s")
    with aws_state("inprocess") as (_, state):
        on_dynamo = _scenario(DynamoJournal(state), tmp_path / "d")
    assert on_sqlite == on_dynamo
    assert on_sqlite[-1] == [[], ["GATE_VERDICT_MAC_MISMATCH"]]  # another store's key: named


def test_two_processes_on_one_sqlite_file_read_one_secret(tmp_path: Path) -> None:
    """Control: the SQLite secret is one row of the file, whoever made it first."""
    path = tmp_path / "journal.db"
    one, two = SqliteJournal.at(path), SqliteJournal.at(path)
    assert one.run_secret() == two.run_secret()
    assert sqlite3.connect(path).execute("SELECT count(*) FROM secrets").fetchone() == (1,)
