"""Audit 52ii: the AgentCore sidecar (DynamoDB) at DynamoDB's 400 KB item limit.

Fields AgentCore metadata cannot hold (a ``provenance.source_event`` longer than 256
characters, an owner, ...) go to the record's sidecar item as an overflow blob, and the
item keeps the last four blobs (``writes.KEEP_BLOBS``) so a racing reader finds its own.
``source_event`` is bounded only by the import's 1 MiB line, and nothing counted the item's
size:

1. a record whose overflow alone does not fit one item was refused as
   ``ValidationException`` "sidecar changed concurrently", retryable: a refusal that names
   no field, says something false, and is retried for ever;
2. a record whose overflow fits was written, but each new version kept the older blobs
   beside it: at 150 KB the third version made the item too large, and from then on the
   record could never be written again (every update refused the same way).

Moto enforces the 400 KB limit on PutItem as DynamoDB does.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from memlife.model import MemoryRecord, Provenance
from memlife.stores.agentcore import AgentCoreStore
from tests.fakes.agentcore import AgentCoreHarness, FakeAgentCore

NS = "/users/u1/facts"


@pytest.fixture(scope="module")
def harness() -> Iterator[AgentCoreHarness]:
    h = AgentCoreHarness()
    yield h
    h.close()


@pytest.fixture
def ac(harness: AgentCoreHarness) -> tuple[AgentCoreStore, FakeAgentCore]:
    return harness.store(), harness.fake


def rec(rid: str, source_event: str) -> MemoryRecord:
    return MemoryRecord(
        id=rid, actor_id="u1", namespace=NS, memory_type="semantic", content="Likes tea.",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        provenance=Provenance(source_event=source_event),
    )  # fmt: skip


def failures(res: object) -> list[tuple[str, str, bool]]:
    return [(f.id, f.code, f.retryable) for f in getattr(res, "failed", [])]


def test_an_overflow_no_sidecar_item_can_hold_is_refused_naming_the_field(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    store, fake = ac
    res = store.put_many([rec("r1", "transcript " * 41_000)])
    assert res.succeeded == []
    assert failures(res) == [("r1", "VALIDATION", False)]  # bad input: never retried
    (failure,) = res.failed
    assert "provenance.source_event" in failure.message and "transcript" not in failure.message
    assert store.sidecar.get("r1") is None and store.get("r1") is None
    assert fake.ops("create") == []  # refused before any call


def test_a_record_with_a_large_overflow_can_be_written_again_and_again(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    store, _ = ac
    for n in range(5):
        event = chr(ord("a") + n) * 150_000
        res = store.put_many([rec("r2", event)])
        assert res.succeeded == ["r2"], (n, failures(res))
        got = store.get("r2")
        assert got is not None and got.provenance.source_event == event


def test_control_a_large_overflow_is_written_and_updated_once(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """What held before the fix: 150 KB written, and one update beside it (two blobs)."""
    store, _ = ac
    for n in range(2):
        event = chr(ord("a") + n) * 150_000
        res = store.put_many([rec("r3", event)])
        assert res.succeeded == ["r3"], failures(res)
        got = store.get("r3")
        assert got is not None and got.provenance.source_event == event
    item = store.sidecar.get("r3")
    assert item is not None and len(item.blobs) == 2  # the older blob kept for a racing reader


def test_control_small_overflow_keeps_the_last_four_blobs(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    store, _ = ac
    for n in range(6):
        assert store.put_many([rec("r4", f"event {n} " + "x" * 300)]).succeeded == ["r4"]
    item = store.sidecar.get("r4")
    assert item is not None and len(item.blobs) == 4
