"""When each record's supersede was done, as the journal knows it (memlife/superseded_since.py).

Both readers (SQL over a SQLite journal, ``for_record`` over any journal: the DynamoDB one)
must give the latest supersede that took effect, and nothing for an operation that failed,
was only planned, or superseded another record.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from memlife.journal import (
    Operation,
    OpKind,
    OpState,
    Outcome,
    SqliteJournal,
    open_supersede_times,
)
from memlife.journal import supersede_times_via as via_for_record
from memlife.journal.sqlite import read_supersede_times

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _op(oid: str, rid: str, kind: OpKind = OpKind.supersede) -> Operation:
    return Operation(operation_id=oid, run_id="run-1", kind=kind, actor_id="u",
                     namespace="/users/u/facts", record_id=rid, reasons=[],
                     policy_version="p", replacement_id="r-new")  # fmt: skip


def _journal(tmp_path: Path) -> SqliteJournal:
    j = SqliteJournal.at(tmp_path / "journal.db")
    j.plan([_op("o1", "a"), _op("o2", "a"), _op("o3", "b"), _op("o4", "c"),
            _op("o5", "d", OpKind.delete), _op("o6", "e")])  # fmt: skip
    j.transition("o1", OpState.APPLIED, outcome=Outcome.superseded, at=T0)
    j.transition("o1", OpState.RECEIPTED, at=T0 + timedelta(minutes=1))
    j.transition("o2", OpState.APPLIED, outcome=Outcome.superseded, at=T0 + timedelta(days=5))
    j.transition("o3", OpState.FAILED, outcome=Outcome.failed, error="X", at=T0)
    j.transition("o5", OpState.APPLIED, outcome=Outcome.deleted, at=T0)  # not a supersede
    j.transition("o6", OpState.APPLIED, outcome=Outcome.skipped, at=T0)
    return j  # o4 (record c) only planned


def test_both_readers_give_the_latest_supersede_operation_of_each_record(tmp_path: Path) -> None:
    """Any supersede operation counts, whatever its state: one that failed after the store
    wrote (a hand-over stopped) superseded the record too (review of session 31), and a
    later time only delays a deletion. A delete and another record's operation do not."""
    j = _journal(tmp_path)
    ids = ["a", "b", "c", "d", "e", "zz"]
    for got in (read_supersede_times(j.connection, j.lock, ids), via_for_record(j, ids)):
        assert set(got) == {"a", "b", "c", "e"}  # c: planned only, at its planning time
        assert (got["a"], got["b"], got["e"]) == (T0 + timedelta(days=5), T0, T0)


def test_a_store_without_a_journal_table_knows_none(tmp_path: Path) -> None:
    import sqlite3
    import threading

    conn = sqlite3.connect(tmp_path / "plain.db")
    assert read_supersede_times(conn, threading.RLock(), ["a"]) == {}
    assert not conn.execute("SELECT name FROM sqlite_master").fetchall()  # nothing created


def test_a_sqlite_store_reads_its_own_file(tmp_path: Path) -> None:
    j = _journal(tmp_path)

    class Store:  # what open_supersede_times asks of an embedded store
        connection = j.connection
        lock = j.lock

    read = open_supersede_times(Store())
    assert read is not None and read(["a", "d"]) == {"a": T0 + timedelta(days=5)}


def test_dynamodb_keeps_a_supersede_past_its_ttl(tmp_path: Path) -> None:
    """Review of session 31: a receipted operation expired ``ttl_days`` (30) after receipt,
    so the supersede's time was gone long before a standard record's 90 days of superseded
    retention, and the record was deleted on day 31. A supersede (and a removal, which
    voids the supersedes before it) is kept a year at least; other operations keep the
    state's TTL. DynamoDB's TTL is played by deleting what has expired by day 31."""
    import time

    from memlife.journal.dynamodb import DynamoJournal
    from tests.support.aws_state import aws_state

    with aws_state("inprocess") as (_, state):
        j = DynamoJournal(state)
        j.plan([_op("o1", "m-tea"), _op("o2", "m-old", OpKind.quarantine)])
        j.transition("o1", OpState.APPLIED, outcome=Outcome.superseded)
        j.transition("o2", OpState.APPLIED, outcome=Outcome.quarantined)
        for oid in ("o1", "o2"):
            j.transition(oid, OpState.RECEIPTED)
        day31 = time.time() + 31 * 86400
        for it in state.ddb.scan(TableName=state.table)["Items"]:
            if "expires_at" in it and int(it["expires_at"]["N"]) < day31:
                state.ddb.delete_item(TableName=state.table, Key={"pk": it["pk"], "sk": it["sk"]})
        assert j.get("o2") is None  # the quarantine expired with the state's TTL
        assert set(via_for_record(j, ["m-tea"])) == {"m-tea"}  # the supersede did not


def test_dynamodb_reads_many_records_together_and_as_each_alone(tmp_path: Path) -> None:
    """Session 30 "Left": the DynamoDB journal was asked one record at a time, a membership
    query then a batch read each (two calls a record, one after another). ``for_records``
    runs the queries together and reads every operation they name in one batch; what it
    gives is ``for_record``'s for each id."""
    from collections import Counter

    from memlife.journal.dynamodb import DynamoJournal
    from tests.support.aws_state import aws_state

    with aws_state("inprocess") as (_, state):
        j = DynamoJournal(state)
        rids = [f"m-{i}" for i in range(30)]
        j.plan(
            [_op(f"o{i}", rid) for i, rid in enumerate(rids)] + [_op("od", "m-0", OpKind.delete)]
        )
        for i in range(0, 30, 2):
            j.transition(f"o{i}", OpState.APPLIED, outcome=Outcome.superseded)
        calls: Counter[str] = Counter()

        def count(model, **_: object) -> None:
            calls[model.name] += 1

        state.ddb.meta.events.register("before-call.dynamodb", count)
        together = j.for_records([*rids, "m-none", "m-0"])
        assert calls == Counter({"Query": 31, "BatchGetItem": 1})  # was 31 + 31, in turn
        alone = {rid: j.for_record(rid) for rid in [*rids, "m-none"]}
        key = lambda ops: sorted((o.operation_id, o.state) for o in ops)  # noqa: E731
        assert {r: key(o) for r, o in together.items()} == {r: key(o) for r, o in alone.items()}
        assert key(together["m-0"]) == [("o0", OpState.APPLIED), ("od", OpState.PLANNED)]
        assert together["m-none"] == []
        assert set(via_for_record(j, rids)) == set(rids)  # every one planned or applied
