"""The journal contract, for every backend: SQLite (embedded) and DynamoDB (moto, in-process
and over HTTP). Same state machine, same answers; plus what only DynamoDB has to prove
(conditional writes against a second writer, TTL on finished operations)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife.journal import (
    JournalStateError,
    Mover,
    Operation,
    OpKind,
    OpState,
    Outcome,
    SqliteJournal,
    operation_id,
)
from memlife.journal.dynamodb import DynamoJournal
from tests.support.aws_state import aws_state

T0 = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "dynamodb", "dynamodb-http"])
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    if request.param == "sqlite":
        yield SqliteJournal.at(tmp_path / "journal.db")
        return
    with aws_state("inprocess" if request.param == "dynamodb" else "server") as (_, state):
        yield DynamoJournal(state)


def op(rid: str, kind: OpKind = OpKind.delete, run: str = "run-1", **kw) -> Operation:
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
        **kw,
    )


def test_the_run_secret_is_made_once_and_read_by_everyone(journal, tmp_path: Path) -> None:
    """Manual run ids are keyed by it (quarantine.manual_run): random, made once per store,
    the same for every reader of the journal."""
    first = journal.run_secret()
    assert len(first) == 32 and journal.run_secret() == first
    other = (
        SqliteJournal.at(tmp_path / "journal.db")
        if isinstance(journal, SqliteJournal)
        else DynamoJournal(journal.state)
    )
    assert other.run_secret() == first


def test_plan_inserts_and_keeps_existing_state(journal) -> None:
    a, b = op("m-1"), op("m-2")
    got = journal.plan([a, b])
    assert [o.operation_id for o in got] == [a.operation_id, b.operation_id]
    assert all(o.state is OpState.PLANNED and o.attempts == 0 for o in got)
    assert got[0].reasons == ["HARD_EXPIRED"] and got[0].content_sha256 == "ab" * 32
    journal.transition(a.operation_id, OpState.APPLIED, outcome=Outcome.deleted)
    again = journal.plan([op("m-1"), op("m-3")])  # a rerun plans the same ids again
    assert again[0].state is OpState.APPLIED and again[0].outcome is Outcome.deleted
    assert again[1].state is OpState.PLANNED
    assert journal.get("op-nope") is None


def test_transitions_follow_the_state_machine(journal) -> None:
    (a,) = journal.plan([op("m-1", payload='{"id": "m-9"}')])
    with pytest.raises(JournalStateError):
        journal.transition(a.operation_id, OpState.RECEIPTED)  # PLANNED -> RECEIPTED
    failed = journal.transition(
        a.operation_id, OpState.FAILED, error="THROTTLED", next_retry_at=T0 + timedelta(hours=1)
    )
    assert failed.attempts == 1 and failed.last_error == "THROTTLED"
    applied = journal.transition(a.operation_id, OpState.APPLIED, outcome=Outcome.deleted)
    assert applied.attempts == 2 and applied.last_error is None and applied.next_retry_at is None
    assert journal.get(a.operation_id).payload == '{"id": "m-9"}'
    done = journal.transition(a.operation_id, OpState.RECEIPTED)
    assert done.state is OpState.RECEIPTED and done.outcome is Outcome.deleted
    stored = journal.get(a.operation_id)
    assert stored.state is OpState.RECEIPTED and stored.payload is None and stored.attempts == 2
    for to in OpState:
        with pytest.raises(JournalStateError):
            journal.transition(a.operation_id, to)  # RECEIPTED is final
    with pytest.raises(JournalStateError):
        journal.transition("op-missing", OpState.APPLIED)


def test_every_transition_records_its_mover(journal) -> None:
    """Which run moved an operation last (and how many of its own receipts existed when that
    attempt began): what `receipts verify` judges "after the seal" by, not a clock. An
    operation planned and never moved (or an item/row written before movers) reads None;
    a move that names no mover clears the last one rather than keep a stale one."""
    (a,) = journal.plan([op("m-1")])
    assert (a.moved_by, a.moved_after_receipts) == (None, None)
    failed = journal.transition(a.operation_id, OpState.FAILED, error="THROTTLED",
                                next_retry_at=T0, by=Mover("run-1"))  # fmt: skip
    assert (failed.moved_by, failed.moved_after_receipts) == ("run-1", 0)
    journal.transition(a.operation_id, OpState.APPLIED, outcome=Outcome.deleted,
                       by=Mover("run-2", 3))  # fmt: skip
    stored = journal.get(a.operation_id)
    assert (stored.moved_by, stored.moved_after_receipts) == ("run-2", 3)
    assert stored.run_id == "run-1"  # the planner stays the operation's run
    done = journal.transition(a.operation_id, OpState.RECEIPTED)
    assert (done.moved_by, done.moved_after_receipts) == (None, None)
    assert journal.get(a.operation_id).moved_by is None
    assert journal.by_run("run-1")[0].moved_by is None


def test_by_run_and_for_record(journal) -> None:
    ops = [
        op("m-1"),
        op("m-2"),
        op("m-3", run="run-2"),
        op("m-4", kind=OpKind.write_replacement, replacement_id="m-r"),
    ]
    journal.plan(ops)
    run1 = journal.by_run("run-1")
    assert [o.operation_id for o in run1] == sorted(
        o.operation_id for o in ops if o.run_id == "run-1"
    )
    assert [o.record_id for o in journal.by_run("run-2")] == ["m-3"]
    assert journal.by_run("run-3") == []
    assert [o.record_id for o in journal.for_record("m-2")] == ["m-2"]
    assert [o.record_id for o in journal.for_record("m-r")] == ["m-4"]  # by replacement id
    assert journal.for_record("m-none") == []


def test_due_is_the_retry_queue(journal) -> None:
    planned, applied, later, now_due, done = (op(f"m-{i}") for i in range(5))
    journal.plan([planned, applied, later, now_due, done])
    journal.transition(applied.operation_id, OpState.APPLIED, outcome=Outcome.deleted)
    journal.transition(
        later.operation_id, OpState.FAILED, error="X", next_retry_at=T0 + timedelta(days=1)
    )
    journal.transition(
        now_due.operation_id, OpState.FAILED, error="X", next_retry_at=T0 - timedelta(days=1)
    )
    journal.transition(done.operation_id, OpState.APPLIED, outcome=Outcome.deleted)
    journal.transition(done.operation_id, OpState.RECEIPTED)
    due = {o.record_id for o in journal.due(T0)}
    assert due == {planned.record_id, applied.record_id, now_due.record_id}
    assert {o.record_id for o in journal.due(T0 + timedelta(days=2))} == due | {later.record_id}
    assert len(journal.due(T0, limit=2)) == 2


def test_forget_payloads_drops_every_payload_naming_the_record(journal) -> None:
    own = op("m-1", payload="{}")
    replacing = op(
        "m-r",
        kind=OpKind.write_replacement,
        replacement_id="m-r",
        payload=json.dumps({"id": "m-r", "supersedes": ["m-1", "m-2"]}),
    )
    other = op("m-3", payload=json.dumps({"id": "m-3"}))
    journal.plan([own, replacing, other])
    assert journal.forget_payloads(["m-1"]) == 2
    assert journal.get(own.operation_id).payload is None
    assert journal.get(replacing.operation_id).payload is None
    assert journal.get(other.operation_id).payload == json.dumps({"id": "m-3"})
    assert journal.forget_payloads(["m-1"]) == 0


def test_forget_payloads_finds_a_non_ascii_id_as_payloads_write_it(journal) -> None:
    """Adversarial review: payloads are pydantic JSON (raw UTF-8) and the search used
    json.dumps (escaped): an erased source "src-é" left its replacement's text behind."""
    replacing = op(
        "m-r2",
        kind=OpKind.write_replacement,
        replacement_id="m-r2",
        payload=json.dumps({"id": "m-r2", "supersedes": ["src-é"]}, ensure_ascii=False),
    )
    journal.plan([replacing])
    assert journal.forget_payloads(["src-é"]) == 1
    assert journal.get(replacing.operation_id).payload is None


