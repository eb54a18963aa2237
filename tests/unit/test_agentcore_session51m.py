"""Audit 51m (session 51 mutation pass): the AgentCore fixes of audit 51ii, where the
session's tests left a mutant alive.

(1) ``create_token(entries, retry)``: each resend of throttled items is a new request. The
session's tests throttle an item once, so a token that is new for the first resend only
(``"retry"`` without its number, or ``min(attempt, 1)``) passed them: a throttle lasting
two answers had the second resend answered with the first resend's 429s, replayed by the
service, and the write failed THROTTLED after the throttle had passed.

(2) ``_settle_strays``: a record no sidecar item names (listed under the id) that another
writer deleted between our read-back and our delete is answered 404. The id is then
``missing`` (already gone), as for any id: neither failed (``not o.ok`` alone) nor left
out of every list (no ``missing`` for it), which a night reads as an unaccounted id.

The fake AgentCore (real boto3 over HTTP) and moto DynamoDB, as in
test_agentcore_service_session51ii.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from memlife.stores.agentcore import AgentCoreStore
from tests.fakes.agentcore import AgentCoreHarness, FakeAgentCore, bulk_load
from tests.unit.test_agentcore_service_session51ii import listed, ours, rec


@pytest.fixture(scope="module")
def harness() -> Iterator[AgentCoreHarness]:
    h = AgentCoreHarness()
    yield h
    h.close()


@pytest.fixture
def ac(harness: AgentCoreHarness) -> tuple[AgentCoreStore, FakeAgentCore]:
    return harness.store(), harness.fake


def test_a_create_throttled_twice_is_written_by_the_third_request(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """Two 429s in a row for r1 (the store retries an item up to 4 times): every resend
    carries its own token, so the third request is a new one and writes r1."""
    store, fake = ac
    fake.fail_next_creates(["r1"], 429, times=2)
    res = store.put_many([rec(1)])
    assert res.succeeded == ["r1"], [(f.id, f.code) for f in res.failed]
    assert len(ours(fake, "r1")) == 1
    tokens = [p["clientToken"] for p in fake.ops("create")]
    assert len(tokens) == len(set(tokens)) == 3


def _deleted_by_another_writer_first(store: AgentCoreStore, fake: FakeAgentCore, at: str) -> None:
    """Another writer's delete of the record at ``at`` lands just before our BatchDelete."""
    real = store.transport.batch

    def batch(op: Any, entries: Any) -> Any:
        if op == "delete":
            with fake.lock:
                fake.records.pop(at, None)
        return real(op, entries)

    store.transport.batch = batch  # type: ignore[method-assign]


def test_a_stray_deleted_meanwhile_leaves_its_id_missing(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """r1's sidecar item is lost; the store lists r1 and reads it back; another writer
    deletes it before our delete, which the service answers 404: r1 is already gone,
    reported ``missing``, neither failed nor left unaccounted."""
    store, fake = ac
    bulk_load(store, fake, [rec(1), rec(2)])
    store.sidecar.client.delete_item(
        TableName=store.sidecar.table, Key={"pk": {"S": "rec#r1"}, "sk": {"S": "rec"}}
    )
    assert listed(store) == ["r1", "r2"]
    [r1_at] = ours(fake, "r1")
    _deleted_by_another_writer_first(store, fake, r1_at)
    res = store.delete_many(["r1"])
    assert res.missing == ["r1"], (res.succeeded, [(f.id, f.code) for f in res.failed])
    assert not res.failed and not res.succeeded
    assert ours(fake, "r2")


def test_control_a_stray_still_there_is_deleted(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """Control: the same stray, not deleted meanwhile, is deleted and reported so."""
    store, fake = ac
    bulk_load(store, fake, [rec(1), rec(2)])
    store.sidecar.client.delete_item(
        TableName=store.sidecar.table, Key={"pk": {"S": "rec#r1"}, "sk": {"S": "rec"}}
    )
    assert listed(store) == ["r1", "r2"]
    res = store.delete_many(["r1"])
    assert res.succeeded == ["r1"] and not res.missing and not res.failed
    assert ours(fake, "r1") == []
