"""Audit 51ii: the AgentCore store as the service answers it (throttled items, orphans).

(1) A BatchCreate whose every item the service answers 429 (per item, in
``failedRecords``) was retried by the transport with the very same request, and so the
same ``clientToken``: the service answers a token it has seen with its first answer (the
fake's documented idempotency; the store's own ``_create`` draws a new nonce for that
reason), so each retry got the same 429s back. A single ``remember``, or a night's single
replacement write, failed THROTTLED after a throttle that had already passed; a batch of
which only some items were throttled was retried fine (its retry is another request).

(2) A record carrying our id in its metadata that no sidecar item names (an orphan: a
create that landed after an erasure of the id, whose clean-up delete the service failed;
or a sidecar item lost, e.g. the table restored from a backup) is listed by ``page`` and
read by ``get`` after that listing, yet ``delete_many`` answered it ``missing``. A night
receipted it ``already_absent`` and an erasure claimed it erased while its text stayed.

The fake AgentCore (real boto3 over HTTP) and moto DynamoDB are the only stand-ins; the
second writer's window is opened as in test_agentcore_races_session48.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from memlife.model import MemoryRecord
from memlife.stores.agentcore import AgentCoreStore
from memlife.stores.base import iter_shard
from tests.fakes.agentcore import AgentCoreHarness, FakeAgentCore, bulk_load

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NS = "/users/u1"


def rec(i: int | str, content: str | None = None) -> MemoryRecord:
    rid = i if isinstance(i, str) else f"r{i}"
    return MemoryRecord(
        id=rid, actor_id="u1", namespace=NS, memory_type="semantic",
        content=content or f"fact {rid}", created_at=T0,
    )  # fmt: skip


@pytest.fixture(scope="module")
def harness() -> Iterator[AgentCoreHarness]:
    h = AgentCoreHarness()
    yield h
    h.close()


@pytest.fixture
def ac(harness: AgentCoreHarness) -> tuple[AgentCoreStore, FakeAgentCore]:
    return harness.store(), harness.fake


def ours(fake: FakeAgentCore, memlife_id: str) -> list[str]:
    with fake.lock:
        return [
            rid
            for rid, r in fake.records.items()
            if ((r.get("metadata") or {}).get("memlife_id") or {}).get("stringValue") == memlife_id
        ]


# -- (1) throttled items of a create ------------------------------------------------------
def test_a_create_throttled_once_per_item_is_retried_and_written(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """One record, answered 429 once (a throttle that passes): the store's bounded item
    retry must write it (the contract documents "same bounded retry of just those
    items"). Before the fix every retry was the same request with the same token, the
    service replayed its first answer, and the write failed THROTTLED."""
    store, fake = ac
    fake.fail_next_creates(["r1"], 429, times=1)
    res = store.put_many([rec(1)])
    assert res.succeeded == ["r1"], [(f.id, f.code) for f in res.failed]
    assert ours(fake, "r1") and store.get("r1") is not None
    # each retry is a new request: no token was sent twice for different attempts
    tokens = [p["clientToken"] for p in fake.ops("create")]
    assert len(tokens) == len(set(tokens)) == 2


def test_a_batch_of_creates_all_throttled_once_is_written_whole(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    store, fake = ac
    fake.fail_next_creates(["r1", "r2", "r3"], 429, times=1)
    res = store.put_many([rec(1), rec(2), rec(3)])
    assert sorted(res.succeeded) == ["r1", "r2", "r3"], [(f.id, f.code) for f in res.failed]
    assert all(len(ours(fake, f"r{i}")) == 1 for i in (1, 2, 3))


def test_control_a_batch_partly_throttled_is_retried_and_written(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """Only one of two items throttled: the retry carries that one alone (another token)
    and is written; nothing is created twice."""
    store, fake = ac
    fake.fail_next_creates(["r1"], 429, times=1)
    res = store.put_many([rec(1), rec(2)])
    assert sorted(res.succeeded) == ["r1", "r2"]
    assert len(ours(fake, "r1")) == len(ours(fake, "r2")) == 1


def test_control_a_create_whose_answer_was_lost_is_not_created_twice(
    ac: tuple[AgentCoreStore, FakeAgentCore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The token still does its job: the same attempt sent again (its answer lost, a
    crash before step 3) is deduplicated by the service, one record carries the id."""
    store, fake = ac
    real = fake._op_BatchCreate
    lost: list[bool] = []

    def answer(body: dict[str, Any], query: dict[str, Any], groups: tuple[str, ...]) -> Any:
        status, out = real(body, query, groups)
        if not lost:  # created, but the client sees a 500 (botocore retries the request)
            lost.append(True)
            from tests.fakes.agentcore import ApiError

            raise ApiError(500, "ServiceException", "answer lost")
        return status, out

    monkeypatch.setattr(fake, "_op_BatchCreate", answer)
    assert store.put_many([rec(1)]).succeeded == ["r1"]
    assert len(ours(fake, "r1")) == 1


# -- (2) a record of ours no sidecar item names ------------------------------------------
def before_create(
    store: AgentCoreStore, monkeypatch: pytest.MonkeyPatch, other: Callable[[], Any]
) -> None:
    """Run ``other`` once just before ``store``'s first BatchCreate (its item pending)."""
    real = store.transport.batch
    ran: list[bool] = []

    def batch(op: Any, entries: Any) -> Any:
        if op == "create" and not ran:
            ran.append(True)
            other()
        return real(op, entries)

    monkeypatch.setattr(store.transport, "batch", batch)


def second_writer(harness: AgentCoreHarness) -> AgentCoreStore:
    fake = harness.fake
    return AgentCoreStore(
        fake.memory_id, region="us-east-1", endpoint_url=fake.endpoint_url,
        sidecar_table=harness.sidecar_table, clients=harness.clients, retry_base_s=0.001,
    )  # fmt: skip


def listed(store: AgentCoreStore) -> list[str]:
    return sorted(r.id for p in iter_shard(store, "u1", NS) for r in p.records)


def test_an_orphan_whose_clean_up_failed_is_deleted_by_the_erasure_that_lists_it(
    harness: AgentCoreHarness,
    ac: tuple[AgentCoreStore, FakeAgentCore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Writer A stages r1; an erasure (writer B) of r1 runs in that window and finds no
    record; A's create lands after it. A sees the item gone and deletes its record at
    once (audit 48e), but the service fails that delete (a 500). The orphan carries r1's
    text: B's next pass lists it under r1 and reads it; its delete by id must take it,
    not answer ``missing`` (receipted ``already_absent``) and leave the text."""
    a, fake = ac
    b = second_writer(harness)
    before_create(a, monkeypatch, lambda: b.delete_many(["r1"]))
    fake.fail_next_deletes(["r1"], 500, times=1)  # the orphan's clean-up fails
    a.put_many([rec(1, "lives at 12 Elm Street")])
    assert len(ours(fake, "r1")) == 1  # the orphan
    assert listed(b) == ["r1"] and b.get("r1") is not None
    res = b.delete_many(["r1"])
    assert res.succeeded == ["r1"] and not res.missing
    assert ours(fake, "r1") == []
    assert listed(b) == []


def test_a_listed_record_whose_sidecar_item_is_gone_is_deleted_not_called_missing(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """The sidecar lost r1's item (a table restored from a backup older than the record).
    The night pages r1 (its metadata names it) and reads it; deleting it must delete it
    (or fail it), never report it already gone while it stays."""
    store, fake = ac
    bulk_load(store, fake, [rec(1), rec(2)])
    store.sidecar.client.delete_item(
        TableName=store.sidecar.table, Key={"pk": {"S": "rec#r1"}, "sk": {"S": "rec"}}
    )
    assert listed(store) == ["r1", "r2"] and store.get("r1") is not None
    res = store.delete_many(["r1"])
    assert res.succeeded == ["r1"] and not res.missing
    assert ours(fake, "r1") == [] and ours(fake, "r2")


def test_control_an_id_never_listed_nor_named_is_missing(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """No location known for the id and no sidecar item: still ``missing``, one call."""
    store, fake = ac
    bulk_load(store, fake, [rec(2)])
    before = len(fake.requests)
    res = store.delete_many(["r1"])
    assert res.missing == ["r1"] and not res.succeeded
    assert [op for op, _ in fake.requests[before:]] == []
    assert ours(fake, "r2")


def test_control_a_location_that_no_longer_carries_the_id_is_not_deleted(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """A location the store listed for r1 that now holds another record (r1 was deleted
    by another writer, r2 is there) is read back first and left alone."""
    store, fake = ac
    bulk_load(store, fake, [rec(1), rec(2)])
    assert listed(store) == ["r1", "r2"]
    [r1_at] = ours(fake, "r1")
    [r2_at] = ours(fake, "r2")
    store.sidecar.client.delete_item(
        TableName=store.sidecar.table, Key={"pk": {"S": "rec#r1"}, "sk": {"S": "rec"}}
    )
    with fake.lock:  # r1's record now carries r2's id (as if rewritten by another writer)
        fake.records[r1_at]["metadata"] = dict(fake.records[r2_at]["metadata"])
    res = store.delete_many(["r1"])
    assert res.missing == ["r1"]
    assert r1_at in fake.records and r2_at in fake.records
