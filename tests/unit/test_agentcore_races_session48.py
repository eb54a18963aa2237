"""Session 48 (audit 48e): the AgentCore store's create path raced by a second writer of the same id.

A create is three steps (sidecar pending, BatchCreate, sidecar live). A second writer
(another process with its own store object on the same memory and sidecar) that acts
on the id between steps 1 and 3 must never leave a second AgentCore record, nor one no
sidecar item points to: such a record is listed under the id but no delete by id reaches
it, so an erasure leaves its content behind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from memlife.model import MemoryRecord, Status
from memlife.stores.agentcore import AgentCoreStore
from tests.fakes.agentcore import AgentCoreHarness, FakeAgentCore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def rec(content: str = "likes tea", **kw: Any) -> MemoryRecord:
    fields: dict[str, Any] = {
        "id": "r1",
        "actor_id": "u1",
        "namespace": "/users/u1",
        "memory_type": "semantic",
        "content": content,
        "created_at": T0,
        **kw,
    }
    return MemoryRecord(**fields)


@pytest.fixture(scope="module")
def harness() -> Iterator[AgentCoreHarness]:
    h = AgentCoreHarness()
    yield h
    h.close()


@pytest.fixture
def two(harness: AgentCoreHarness) -> tuple[AgentCoreStore, AgentCoreStore, FakeAgentCore]:
    """Two writers (store objects) on one fresh memory and one sidecar table."""
    a = harness.store()
    fake = harness.fake
    b = AgentCoreStore(
        fake.memory_id,
        region="us-east-1",
        endpoint_url=fake.endpoint_url,
        sidecar_table=harness.sidecar_table,
        clients=harness.clients,
        retry_base_s=0.001,
    )
    return a, b, fake


def before_create(
    store: AgentCoreStore, monkeypatch: pytest.MonkeyPatch, other: Callable[[], Any]
) -> None:
    """Run ``other`` once, just before ``store`` sends its first BatchCreate (after its
    sidecar item is pending): the other writer's whole call falls in that window."""
    real = store.transport.batch
    ran: list[bool] = []

    def batch(op: Any, entries: Any) -> Any:
        if op == "create" and not ran:
            ran.append(True)
            other()
        return real(op, entries)

    monkeypatch.setattr(store.transport, "batch", batch)


def ours(fake: FakeAgentCore, memlife_id: str = "r1") -> list[str]:
    with fake.lock:
        return [
            rid
            for rid, r in fake.records.items()
            if ((r.get("metadata") or {}).get("memlife_id") or {}).get("stringValue") == memlife_id
        ]


def test_two_writers_creating_one_id_leave_one_record(
    two: tuple[AgentCoreStore, AgentCoreStore, FakeAgentCore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writer A stages r1 (pending); writer B writes r1 with other text in that window
    (it finds the pending item, no record yet, and creates); then A's BatchCreate goes
    out. Exactly one AgentCore record may carry r1, the one the sidecar names, and
    deleting r1 must leave none (no text of either writer survives an erasure)."""
    a, b, fake = two
    before_create(a, monkeypatch, lambda: b.put_many([rec("likes coffee")]))
    a.put_many([rec("likes tea")])
    item = a.sidecar.get("r1")
    assert item is not None
    assert ours(fake) == [item.memory_record_id]
    assert [r.id for r in b.page("u1", "/users/u1").records] == ["r1"]
    b.delete_many(["r1"])
    assert ours(fake) == []
    assert b.page("u1", "/users/u1").records == []


def test_a_delete_racing_a_pending_create_leaves_no_undeletable_record(
    two: tuple[AgentCoreStore, AgentCoreStore, FakeAgentCore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writer A stages r1 (pending); an erasure of r1 (writer B) runs in that window and
    finds no record yet; then A's BatchCreate lands. Whatever the order's outcome, a
    record carrying r1 must be one the store can delete by id: after a second delete of
    r1 no AgentCore record carries it."""
    a, b, fake = two
    before_create(a, monkeypatch, lambda: b.delete_many(["r1"]))
    a.put_many([rec("likes tea")])
    listed = [r.id for r in b.page("u1", "/users/u1").records]
    got = b.get("r1")
    assert listed == (["r1"] if got is not None else [])
    b.delete_many(["r1"])
    assert ours(fake) == []
    assert b.page("u1", "/users/u1").records == []


def test_a_status_change_staged_after_an_update_is_not_silently_overwritten(
    two: tuple[AgentCoreStore, AgentCoreStore, FakeAgentCore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writer B rewrites r1's text (staged: version n+1). Before B's BatchUpdate goes out,
    writer A quarantines r1: it reads version n+1 and the old text, stages n+2, writes,
    and is told it succeeded. Then B's BatchUpdate lands with status active. A change
    reported done must hold (or one of the two must be told CONFLICT and not land): the
    record may not end active while A was told it is quarantined."""
    a, b, fake = two
    assert a.put_many([rec("likes tea")]).succeeded == ["r1"]
    real = b.transport.batch
    quarantined: list[Any] = []

    def batch(op: Any, entries: Any) -> Any:
        if op == "update" and not quarantined:
            quarantined.append(a.set_status(["r1"], Status.quarantined))
        return real(op, entries)

    monkeypatch.setattr(b.transport, "batch", batch)
    wrote = b.put_many([rec("likes green tea")])
    [told] = quarantined
    now = a.get("r1")
    assert now is not None
    a_held = "r1" in told.succeeded and now.status is Status.quarantined
    b_held = "r1" in wrote.succeeded and now.content == "likes green tea"
    assert ("r1" not in told.succeeded or a_held) and ("r1" not in wrote.succeeded or b_held)


def test_a_write_between_a_delete_and_its_sidecar_clean_up_stays_deletable(
    two: tuple[AgentCoreStore, AgentCoreStore, FakeAgentCore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writer B deletes r1; AgentCore confirms; before B drops r1's sidecar item, writer
    A writes r1 again (its update meets a 404, so it re-creates the record and records the
    new id). B's clean-up must not drop A's item: a record carrying r1 must stay one a
    delete by id reaches, and after a second delete no AgentCore record carries r1."""
    a, b, fake = two
    assert a.put_many([rec("likes tea")]).succeeded == ["r1"]
    real = b.sidecar.delete_many
    wrote: list[Any] = []

    def clean_up(*args: Any, **kwargs: Any) -> None:
        if not wrote:
            wrote.append(a.put_many([rec("likes green tea")]))
        real(*args, **kwargs)

    monkeypatch.setattr(b.sidecar, "delete_many", clean_up)
    assert b.delete_many(["r1"]).succeeded == ["r1"]
    assert wrote[0].succeeded == ["r1"]
    monkeypatch.undo()
    b.delete_many(["r1"])
    assert ours(fake) == []
    assert b.page("u1", "/users/u1").records == []
