"""Audit 52ii2: a throttled sidecar write after AgentCore created the record.

``writes._create`` step 3 records the new ``memoryRecordId`` in the sidecar (DynamoDB).
When that PutItem is throttled past botocore's attempts, ``Sidecar._put_one`` recorded the
throttling as a per-item failure, which ``_create`` read as a lost race. The claim of the
still pending item in ``_settle_lost_create``, throttled too, failed the same way, so the
record AgentCore had just created was deleted and the item reported ``CONFLICT``
(retryable). The sidecar item stayed pending with its old ``create_nonce``: the retry sent
the same ``clientToken``, the service answered with the deleted record's id (an idempotent
replay: the fake answers a repeated token with the first answer, as AWS's idempotent APIs
do), and the write reported success for a record that no longer exists.

The throttle is DynamoDB's own answer at the client's boundary (a ``before-call`` handler
returns ``ProvisionedThroughputExceededException``, as botocore does once its attempts are
spent); AgentCore is the HTTP fake behind the real boto3 client.

Also here: ``DynamoSideTables.forget_snapshots`` / ``forget_pending`` with a repeated id
(one BatchWriteItem naming a key twice is a ``ValidationException`` on DynamoDB and moto).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from memlife.errors import is_throttling
from memlife.model import MemoryRecord
from memlife.state.side import DynamoSideTables
from memlife.stores.agentcore import AgentCoreStore
from memlife.stores.base import StoreError
from tests.fakes.agentcore import AgentCoreHarness, FakeAgentCore
from tests.support.aws_state import provision, state_url

NS = "/users/u1/facts"


@pytest.fixture(scope="module")
def harness() -> Iterator[AgentCoreHarness]:
    h = AgentCoreHarness()
    yield h
    h.close()


@pytest.fixture
def ac(harness: AgentCoreHarness) -> tuple[AgentCoreStore, FakeAgentCore]:
    return harness.store(), harness.fake


def rec(rid: str = "r1") -> MemoryRecord:
    return MemoryRecord(
        id=rid, actor_id="u1", namespace=NS, memory_type="semantic", content="Likes tea.",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )  # fmt: skip


class PutThrottle:
    """Answers the sidecar's n-th PutItem calls (1-based, in ``which``) with DynamoDB's
    throttling error, as botocore raises it once its own attempts are spent."""

    def __init__(self, which: set[int]) -> None:
        self.which, self.calls, self.thrown = which, 0, 0

    def __call__(self, **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        self.calls += 1
        if self.calls not in self.which:
            return None
        self.thrown += 1
        parsed = {"Error": {"Code": "ProvisionedThroughputExceededException",
                            "Message": "Rate exceeded"},
                  "ResponseMetadata": {"HTTPStatusCode": 400}}  # fmt: skip
        return AWSResponse("https://dynamodb", 400, {}, None), parsed


def _put_throttled(store: AgentCoreStore, which: set[int]) -> tuple[Any, PutThrottle]:
    throttle = PutThrottle(which)
    events = store.sidecar.client.meta.events
    events.register_first("before-call.dynamodb.PutItem", throttle)
    return events, throttle


def _write_with_step3_throttled(store: AgentCoreStore) -> tuple[object, BaseException | None]:
    """put_many of a new record with the sidecar's 2nd and 3rd PutItem throttled: the
    1st stages the pending item, the 2nd is step 3 (the new id), the 3rd the claim."""
    events, throttle = _put_throttled(store, {2, 3})
    try:
        try:
            return store.put_many([rec()]), None
        except StoreError as exc:
            return None, exc
    finally:
        events.unregister("before-call.dynamodb.PutItem", throttle)
        assert throttle.thrown >= 1, "the throttle never fired"


def test_a_throttled_step3_never_deletes_the_created_record(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    store, fake = ac
    res, raised = _write_with_step3_throttled(store)
    # the throttling is the shard's (retried as THROTTLED), never a per-item CONFLICT
    assert res is None and raised is not None and is_throttling(raised), res
    # the record AgentCore created is still there, found by its memlife_id
    assert fake.record_by_memlife_id("r1") is not None
    assert fake.ops("delete") == []


def test_the_retry_after_a_throttled_step3_leaves_the_record_readable(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """What an operator sees: the shard retries the same write on a calm table; it must
    report success only for a record that exists and reads back."""
    store, fake = ac
    _write_with_step3_throttled(store)
    again = store.put_many([rec()])
    assert again.succeeded == ["r1"] and again.failed == []
    got = store.get("r1")
    assert got is not None and got.content == "Likes tea."
    item = store.sidecar.get("r1")
    assert item is not None and item.memory_record_id in fake.records


def test_control_a_calm_create_is_written_once_and_reads_back(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    store, fake = ac
    res = store.put_many([rec()])
    assert res.succeeded == ["r1"] and res.failed == []
    got = store.get("r1")
    assert got is not None and got.content == "Likes tea."
    assert len(fake.ops("create")) == 1 and fake.ops("delete") == []


def test_control_a_real_lost_race_still_deletes_the_orphan(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """A real lost race (the item was erased while our create was in flight) still removes
    the orphan: the fix changes only what throttling means."""
    store, fake = ac
    events = store.sidecar.client.meta.events
    calls = {"n": 0}

    def erase_between(**_: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 2:  # step 3: the item went meanwhile (another writer's delete)
            store.sidecar.delete_many(["r1"])

    events.register_first("before-call.dynamodb.PutItem", erase_between)
    try:
        res = store.put_many([rec()])
    finally:
        events.unregister("before-call.dynamodb.PutItem", erase_between)
    assert [(f.id, f.code) for f in res.failed] == [("r1", "CONFLICT")]
    assert fake.record_by_memlife_id("r1") is None  # the orphan went


# -- duplicate ids in the DynamoDB side tables --------------------------------------------


@pytest.fixture
def side(harness: AgentCoreHarness, request: pytest.FixtureRequest) -> DynamoSideTables:
    return DynamoSideTables(provision(state_url(f"a52ii2-{request.node.name[-24:]}")))


def test_forget_snapshots_takes_a_repeated_id(side: DynamoSideTables) -> None:
    side.put_snapshot("m-1", ("active", None, "{}"), "2026-01-01T00:00:00+00:00")
    side.forget_snapshots(["m-1", "m-1"])
    assert side.snapshots(["m-1"]) == {}


def test_forget_pending_takes_a_repeated_id(side: DynamoSideTables) -> None:
    row = {"record_id": "m-1", "actor_id": "u1", "namespace": NS, "operation_id": "op-1",
           "run_id": "run-1", "requested_at": "2026-01-01T00:00:00+00:00"}  # fmt: skip
    side.add_pending(row)
    assert side.forget_pending(["m-1", "m-1"]) == ["op-1"]
    assert side.pending() == []


def test_control_forget_with_distinct_ids(side: DynamoSideTables) -> None:
    side.put_snapshot("m-1", ("active", None, "{}"), "2026-01-01T00:00:00+00:00")
    side.forget_snapshots(["m-1"])
    assert side.snapshots(["m-1"]) == {}