# -- DynamoDB only -------------------------------------------------------------------------------
@pytest.fixture()
def ddb() -> Iterator[object]:
    with aws_state("inprocess") as (_, state):
        yield state


def test_a_second_writer_cannot_move_an_operation_twice(ddb, monkeypatch) -> None:
    first, second = DynamoJournal(ddb), DynamoJournal(ddb)
    (a,) = first.plan([op("m-1")])
    stale = first.get(a.operation_id)
    second.transition(a.operation_id, OpState.APPLIED, outcome=Outcome.deleted)
    monkeypatch.setattr(first, "get", lambda _id: stale)  # first still believes PLANNED
    with pytest.raises(JournalStateError, match="another writer"):
        first.transition(a.operation_id, OpState.APPLIED, outcome=Outcome.deleted)
    monkeypatch.undo()
    assert first.get(a.operation_id).attempts == 1  # applied once, not twice


def test_finished_operations_carry_a_ttl(ddb) -> None:
    """A finished operation expires with the state's TTL (a supersede or a removal is kept
    a year: tests/unit/test_guards_session33c.py)."""
    j = DynamoJournal(ddb)
    (a, b) = j.plan([op("m-1", OpKind.quarantine), op("m-2")])
    j.transition(a.operation_id, OpState.APPLIED, outcome=Outcome.quarantined)
    j.transition(a.operation_id, OpState.RECEIPTED)
    done = ddb.get({"pk": {"S": f"op#{a.operation_id}"}, "sk": {"S": "op"}})
    live = ddb.get({"pk": {"S": f"op#{b.operation_id}"}, "sk": {"S": "op"}})
    horizon = datetime.now(UTC) + timedelta(days=ddb.settings.ttl_days)
    assert abs(int(done["expires_at"]["N"]) - horizon.timestamp()) < 120
    assert "open_pk" not in done and "payload" not in done
    assert "expires_at" not in live and "open_pk" in live
    member = ddb.get({"pk": {"S": "jrun#run-1"}, "sk": {"S": a.operation_id}})
    assert member["expires_at"] == done["expires_at"]  # memberships expire with it
    ttl = ddb.ddb.describe_time_to_live(TableName=ddb.table)["TimeToLiveDescription"]
    assert ttl["AttributeName"] == "expires_at" and ttl["TimeToLiveStatus"] == "ENABLED"


