"""Session 45 (audit 45f): DynamoDB's batch calls answer part of a request as ``UnprocessedItems`` /
``UnprocessedKeys`` (a throttled partition, a response past 16 MB): a 200, not an error,
so botocore retries nothing (audit 45f, backend parity).

The adversary is DynamoDB itself, made to hold items back by botocore event hooks on the
real client (the network boundary): the request goes to moto without the held items and
the answer names them unprocessed, as the service does. Every backend must then give the
same answers as SQLite (each held item retried, none lost), and a table that keeps holding
items back must end in a clear throttling error, never a loop that resends for ever."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from memlife.journal import Operation, OpKind, SqliteJournal, operation_id
from memlife.journal.dynamodb import DynamoJournal
from memlife.model import MemoryRecord, MemoryType
from memlife.state.dynamodb import DynamoState, key
from memlife.stores.sqlite import SqliteStore
from memlife.throttling import is_throttling
from tests.fakes.agentcore import AgentCoreHarness
from tests.support.aws_state import aws_state

T0 = datetime(2026, 11, 1, tzinfo=UTC)


class Spun(Exception):
    """The hook's own stop: the code under test resent one request this many times."""


class HoldBack:
    """DynamoDB answering part of each batch as unprocessed, on a real client. By default
    a request of more than ``keep`` items has its last ``keep`` held back (their retry goes
    through); ``always``: the last item of every request is held back, for good."""

    OPS = ("BatchWriteItem", "BatchGetItem")

    def __init__(self, client: Any, *, keep: int = 3, always: bool = False, limit: int = 200):
        self.events, self.keep, self.always, self.limit = client.meta.events, keep, always, limit
        self.calls = dict.fromkeys(self.OPS, 0)
        self.held = 0
        for op in self.OPS:
            self.events.register(f"before-parameter-build.dynamodb.{op}", self._hold)
            self.events.register(f"after-call.dynamodb.{op}", self._answer)

    def remove(self) -> None:
        for op in self.OPS:
            self.events.unregister(f"before-parameter-build.dynamodb.{op}", self._hold)
            self.events.unregister(f"after-call.dynamodb.{op}", self._answer)

    def _hold(self, params: dict, model: Any, context: dict, **_: Any) -> None:
        self.calls[model.name] += 1
        if self.calls[model.name] > self.limit:
            raise Spun(f"{model.name} sent {self.limit} times")
        ((table, req),) = params["RequestItems"].items()
        reads = model.name == "BatchGetItem"
        items = req["Keys"] if reads else req
        n = 1 if self.always else self.keep if len(items) > self.keep else 0
        if not n:
            return
        kept, held = items[:-n], items[-n:]
        self.held += len(held)
        context["held"] = (table, held, not kept)
        if kept:  # else sent whole (moto refuses an empty request) and answered unprocessed
            params["RequestItems"] = {table: {**req, "Keys": kept} if reads else kept}

    def _answer(self, parsed: dict, model: Any, context: dict, **_: Any) -> None:
        if "held" not in context:
            return
        table, held, whole = context["held"]
        if model.name == "BatchGetItem":
            if whole:
                parsed.setdefault("Responses", {})[table] = []
            parsed["UnprocessedKeys"] = {table: {"Keys": held, "ConsistentRead": True}}
        else:
            parsed["UnprocessedItems"] = {table: [dict(x) for x in held]}


def _op(rid: str) -> Operation:
    return Operation(operation_id=operation_id("run-1", OpKind.delete, [rid]), run_id="run-1",
                     kind=OpKind.delete, actor_id="u-1", namespace="/users/u-1/facts",
                     record_id=rid, reasons=["HARD_EXPIRED"], policy_version="p1",
                     content_sha256="ab" * 32)  # fmt: skip


def _journal_view(journal: Any, ids: list[str]) -> tuple:
    ops = journal.plan([_op(i) for i in ids])
    by_record = journal.for_records(ids)
    return (
        [(o.operation_id, o.record_id, o.state.value) for o in ops],
        sorted(o.operation_id for o in journal.by_run("run-1")),
        {rid: [o.operation_id for o in found] for rid, found in by_record.items()},
    )


