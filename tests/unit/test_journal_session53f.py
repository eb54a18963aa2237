"""Audit 53f (session 53): the operation journal's state machine, SQLite and DynamoDB (moto)
side by side, attacked with hand-edited rows and an operation id two tenants meet under.

1. The SQLite journal read its text columns as stored: SQLite's column types are advisory,
   so a BLOB put in ``actor_id`` (or ``run_id``, ``record_id``, ``payload``...) by hand came
   back as bytes, and every later night's retry queue ended in a bare TypeError (it sorts
   its batches by shard). DynamoDB refuses the same edit naming operation and field.
2. An APPLIED (or RECEIPTED) row with no outcome passed the check: the machine never writes
   one (its only move to APPLIED names what was done), yet the next night receipted such
   a delete as finished, the record still there, nothing failed or listed. A move to
   APPLIED with no outcome was written by SQLite (and refused only on the read back) and
   kept by DynamoDB.
3. An operation id is the run key, kind and record id. A record deleted by a night killed
   before its receipt, whose id another actor's (expired) record took before the rerun:
   the rerun planned that record's delete under the same id, got the first record's done
   operation back, and skipped the new record: not deleted, in no count, not in
   ``ids_not_deleted``.

Plus a contract-style parity test: the refusals above, the run secret and the kept gate
verdict give the same answers on both journals.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from memlife.apply import Tally
from memlife.apply.deletions import DeleteItem
from memlife.audit import FileSink
from memlife.evidence_gate import keep_verdict
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
from memlife.stores.sqlite import SqliteStore
from tests.support.aws_state import aws_state
from tests.unit.test_ops_engine import T0, executor, rec

RUN = "run-53f"
FIX1 = "audit53f: SQLite journal reads a BLOB in a text column as bytes (DynamoDB refuses it)"
FIX2 = "audit53f: an APPLIED row with no outcome is receipted as done"
FIX3 = "audit53f: a rerun takes another tenant's operation under a shared id for its own"


@pytest.fixture(params=["sqlite", "dynamodb"])
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        yield SqliteJournal.at(tmp_path / "journal.db")
        return
    with aws_state("inprocess") as (_, state):
        yield DynamoJournal(state)


def op(rid: str, kind: OpKind = OpKind.delete) -> Operation:
    return Operation(
        operation_id=operation_id(RUN, kind, [rid]),
        run_id=RUN,
        kind=kind,
        actor_id="u-1",
        namespace="/users/u-1/facts",
        record_id=rid,
        reasons=["HARD_EXPIRED"],
        policy_version="p1",
        content_sha256="ab" * 32,
    )


def edit(journal: Any, op_id: str, column: str, value: Any) -> None:
    """One stored field set by hand: SQLite gets ``value``; DynamoDB its typed form (bytes
    as a binary attribute, text as a string, None removes the attribute)."""
    if isinstance(journal, SqliteJournal):
        journal.connection.execute(
            f"UPDATE operations SET {column}=? WHERE operation_id=?", (value, op_id)
        )
        return
    attr = "st" if column == "state" else column
    if value is None:
        journal.state.ddb.update_item(
            TableName=journal.state.table, Key=op_key(op_id), UpdateExpression="REMOVE #f",
            ExpressionAttributeNames={"#f": attr},
        )  # fmt: skip
        return
    typed = {"B": value} if isinstance(value, bytes) else {"S": str(value)}
    if isinstance(value, int):
        typed = {"N": str(value)}
    journal.state.ddb.update_item(
        TableName=journal.state.table, Key=op_key(op_id), UpdateExpression="SET #f = :v",
        ExpressionAttributeNames={"#f": attr}, ExpressionAttributeValues={":v": typed},
    )  # fmt: skip


# -- 1. a text column holding a BLOB ----------------------------------------------------------
TEXT_FIELDS = [
    "run_id", "actor_id", "namespace", "record_id", "policy_version", "content_sha256",
    "replacement_id", "last_error", "payload", "resolution", "moved_by",
]  # fmt: skip


@pytest.mark.parametrize("field", TEXT_FIELDS)
def test_sqlite_text_field_holding_bytes_is_refused_naming_it(tmp_path: Path, field: str) -> None:
    j = SqliteJournal.at(tmp_path / "journal.db")
    (a,) = j.plan([op("m-1")])
    edit(j, a.operation_id, field, field.encode())
    with pytest.raises(JournalStateError, match=f"{a.operation_id}.*{field}"):
        j.get(a.operation_id)


@pytest.mark.parametrize("field", TEXT_FIELDS)
def test_control_dynamodb_refuses_the_same_edit_naming_it(field: str) -> None:
    with aws_state("inprocess") as (_, state):
        j = DynamoJournal(state)
        (a,) = j.plan([op("m-1")])
        edit(j, a.operation_id, field, field.encode())
        with pytest.raises(JournalStateError, match=f"{a.operation_id}.*{field}"):
            j.get(a.operation_id)


def _expired_delete_planned(home: Path) -> tuple[SqliteStore, FileSink, str]:
    """An expired record whose delete a night planned and never ran (killed after the plan)."""
    store, sink = SqliteStore(home / "memlife.db"), FileSink(home / "receipts")
    r = rec("m-exp", expires_at=T0 - timedelta(days=1))
    store.put_many([r])
    ex = executor(store, sink, T0)
    (o,) = ex.journal.plan([ex.new_op(OpKind.delete, r.actor_id, r.namespace, r.id,
                                      ["HARD_EXPIRED"], r.sha256)])  # fmt: skip
    return store, sink, o.operation_id


def test_the_next_nights_queue_names_a_blob_actor_not_a_bare_type_error(home: Path) -> None:
    store, sink, oid = _expired_delete_planned(home)
    try:
        other = rec("m-2", expires_at=T0 - timedelta(days=1))
        store.put_many([other])
        ex = executor(store, sink, T0)
        ex.journal.plan([ex.new_op(OpKind.delete, other.actor_id, other.namespace, other.id,
                                   ["HARD_EXPIRED"], other.sha256)])  # fmt: skip
        store.connection.execute(
            "UPDATE operations SET actor_id=? WHERE operation_id=?", (b"u-1", oid)
        )
        with pytest.raises(JournalStateError, match=f"{oid}.*actor_id"):
            executor(store, sink, T0 + timedelta(days=1), key="n1").resume_due(Tally())
    finally:
        store.close()


# -- 2. work done that says nothing was done ---------------------------------------------------
@pytest.mark.parametrize("state", ["APPLIED", "RECEIPTED"])
def test_work_done_with_no_outcome_is_refused(journal: Any, state: str) -> None:
    (a,) = journal.plan([op("m-1")])
    edit(journal, a.operation_id, "state", state)
    edit(journal, a.operation_id, "attempts", 1)  # fits any state but PLANNED (audit 49f)
    with pytest.raises(JournalStateError, match=f"{a.operation_id}.*no outcome"):
        journal.get(a.operation_id)


def test_a_move_to_applied_naming_nothing_done_is_refused_before_it_is_written(
    journal: Any,
) -> None:
    (a,) = journal.plan([op("m-1")])
    for outcome in (None, Outcome.failed):
        with pytest.raises(JournalStateError, match=a.operation_id):
            journal.transition(a.operation_id, OpState.APPLIED, outcome=outcome)
        got = journal.get(a.operation_id)
        assert got is not None and (got.state, got.attempts) == (OpState.PLANNED, 0)


def test_the_next_night_does_not_receipt_an_applied_delete_that_did_nothing(home: Path) -> None:
    """The delete owed for an expired record, set to APPLIED by hand with no outcome: the
    next night wrote its receipt (outcome null) and closed it, the record still there."""
    store, sink, oid = _expired_delete_planned(home)
    try:
        store.connection.execute(
            "UPDATE operations SET state='APPLIED', attempts=1 WHERE operation_id=?", (oid,)
        )
        with pytest.raises(JournalStateError, match=f"{oid}.*no outcome"):
            executor(store, sink, T0 + timedelta(days=1), key="n1").resume_due(Tally())
        assert not (home / "receipts" / "operations" / f"{oid}.json").exists()
        assert store.get("m-exp") is not None
    finally:
        store.close()


def test_control_an_applied_delete_is_receipted_by_the_next_night(home: Path) -> None:
    store, sink, oid = _expired_delete_planned(home)
    try:
        executor(store, sink, T0 + timedelta(days=1), key="n1").resume_due(Tally())
        got = open_journal_of(store).get(oid)
        assert got is not None and (got.state, got.outcome) == (OpState.RECEIPTED, Outcome.deleted)
        assert store.get("m-exp") is None
        assert (home / "receipts" / "operations" / f"{oid}.json").exists()
    finally:
        store.close()


def open_journal_of(store: SqliteStore) -> SqliteJournal:
    return SqliteJournal(store.connection, store.lock)


# -- 3. one operation id, two tenants ----------------------------------------------------------
def _first_attempt_deleted(home: Path) -> tuple[SqliteStore, FileSink]:
    """A night's attempt that deleted u-1's expired m-1 (journaled, receipted) and was then
    killed before its run receipt: the rerun is the same run (same key)."""
    store, sink = SqliteStore(home / "memlife.db"), FileSink(home / "receipts")
    a = rec("m-1", expires_at=T0 - timedelta(days=1))
    store.put_many([a])
    t = Tally()
    executor(store, sink, T0).delete([DeleteItem(a.id, a.actor_id, a.namespace,
                                                 ("HARD_EXPIRED",), a.sha256)], t)  # fmt: skip
    assert t.counts["deleted"] == 1 and store.get("m-1") is None
    return store, sink


def test_a_rerun_deletes_another_tenants_record_that_took_the_removed_id(home: Path) -> None:
    store, sink = _first_attempt_deleted(home)
    try:
        # before the rerun, an import gives u-2 an expired record under the freed id
        b = rec("m-1", actor_id="u-2", namespace="/users/u-2/facts", content="Other.",
                expires_at=T0 - timedelta(days=1))  # fmt: skip
        store.put_many([b])
        t = Tally()
        ex = executor(store, sink, T0)  # the rerun: the same run key
        ex.delete([DeleteItem(b.id, b.actor_id, b.namespace, ("HARD_EXPIRED",), b.sha256)], t)
        assert store.get("m-1") is None  # u-2's expired record went, as owed
        assert t.counts["deleted"] == 1
        ops = ex.journal.for_record("m-1")
        assert sorted((o.actor_id, o.state, o.outcome) for o in ops) == [
            ("u-1", OpState.RECEIPTED, Outcome.deleted),
            ("u-2", OpState.RECEIPTED, Outcome.deleted),
        ]
        for o in ops:  # each delete has its own receipt
            assert (home / "receipts" / "operations" / f"{o.operation_id}.json").exists()
        # a second rerun finds u-2's operation again: nothing planned twice
        again = executor(store, sink, T0)
        again.delete([DeleteItem(b.id, b.actor_id, b.namespace, ("HARD_EXPIRED",), b.sha256)],
                     Tally())  # fmt: skip
        assert len(again.journal.for_record("m-1")) == 2
    finally:
        store.close()


def test_control_a_rerun_of_the_same_tenants_delete_finds_its_own_operation(home: Path) -> None:
    store, sink = _first_attempt_deleted(home)
    try:
        t = Tally()
        ex = executor(store, sink, T0)
        ex.delete([DeleteItem("m-1", "u-1", "/users/u-1/facts", ("HARD_EXPIRED",), None)], t)
        assert t.counts["deleted"] == 0 and t.counts["failed"] == 0  # done once, not again
        assert [o.actor_id for o in ex.journal.for_record("m-1")] == ["u-1"]
    finally:
        store.close()


# -- parity: the same answers on both journals -------------------------------------------------
def _norm(o: Operation | None) -> dict[str, Any] | None:
    if o is None:
        return None
    d = dataclasses.asdict(o)
    d.pop("created_at"), d.pop("updated_at")  # the wall clock of each write
    return d


def _answers(journal: Any, tmp: Path) -> list[Any]:
    """Hand edits both journals refuse alike, moves, the run secret and the gate verdict
    kept create-only under it (evidence_gate, audit 50j)."""
    out: list[Any] = []
    a, b, c = op("m-0"), op("m-1"), op("m-2")
    out.append([_norm(x) for x in journal.plan([a, b, c])])
    out.append(_norm(journal.transition(a.operation_id, OpState.APPLIED, outcome=Outcome.deleted)))
    out.append(_norm(journal.transition(a.operation_id, OpState.RECEIPTED)))
    out.append(_norm(journal.transition(b.operation_id, OpState.FAILED, error="V")))
    for edited, column, value in [(c, "state", "FAILED"), (c, "attempts", 1)]:
        edit(journal, edited.operation_id, column, value)
    out.append(_norm(journal.get(c.operation_id)))  # a bare FAILED: the machine writes it
    edit(journal, c.operation_id, "outcome", "deleted")  # FAILED yet done (51f)
    with pytest.raises(JournalStateError) as refused:
        journal.get(c.operation_id)
    out.append(str(refused.value))
    secret = journal.run_secret()
    out.append((len(secret), journal.run_secret() == secret))
    prefix = f"runs/2026/11/01/{RUN}"
    sink = FileSink(tmp / "receipts")
    ctx = SimpleNamespace(config=SimpleNamespace(dry_run=False), sink=sink, prefix=prefix,
                          run_id=RUN)  # fmt: skip
    first = keep_verdict(ctx, {"blocked": True, "cases": 3}, secret)  # type: ignore[arg-type]
    again = keep_verdict(ctx, {"blocked": False, "cases": 3}, secret)  # type: ignore[arg-type]
    assert first is not None and again is not None
    out.append((first.gate, first.rerun, again.gate, again.rerun, first.sha256 == again.sha256))
    return out


def test_both_journals_answer_alike(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir(), (tmp_path / "d").mkdir()
    on_sqlite = _answers(SqliteJournal.at(tmp_path / "s" / "journal.db"), tmp_path / "s")
    with aws_state("inprocess") as (_, state):
        on_dynamo = _answers(DynamoJournal(state), tmp_path / "d")
    assert on_sqlite == on_dynamo
    # the rerun reports the verdict the night kept (blocked), its own beside it
    assert on_sqlite[-1][:4] == (
        {"blocked": True, "cases": 3}, None, {"blocked": True, "cases": 3},
        {"blocked": False, "cases": 3},
    )  # fmt: skip