def test_a_crash_between_membership_and_operation_heals_on_rerun(ddb, monkeypatch) -> None:
    j = DynamoJournal(ddb)
    calls = {"n": 0}
    real = ddb.ddb.put_item

    def dies(**kw):
        calls["n"] += 1
        raise ConnectionError("worker killed")

    monkeypatch.setattr(ddb.ddb, "put_item", dies)
    with pytest.raises(ConnectionError):
        j.plan([op("m-1")])
    monkeypatch.setattr(ddb.ddb, "put_item", real)
    assert j.by_run("run-1") == []  # a membership without operation reads as nothing
    (a,) = j.plan([op("m-1")])
    assert [o.operation_id for o in j.by_run("run-1")] == [a.operation_id]


def test_terminal_failures_are_never_due_until_an_operator_requeues(journal) -> None:
    a, b = op("m-1"), op("m-2")
    journal.plan([a, b])
    journal.transition(a.operation_id, OpState.FAILED, error="VALIDATION")  # terminal
    journal.transition(b.operation_id, OpState.FAILED, error="THROTTLED", next_retry_at=T0)
    assert [o.record_id for o in journal.due(T0 + timedelta(days=30))] == ["m-2"]
    assert [o.record_id for o in journal.terminal_failures()] == ["m-1"]
    with pytest.raises(JournalStateError):
        journal.resolve(b.operation_id, "requeued")  # a retryable failure is not an operator's
    done = journal.resolve(a.operation_id, "requeued", at=T0, retry_at=T0)
    assert done.resolution == "requeued" and done.next_retry_at == T0
    assert journal.terminal_failures() == []
    assert {o.record_id for o in journal.due(T0)} == {"m-1", "m-2"}
    again = journal.transition(a.operation_id, OpState.FAILED, error="VALIDATION")
    assert again.resolution is None  # a new failure spends the earlier decision
    assert [o.record_id for o in journal.terminal_failures()] == ["m-1"]
    journal.resolve(a.operation_id, "dismissed")
    assert journal.terminal_failures() == []
    assert [o.resolution for o in journal.terminal_failures(include_resolved=True)] == ["dismissed"]


