"""Audit 52ii: the DynamoDB journal at DynamoDB's 400 KB item limit, and its items' encoding.

An operation's payload is the record it writes (``import --update`` journals the imported
line, a consolidation its replacement). Content is bounded by the store (AgentCore: 16,000
characters), but ``provenance.source_event``, ``subject`` and ``owner`` are bounded only by
the import's 1 MiB line. ``DynamoJournal.plan`` wrote the memberships, tried the batch as
one transaction, and when DynamoDB refused it (``ValidationException``: the item is too
large) put the operations one by one: those before the large one were planned, then the
large one's put raised a bare botocore ClientError naming neither record nor field. The
run stopped half planned, and the next night's retry queue carried out the operations that
had been planned (an update the operator's import never finished).

The encoding tests (hypothesis) are controls: ids with '#', long unicode ids, times with
offsets, an empty reason list and text fields round-trip through the state table as they
went in.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from memlife.journal import JournalStateError, Operation, OpKind, OpState, operation_id
from memlife.journal.dynamodb import DynamoJournal
from memlife.model import MemoryRecord, Provenance
from memlife.state.dynamodb import DynamoState
from tests.support.aws_state import aws_state

RUN = "run-52ii"
NS = "/users/u-1/facts"


@pytest.fixture(params=["inprocess", "server"])
def state(request: pytest.FixtureRequest) -> Iterator[DynamoState]:
    with aws_state(request.param) as (_, st_):
        yield st_


def update_op(rid: str, source_event: str | None = None) -> Operation:
    """An update as ``import --update`` journals it: the imported record is the payload."""
    r = MemoryRecord(
        id=rid, actor_id="u-1", namespace=NS, memory_type="semantic", content="Drinks tea.",
        created_at=datetime(2026, 1, 2, tzinfo=UTC),
        provenance=Provenance(source_event=source_event),
    )  # fmt: skip
    return Operation(
        operation_id=operation_id(RUN, OpKind.update, [rid]), run_id=RUN, kind=OpKind.update,
        actor_id=r.actor_id, namespace=r.namespace, record_id=rid,
        reasons=["MANUAL_IMPORT_UPDATE"], policy_version="v1", content_sha256=r.sha256,
        payload=r.to_json(),
    )  # fmt: skip


def memberships(state: DynamoState) -> list[str]:
    return [i["sk"]["S"] for i in state.query(f"jrun#{RUN}")]


def test_an_operation_too_large_for_an_item_plans_nothing_and_says_which(
    state: DynamoState,
) -> None:
    journal = DynamoJournal(state)
    ops = [update_op("m-1"), update_op("m-2", "transcript " * 40_000), update_op("m-3")]
    with pytest.raises(JournalStateError) as info:
        journal.plan(ops)
    message = str(info.value)
    assert "m-2" in message and "payload" in message  # the record and the field
    assert "transcript" not in message  # never the content
    # never half written: no operation planned, no membership left to read
    assert [journal.get(o.operation_id) for o in ops] == [None, None, None]
    assert journal.due(datetime.now(UTC)) == []
    assert memberships(state) == []


def test_control_a_large_payload_under_the_limit_is_planned_with_its_batch(
    state: DynamoState,
) -> None:
    journal = DynamoJournal(state)
    ops = [update_op("m-1"), update_op("m-2", "transcript " * 25_000), update_op("m-3")]
    planned = journal.plan(ops)
    assert [o.state for o in planned] == [OpState.PLANNED] * 3
    got = journal.get(ops[1].operation_id)
    assert got is not None and got.payload == ops[1].payload
    assert sorted(o.operation_id for o in journal.by_run(RUN)) == sorted(
        o.operation_id for o in ops
    )


# -- encoding: what goes in comes back (controls) ------------------------------------------------
_ID = st.text(
    alphabet=st.sampled_from(["#", "$", "a", "Z", "0", "-", "é", "漢", "😀", " ", "/", "\x1f"]),
    min_size=1,
    max_size=256,
).filter(lambda s: s.strip() != "")
_SEQ = itertools.count()
_ZONE = st.sampled_from(
    [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=9))]
)


@pytest.fixture(scope="module")
def moto_state() -> Iterator[DynamoState]:
    with aws_state("inprocess", table="memlife-state-52ii-enc") as (_, st_):
        yield st_


@settings(
    max_examples=30,
    deadline=None,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(rid=_ID, actor=_ID, replacement=st.none() | _ID, reasons=st.lists(st.text(max_size=20), max_size=3),
       at=st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(9998, 1, 1), timezones=_ZONE),
       text=st.text(max_size=300))  # fmt: skip
def test_control_an_operation_reads_back_as_it_was_planned_and_moved(
    moto_state: DynamoState, rid: str, actor: str, replacement: str | None,
    reasons: list[str], at: datetime, text: str,
) -> None:  # fmt: skip
    journal = DynamoJournal(moto_state)
    op = Operation(
        operation_id=operation_id(f"r{next(_SEQ)}", OpKind.supersede, [rid, actor]),  # new each time
        run_id=f"run#{actor}", kind=OpKind.supersede, actor_id=actor, namespace=NS,
        record_id=rid, reasons=reasons, policy_version=text or "v1", content_sha256=text or None,
        replacement_id=replacement, payload=text or None,
    )  # fmt: skip
    (planned,) = journal.plan([op])
    for name in ("run_id", "actor_id", "record_id", "reasons", "policy_version",
                 "content_sha256", "replacement_id", "payload"):  # fmt: skip
        assert getattr(planned, name) == getattr(op, name), name
    moved = journal.transition(op.operation_id, OpState.FAILED, error=text or None,
                               next_retry_at=at)  # fmt: skip
    got = journal.get(op.operation_id)
    assert got is not None
    assert got.next_retry_at == at and got.next_retry_at.utcoffset() == at.utcoffset()
    assert got.last_error == moved.last_error == (text or None)
    assert op.operation_id in {o.operation_id for o in journal.for_record(rid)}
    if replacement:
        assert op.operation_id in {o.operation_id for o in journal.for_record(replacement)}
    assert op.operation_id in {o.operation_id for o in journal.by_run(f"run#{actor}")}
