"""Audit 52d (session 52): the nightly flow's Prefect event on a night that failed widely.

The nightly flow in-process under the session's Prefect test harness, the embedded SQLite
store; the store refuses its record reads for every actor (AgentCore's quota stop, raised
where tests/e2e/test_fanout.py raises a store's errors: its page reads). The event is
captured by Prefect's asserting events client inside the EventsWorker: exactly what
``emit_event`` sent. Prefect refuses to emit an event over its size limit
(``server.events.maximum_size_bytes``, 1.5 MB by default) with ``EventTooLarge``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prefect.events.clients import AssertingEventsClient
from prefect.events.worker import EventsWorker

from flows.events import EVENT_PARTIAL
from memlife.model import MemoryRecord, Source
from memlife.run_types import RunConfig
from memlife.stores import open_store
from memlife.stores.base import StoreError

CUTOFF = datetime(2026, 3, 1, tzinfo=UTC)
T0 = datetime(2026, 1, 2, 10, tzinfo=UTC)


class QuotaStore:
    """A real store whose record reads fail for every actor (a quota stop all night)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def page(self, *_a: Any, **_k: Any) -> Any:
        raise StoreError("quota exceeded", code="SERVICE_QUOTA_EXCEEDED")

    page_views = page

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.fixture()
def events(monkeypatch: pytest.MonkeyPatch) -> Iterator[EventsWorker]:
    worker = EventsWorker.instance(AssertingEventsClient)
    monkeypatch.setattr(EventsWorker, "instance", lambda *_a, **_k: worker)
    yield worker
    worker.drain()


def _sent(worker: EventsWorker, name: str) -> list[Any]:
    worker.drain()
    client = worker._client
    assert isinstance(client, AssertingEventsClient)
    return [e for e in client.events if e.event == name]


def _night(home: Path, monkeypatch: pytest.MonkeyPatch, actors: int, ns: str) -> Any:
    """``actors`` actors of one record each (one shard each), every read refused."""
    import flows.nightly as nightly_mod
    from memlife import pipeline

    url = f"sqlite:///{home / 'wide.db'}"
    home.mkdir(parents=True, exist_ok=True)
    db = open_store(url)
    try:
        db.put_many([
            MemoryRecord(id=f"m-{i:06d}", actor_id=f"u-{i:06d}", namespace=f"/users/u-{i:06d}/{ns}",
                         memory_type="semantic", subject="beverage", content="Drinks green tea.",
                         owner="team", source=Source.user_stated, created_at=T0,
                         last_verified_at=T0)
            for i in range(actors)
        ])  # fmt: skip
    finally:
        db.close()
    monkeypatch.setattr(pipeline, "open_store", lambda u: QuotaStore(open_store(u)))
    out = nightly_mod.nightly(RunConfig(dry_run=True, now=CUTOFF, store=url,
                                        receipts=f"file://{home / 'receipts'}",
                                        shards_per_batch=10_000))  # fmt: skip
    return out if isinstance(out, dict) else out.result()


def _receipt(home: Path) -> dict[str, Any]:
    (path,) = (home / "receipts").rglob("receipt.json")
    return json.loads(path.read_text())


def test_a_night_the_store_refused_widely_still_sends_its_partial_failure_event(
    home: Path, monkeypatch: pytest.MonkeyPatch, prefect_harness: None, events: EventsWorker
) -> None:
    """Careless night: the store refuses every read (a quota stop) across 15,000 shards
    (one actor's namespace each, demo-sized names). Must hold: the run ends as its receipt
    says (``partial_failure``, a named Completed state, its summary returned) and the
    ``memlife.run.partial_failure`` event is sent, so the automation watching memlife.run.*
    alerts on exactly this night. Today the event names every failed shard with its code
    (~103 bytes each): at 15,000 it is 1.55 MB, ``emit_event`` raises EventTooLarge after
    the receipt is written, the flow run ends Failed and no event is sent."""
    result = _night(home, monkeypatch, 15_000, "preferences")
    assert result["status"] == _receipt(home)["status"] == "partial_failure"
    assert len(result["failed_shards"]) == 15_000  # the summary and receipt keep them all
    (event,) = _sent(events, EVENT_PARTIAL)
    assert event.payload["failed_shards_total"] == 15_000
    assert 0 < len(event.payload["failed_shards"]) <= 100
    assert event.payload["receipt"] == result["receipt"]


def test_an_event_over_a_lowered_size_limit_goes_out_without_its_lists(
    home: Path, monkeypatch: pytest.MonkeyPatch, prefect_harness: None, events: EventsWorker
) -> None:
    """Operator: Prefect's own event size limit is set lower
    (PREFECT_SERVER_EVENTS_MAXIMUM_SIZE_BYTES=4000) and twenty shards with long namespace
    names fail. Must hold: Prefect's setting never fails the run nor loses its alert: the
    event goes out with its counts, receipt and totals, marked truncated."""
    from prefect.settings import PREFECT_SERVER_EVENTS_MAXIMUM_SIZE_BYTES, temporary_settings

    with temporary_settings({PREFECT_SERVER_EVENTS_MAXIMUM_SIZE_BYTES: 4000}):
        result = _night(home, monkeypatch, 20, "notes-" + "x" * 200)
    assert result["status"] == _receipt(home)["status"] == "partial_failure"
    (event,) = _sent(events, EVENT_PARTIAL)
    assert event.payload["failed_shards_total"] == 20 and event.payload["truncated"] is True
    assert event.payload["receipt"] == result["receipt"]
    assert event.payload["counts"] == result["lifecycle"]


def test_control_a_few_failed_shards_are_all_named_in_the_event(
    home: Path, monkeypatch: pytest.MonkeyPatch, prefect_harness: None, events: EventsWorker
) -> None:
    """Control: three failed shards are each named with their code, as before."""
    result = _night(home, monkeypatch, 3, "preferences")
    assert result["status"] == "partial_failure"
    (event,) = _sent(events, EVENT_PARTIAL)
    names = [f"u-{i:06d}:/users/u-{i:06d}/preferences" for i in range(3)]
    assert sorted(event.payload["failed_shards"]) == names
    assert event.payload["failed_shard_codes"] == dict.fromkeys(names, "SERVICE_QUOTA_EXCEEDED")
    assert "truncated" not in event.payload
