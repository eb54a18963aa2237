"""Audit 53iii (session 53): a blocked night's alert when its evaluation set is large.

The nightly flow in-process under the session's Prefect test harness, the embedded SQLite
store, real MiniLM; the event is captured by Prefect's asserting events client inside the
EventsWorker: exactly what ``emit_event`` sent. Prefect refuses an event over its size
limit (``server.events.maximum_size_bytes``) with ``EventTooLarge``; since audit 52d the
flow then sends the event without its lists (marked ``truncated``) rather than not at all.

The ``memlife.run.blocked`` event carries the gate line as ``summary``, and a blocked
gate's line names every failing case: the fallback dropped the ``gate`` section but kept
that line, so with enough failing cases (ids up to 256 characters: about 5,800 of them
at Prefect's default 1.5 MB, or 20 under a lowered limit, as 52d's test sets it) the
fallback raised ``EventTooLarge`` again after the receipt was written: the flow run
ended Failed instead of its named ``Blocked`` state and no blocked alert went out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prefect.events.clients import AssertingEventsClient
from prefect.events.worker import EventsWorker

from flows.events import EVENT_BLOCKED
from memlife.run_types import RunConfig
from tests.support.gate import ALLERGY_KEPT, FACTS, NOW, store_at, ttl_policy, write_cases


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


def _blocked_night(home: Path, tmp_path: Path, cases: int, limit: int) -> Any:
    """A night whose short semantic TTL would delete the allergy: ``cases`` high-impact
    cases pin it (long ids, as a set may name them), so every one fails after."""
    from prefect.settings import PREFECT_SERVER_EVENTS_MAXIMUM_SIZE_BYTES, temporary_settings

    import flows.nightly as nightly_mod

    home.mkdir(parents=True, exist_ok=True)
    store = store_at(home)
    store.put_many(FACTS)
    store.close()
    items = [{**ALLERGY_KEPT, "id": f"allergy-kept-{n:03d}-" + "x" * 180} for n in range(cases)]
    path = write_cases(tmp_path / "cases.yaml", items)
    config = RunConfig(dry_run=False, now=NOW, policy=ttl_policy(tmp_path, 30), eval_cases=path,
                       store=f"sqlite:///{home / 'memlife.db'}",
                       receipts=f"file://{home / 'receipts'}")  # fmt: skip
    with temporary_settings({PREFECT_SERVER_EVENTS_MAXIMUM_SIZE_BYTES: limit}):
        out = nightly_mod.nightly(config)
    return out if isinstance(out, dict) else out.result()


def _receipt(home: Path) -> dict[str, Any]:
    (path,) = (home / "receipts").rglob("receipt.json")
    return json.loads(path.read_text())


def test_a_blocked_night_with_many_failing_cases_still_sends_its_blocked_event(
    home: Path, tmp_path: Path, prefect_harness: None, events: EventsWorker
) -> None:
    """Operator: Prefect's event size limit lowered (4,000 bytes, as audit 52d's test) and
    a night that 20 high-impact cases block. Must hold: the run ends as its receipt says
    (``blocked``, its summary returned) and the ``memlife.run.blocked`` event goes out,
    marked truncated, with the counts and the receipt."""
    result = _blocked_night(home, tmp_path, 20, 4000)
    assert result["status"] == _receipt(home)["status"] == "blocked"
    (event,) = _sent(events, EVENT_BLOCKED)
    assert event.payload["truncated"] is True
    assert event.payload["receipt"] == result["receipt"]
    assert event.payload["counts"] == result["lifecycle"]


def test_control_a_night_blocked_by_one_case_names_it_in_its_event(
    home: Path, tmp_path: Path, prefect_harness: None, events: EventsWorker
) -> None:
    """Control: one failing case under the same limit: the event is whole, the gate section
    and the line name the case."""
    result = _blocked_night(home, tmp_path, 1, 4000)
    assert result["status"] == "blocked"
    (event,) = _sent(events, EVENT_BLOCKED)
    assert "truncated" not in event.payload
    assert event.payload["gate"]["high_impact_failed"] == result["gate"]["high_impact_failed"]
    assert result["gate"]["high_impact_failed"][0] in event.payload["summary"]