def test_due_pages_cover_the_queue_once(journal) -> None:
    ops = [op(f"m-{i:02d}") for i in range(7)]
    journal.plan(ops)
    pages = list(journal.due_pages(T0, page_size=3))
    assert [len(p) for p in pages] == [3, 3, 1]
    assert sorted(o.operation_id for p in pages for o in p) == sorted(o.operation_id for o in ops)


def test_consolidation_rejections_back_off_then_review(journal) -> None:
    assert journal.rejection("g-1") is None
    journal.reject("g-1", "u-1", "/ns", "UNGROUNDED", T0 + timedelta(days=1), T0)
    journal.reject("g-1", "u-1", "/ns", "SCHEMA", None, T0 + timedelta(days=1))
    journal.reject("g-2", "u-1", "/ns", "UNGROUNDED", T0 + timedelta(days=1), T0)
    got = journal.rejection("g-1")
    assert got == {"attempts": 2, "code": "SCHEMA", "next_attempt_at": None}
    assert [(g["group_key"], g["attempts"]) for g in journal.groups_in_review()] == [("g-1", 2)]
    journal.clear_rejection("g-1")
    assert journal.rejection("g-1") is None and journal.groups_in_review() == []


def test_consolidation_outcomes_are_remembered_by_key(journal) -> None:
    assert journal.outcomes(["k-1", "k-2"]) == {}
    journal.remember_outcome("k-1", "u-1", "/ns", "KEPT_APART", None, T0)
    journal.remember_outcome("k-2", "u-1", "/ns", "REFUSED", T0 + timedelta(hours=6), T0)
    journal.remember_outcome("k-2", "u-1", "/ns", "REFUSED", None, T0 + timedelta(days=1))
    got = journal.outcomes(["k-1", "k-2", "k-3", "k-1"])
    assert got == {
        "k-1": {"outcome": "KEPT_APART", "retry_at": None},
        "k-2": {"outcome": "REFUSED", "retry_at": None},  # the later answer stands
    }
    journal.forget_outcome("k-1")
    assert set(journal.outcomes(["k-1", "k-2"])) == {"k-2"}
    many = [f"m-{i:03d}" for i in range(230)]  # more than one batch read / IN chunk
    for k in many:
        journal.remember_outcome(k, "u-1", "/ns", "NO_MERGE", None, T0)
    assert set(journal.outcomes(many)) == set(many)


def test_the_run_chain_names_the_run_before_each(journal, tmp_path: Path) -> None:
    """memlife/run_chain.py on every journal backend: each run names the one before it, a
    rerun of the latest names the same one (session 29)."""
    from memlife.audit import FileSink
    from memlife.run_chain import advance

    sink = FileSink(tmp_path / "receipts")
    assert advance(journal, "run-a", sink) is None
    assert advance(journal, "run-b", sink) == "run-a"
    assert advance(journal, "run-b", sink) == "run-a"
    assert advance(journal, "run-c", sink) == "run-b"
