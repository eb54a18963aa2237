"""Session 47 (audit 47h): the online library as an adversary (recall's namespaces on a
store without a change signal, the access ledger shared or failing)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memlife.erase import erase
from memlife.ledger import AccessLedger
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore

NS = "/users/u1/facts"


@pytest.fixture()
def agentcore(tmp_path: Path) -> Iterator[Any]:
    """The AgentCore adapter against the fake (no cheap change signal: shards reload
    after ``refresh_seconds``)."""
    from tests.fakes.agentcore import AgentCoreHarness

    harness = AgentCoreHarness()
    try:
        yield harness.store()
    finally:
        harness.close()


def test_recall_on_agentcore_sees_a_namespace_another_writer_created(
    agentcore: Any, tmp_path: Path
) -> None:
    """The adversary: an agent process that only recalls (refresh_seconds=0: every shard
    re-read on use) while another writer (a second agent, an import) saves the actor's
    first fact in a new namespace. Must hold: recall over all the actor's namespaces
    finds it, as recall scoped to that namespace does; it may not wait for a restart."""
    reader = LongTermMemory(agentcore, ledger=AccessLedger(tmp_path / "l1"), refresh_seconds=0)
    writer = LongTermMemory(agentcore, ledger=AccessLedger(tmp_path / "l2"))
    try:
        writer.remember("u-1", "/users/u-1/drinks", None, "Drinks black coffee every morning.")
        assert reader.recall("u-1", "what does she drink in the morning")
        rid = writer.remember(
            "u-1", "/users/u-1/health", None, "Allergic to peanuts since childhood."
        ).record_id
        scoped = reader.recall("u-1", "peanut allergy", namespace="/users/u-1/health")
        assert [h.record.id for h in scoped] == [rid]
        assert rid in [h.record.id for h in reader.recall("u-1", "peanut allergy")]
    finally:
        reader.close()
        writer.close()


def test_a_shared_ledger_keeps_honouring_erasures_after_one_memory_closes(home: Path) -> None:
    """The adversary: two Memory objects over one store share one AccessLedger (an agent
    and a LangGraph store, say); one closes. The other recalls a fact, the user erases it
    before the buffered read is flushed. Must hold: no ledger row of the erased record
    is written (a buffered access outlives no erasure), as when neither had closed."""
    home.mkdir(parents=True, exist_ok=True)
    store = SqliteStore(home / "memlife.db")
    ledger = AccessLedger(home / "ledger", flush_seconds=None)
    agent = LongTermMemory(store, ledger=ledger)
    side = LongTermMemory(store, ledger=ledger)
    try:
        rid = agent.remember("u1", NS, None, "My locker code is 4471.").record_id
        side.close()
        assert [h.record.id for h in agent.recall("u1", "locker code")] == [rid]
        with SqliteStore(home / "memlife.db") as other:
            erase(other, "u1", ids=[rid])
        ledger.flush()
        assert rid not in ledger.read().column("record_id").to_pylist()
    finally:
        agent.close()
        store.close()


def test_a_failed_age_flush_does_not_stop_later_age_flushes(tmp_path: Path) -> None:
    """The adversary: the ledger's folder is briefly unwritable when the age flush runs
    (a full disk, a throttled bucket); it heals and the agent keeps recalling. Must
    hold: the buffered reads still reach the ledger within the age bound (the docs: a
    long-lived agent's accesses reach the nightly run within ``flush_seconds``), not
    only once 1,000 rows pile up or the process exits."""
    at = datetime(2026, 1, 2, 12, tzinfo=UTC)
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=0.05)
    blocker = ledger.root / "date=2026-01-02"  # a file where the day's folder must go
    ledger.root.mkdir(parents=True)
    blocker.write_text("")
    with pytest.warns(RuntimeWarning, match="flush failed"):
        ledger.append("u1", NS, "m-1", at=at)
        assert ledger._timer is not None
        ledger._timer.join(30)  # the age flush ran, and failed
    assert ledger.pending == 1
    blocker.unlink()  # healed
    ledger.append("u1", NS, "m-2", at=at)
    deadline = time.monotonic() + 10
    while ledger.pending and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ledger.pending == 0
    assert ledger._timer is not None
    ledger._timer.join(30)  # the buffer is taken before the part is written: let it end
    assert sorted(ledger.read().column("record_id").to_pylist()) == ["m-1", "m-2"]