def test_a_journal_on_dynamodb_that_holds_items_back_answers_as_sqlite(tmp_path: Path) -> None:
    """DynamoDB holds back three items of every batch write and batch read of a plan of 30
    deletes (60 memberships in three writes, 30 operations read back in one batch): the
    journal retries each held item, so the run lists, and each record finds, every
    operation exactly as the SQLite journal does."""
    ids = [f"m-{i:02d}" for i in range(30)]
    want = _journal_view(SqliteJournal.at(tmp_path / "journal.db"), ids)
    with aws_state("inprocess") as (_, state):
        hold = HoldBack(state.ddb)
        got = _journal_view(DynamoJournal(state), ids)
    assert hold.held >= 12  # every write and read above had items held back
    assert got == want


@pytest.fixture(scope="module")
def harness() -> Iterator[AgentCoreHarness]:
    h = AgentCoreHarness()
    yield h
    h.close()


def _records() -> list[MemoryRecord]:
    """Two actors, two namespaces each; every third owner too long for metadata (overflow,
    so listing reads the sidecar)."""
    out = []
    for i in range(24):
        actor = f"u-{i % 2}"
        ns = f"/users/{actor}/{('facts', 'preferences')[i // 2 % 2]}"
        out.append(MemoryRecord(id=f"m-{i:02d}", actor_id=actor, namespace=ns,
                                memory_type=MemoryType.semantic, content=f"Fact number {i}.",
                                owner="team é" * 60 if i % 3 == 0 else "team",
                                created_at=T0))  # fmt: skip
    return out


def _store_view(store: Any) -> dict[str, tuple]:
    return {r.id: (r.actor_id, r.namespace, r.content, r.owner) for r in store.iter_all()}


def _reopened(harness: AgentCoreHarness) -> Any:
    """Another process's store over the same memory and sidecar: nothing cached."""
    from memlife.stores.agentcore import AgentCoreStore

    return AgentCoreStore(harness.fake.memory_id, region="us-east-1",
                          endpoint_url=harness.fake.endpoint_url,
                          sidecar_table=harness.sidecar_table, clients=harness.clients,
                          retry_base_s=0.001)  # fmt: skip


def test_the_agentcore_sidecar_holding_items_back_loses_none(
    harness: AgentCoreHarness, tmp_path: Path
) -> None:
    """The AgentCore store's sidecar holds back items of every batch read and write (the
    shard registry, the overflow and id reads, the deletes' clean-up): after the same writes
    and deletes another process lists and reads the same records as SQLite, and no deleted
    record keeps a sidecar item."""
    recs = _records()
    gone = [r.id for r in recs[::4]]
    left = [r.id for r in recs if r.id not in gone]
    sq = SqliteStore(tmp_path / "sq.db")
    sq.put_many(recs)
    sq.delete_many(gone)
    harness.store()
    hold = HoldBack(harness.clients[2])
    try:
        writer = _reopened(harness)
        assert not writer.put_many(recs).failed
        assert not writer.delete_many(gone).failed
        reader = _reopened(harness)
        assert list(reader.list_actors()) == ["u-0", "u-1"]
        assert _store_view(reader) == _store_view(sq)
        assert sorted(_reopened(harness).get_many(left)) == left
        assert reader.sidecar.get_many(gone) == {}
    finally:
        hold.remove()
        sq.close()
    assert hold.held > 0


def _write(state: DynamoState) -> None:
    state.batch_write(puts=[{**key("perase", f"m-{i}"), "at": {"S": "x"}} for i in range(5)])


def _read(state: DynamoState) -> None:
    _write(state)
    HoldBack(state.ddb, always=True, limit=100)
    state.batch_get([key("perase", f"m-{i}") for i in range(5)])


@pytest.mark.parametrize("call", [_write, _read], ids=["batch_write", "batch_get"])
def test_items_dynamodb_keeps_holding_back_end_in_a_throttling_error(call: Any) -> None:
    """DynamoDB holds back the last item of every batch request for good (a partition that
    stays throttled). The state table must give up after a bounded number of resends with
    an error the run reads as throttling (its shards named failed, THROTTLED, the run goes
    on), not resend the same request for ever: the hook stops it at the 100th."""
    with aws_state("inprocess") as (_, state):
        if call is _write:
            HoldBack(state.ddb, always=True, limit=100)
        with pytest.raises(ClientError) as caught:
            call(state)
    assert is_throttling(caught.value)
