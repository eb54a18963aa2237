"""Audit 49ii: AgentCore paging as the service answers it.

A ``nextToken`` that does not advance (the service answers with the token it was sent:
botocore's own paginators refuse this, "The same next token was received twice") made
``page`` gather the same records again and again into one page, ``iter_shard`` hand out
the same page for ever, and ``list_actors`` / ``find_by_key`` loop for ever. The guarantee
is "every record paged once": a cursor that does not move is a service fault, named as a
StoreError of the shard, never duplicates or a hang.

The fake AgentCore (real boto3 over HTTP) is edited at the network boundary: its
``ListMemoryRecords`` / ``ListActors`` answer as usual, then the answer's token is replaced
by the one the request carried. The broken loops are bounded by the fake (it refuses after
a number of calls) so a failing test ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from memlife.model import MemoryRecord
from memlife.stores.agentcore import AgentCoreStore
from memlife.stores.base import StoreError, iter_shard
from tests.fakes.agentcore import AgentCoreHarness, ApiError, FakeAgentCore, bulk_load

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NS = "/users/u1"
CALL_BOUND = 200  # the fake refuses past this many list calls: a looping store ends


def rec(i: int, actor: str = "u1") -> MemoryRecord:
    return MemoryRecord(
        id=f"r{i:04d}", actor_id=actor, namespace=f"/users/{actor}",
        memory_type="semantic", content=f"fact number {i}", created_at=T0,
    )  # fmt: skip


@pytest.fixture(scope="module")
def harness() -> Iterator[AgentCoreHarness]:
    h = AgentCoreHarness()
    yield h
    h.close()


@pytest.fixture
def ac(harness: AgentCoreHarness) -> tuple[AgentCoreStore, FakeAgentCore]:
    return harness.store(), harness.fake


def _stuck_cursor(fake: FakeAgentCore, monkeypatch: pytest.MonkeyPatch, op: str) -> None:
    """``op`` answers as usual, but a request that carries a nextToken gets that same
    token back (a cursor that never advances); past CALL_BOUND calls it refuses."""
    real = getattr(fake, f"_op_{op}")
    calls = {"n": 0}

    def answer(body: dict[str, Any], query: dict[str, Any], groups: tuple[str, ...]) -> Any:
        calls["n"] += 1
        if calls["n"] > CALL_BOUND:
            raise ApiError(400, "ValidationException", "fake: too many calls")
        status, out = real(body, query, groups)
        if body.get("nextToken"):
            out["nextToken"] = body["nextToken"]
        return status, out

    monkeypatch.setattr(fake, f"_op_{op}", answer)


def test_control_a_shard_pages_every_record_once(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    store, fake = ac
    bulk_load(store, fake, [rec(i) for i in range(250)])
    ids = [r.id for p in iter_shard(store, "u1", NS, page_size=30) for r in p.records]
    assert sorted(ids) == [f"r{i:04d}" for i in range(250)]


def test_a_cursor_that_does_not_advance_never_puts_a_record_twice_in_a_page(
    ac: tuple[AgentCoreStore, FakeAgentCore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """150 records, one page of 500 asked: the first call gets 100 and a token, the second
    the other 50 and the same token back. Before the fix ``page`` kept asking (50 calls)
    and returned 500 summaries of 150 records; now the stuck cursor is a StoreError."""
    store, fake = ac
    bulk_load(store, fake, [rec(i) for i in range(150)])
    _stuck_cursor(fake, monkeypatch, "ListMemoryRecords")
    try:
        page = store.page("u1", NS, page_size=500)
    except StoreError as exc:
        assert "nextToken" in str(exc) and "ListMemoryRecords" in str(exc)
        return
    ids = [r.id for r in page.records]
    assert len(ids) == len(set(ids)), f"{len(ids)} records for {len(set(ids))} ids"


def test_a_cursor_that_does_not_advance_across_pages_is_named_not_paged_for_ever(
    ac: tuple[AgentCoreStore, FakeAgentCore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages of 10 over 25 records: the second page comes back with the first page's
    token, so every later page is the second again. iter_shard never ended (here: the
    same ids again and again until the fake refused); now the second page is refused."""
    store, fake = ac
    bulk_load(store, fake, [rec(i) for i in range(25)])
    _stuck_cursor(fake, monkeypatch, "ListMemoryRecords")
    seen: list[str] = []
    with pytest.raises(StoreError) as caught:
        for n, page in enumerate(iter_shard(store, "u1", NS, page_size=10)):
            seen += [r.id for r in page.records]
            if n > 20:  # bounded: a shard of 25 has 3 pages
                break
    assert "nextToken" in str(caught.value)
    assert len(seen) == len(set(seen))


def test_list_actors_with_a_cursor_that_does_not_advance_is_named(
    ac: tuple[AgentCoreStore, FakeAgentCore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the fix ``list_actors`` looped until the fake refused (a VALIDATION error
    naming nothing of the cause, after CALL_BOUND calls); now the second call's answer is
    refused as the stuck cursor it is."""
    store, fake = ac
    for i in range(250):
        fake.add_actor(f"a{i:03d}")
    _stuck_cursor(fake, monkeypatch, "ListActors")
    with pytest.raises(StoreError) as caught:
        list(store.list_actors())
    assert "nextToken" in str(caught.value) and "ListActors" in str(caught.value)
    assert len(fake.ops("ListActors")) == 2


def test_control_list_actors_pages_every_actor(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    store, fake = ac
    for i in range(250):
        fake.add_actor(f"a{i:03d}")
    assert list(store.list_actors()) == [f"a{i:03d}" for i in range(250)]


def test_the_pending_create_lookup_with_a_stuck_cursor_is_named(
    ac: tuple[AgentCoreStore, FakeAgentCore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``find_by_key`` (a create interrupted before the sidecar learnt its id) pages the
    namespace by ``memlife_id``; a cursor that does not advance kept it asking."""
    store, fake = ac
    real = fake._op_ListMemoryRecords
    calls = {"n": 0}

    def always_a_token(body: dict[str, Any], query: dict[str, Any], groups: tuple[str, ...]) -> Any:
        calls["n"] += 1
        if calls["n"] > CALL_BOUND:
            raise ApiError(400, "ValidationException", "fake: too many calls")
        status, out = real({k: v for k, v in body.items() if k != "nextToken"}, query, groups)
        out["nextToken"] = "c3R1Y2s="  # the same cursor on every answer
        return status, out

    monkeypatch.setattr(fake, "_op_ListMemoryRecords", always_a_token)
    with pytest.raises(StoreError) as caught:
        store.transport.find_by_key(NS, "r0001")
    assert "nextToken" in str(caught.value)
