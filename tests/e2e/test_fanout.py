"""Fan-out: one failing shard does not stop the others; the receipt and an event say so.

Three shards (three actors, one namespace each), one batch per shard, on the thread-pool
task runner. The store raises for one actor while its pages are read: in the first test
an unexpected error that escapes ``process_batch`` (the task fails; the flow turns it into
a failed-shard entry), in the second a StoreError that ``process_batch`` itself records.
The event is captured by Prefect's asserting events client, which replaces the websocket
client inside the EventsWorker: what it holds is exactly what ``emit_event`` sent.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prefect.events.clients import AssertingEventsClient
from prefect.events.worker import EventsWorker

from memlife.demo import generate
from memlife.run_types import RunConfig
from memlife.stores import open_store
from memlife.stores.base import StoreError

ACTORS = ["u-000000", "u-000001", "u-000002"]
BAD = "u-000001"
NAMESPACES = ["/users/*/preferences"]
CUTOFF = datetime(2026, 3, 1, tzinfo=UTC)


class FaultyStore:
    """Delegates to a real store; reading the bad actor's records raises ``error``."""

    def __init__(self, inner, error: BaseException):
        self._inner, self._error = inner, error

    def _check(self, actor_id: str) -> None:
        if actor_id == BAD:
            raise self._error

    def page(self, actor_id, namespace, **kw):
        self._check(actor_id)
        return self._inner.page(actor_id, namespace, **kw)

    def page_views(self, actor_id, namespace, **kw):
        self._check(actor_id)
        return self._inner.page_views(actor_id, namespace, **kw)

    def __getattr__(self, name):
        return getattr(self._inner, name)


@pytest.fixture()
def seeded(home: Path) -> str:
    url = f"sqlite:///{home / 'fanout.db'}"
    home.mkdir(parents=True, exist_ok=True)
    db = open_store(url)
    try:
        db.put_many(list(generate(300, seed=7)))
    finally:
        db.close()
    return url


@pytest.fixture()
def events(monkeypatch: pytest.MonkeyPatch):
    worker = EventsWorker.instance(AssertingEventsClient)
    monkeypatch.setattr(EventsWorker, "instance", lambda *_a, **_k: worker)
    yield worker
    worker.drain()


def _run(seeded: str, home: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException) -> dict:
    import flows.nightly as nightly_mod
    from memlife import pipeline

    monkeypatch.setattr(pipeline, "open_store", lambda url: FaultyStore(open_store(url), error))
    return nightly_mod.nightly(
        RunConfig(
            dry_run=True,
            actors=tuple(ACTORS),
            namespaces=tuple(NAMESPACES),
            now=CUTOFF,
            store=seeded,
            receipts=f"file://{home / 'receipts'}",
            shards_per_batch=1,
            max_workers=3,
        )
    )


def _partial_events(worker: EventsWorker) -> list:
    worker.drain()
    client = worker._client
    assert isinstance(client, AssertingEventsClient)
    return [e for e in client.events if e.event == "memlife.run.partial_failure"]


@pytest.mark.parametrize(
    "error, code",
    [
        (RuntimeError("boom: u-000001 zqx-fanout-canary-7c1d text"), "RuntimeError"),
        (StoreError("quota", "SERVICE_QUOTA"), "SERVICE_QUOTA"),
    ],
    ids=["task-level", "shard-level"],
)
def test_one_shard_fails_others_complete(
    prefect_harness, seeded, home, monkeypatch, events, error, code
):
    result = _run(seeded, home, monkeypatch, error)

    bad = f"{BAD}:/users/{BAD}/preferences"
    assert result["status"] == "partial_failure"
    assert result["shards"] == 2  # the two good shards completed
    assert [s["shard"] for s in result["failed_shards"]] == [bad]
    assert result["failed_shards"][0]["code"] == code
    assert result["records"] > 0

    receipt = json.loads(Path(result["receipt"]).read_text())
    assert receipt["status"] == "partial_failure"
    assert receipt["shards"]["total"] == 3 and receipt["shards"]["completed"] == 2
    assert [s["shard"] for s in receipt["shards"]["failed"]] == [bad]
    assert receipt["pagination_complete"] is False

    # the two good shards are in the report, the bad one is not
    rows = [json.loads(line) for line in Path(result["report"]).read_text().splitlines()]
    assert {r["actor_id"] for r in rows} == set(ACTORS) - {BAD}

    (event,) = _partial_events(events)
    assert event.resource.id == f"memlife.run.{result['run_id']}"
    assert event.payload["failed_shards"] == [bad]
    assert event.payload["counts"]["processed"] == result["records"]
    # error type only, never its message (a unique canary: Prefect's random run names are
    # words, one night "secret-zebu")
    assert "zqx-fanout-canary" not in event.model_dump_json()


def test_success_emits_no_event(prefect_harness, seeded, home, monkeypatch, events):
    import flows.nightly as nightly_mod

    result = nightly_mod.nightly(
        RunConfig(
            dry_run=True,
            actors=tuple(ACTORS),
            namespaces=tuple(NAMESPACES),
            now=CUTOFF,
            store=seeded,
            receipts=f"file://{home / 'receipts'}",
            shards_per_batch=2,
        )
    )
    assert result["status"] == "success" and result["shards"] == 3
    assert _partial_events(events) == []


def test_alert_automation_matches_the_events():
    """deploy/automations.yaml holds valid Prefect automations: failures and gate blocks."""
    import fnmatch
    import uuid

    import yaml
    from prefect.events.schemas.automations import AutomationCore

    from flows.events import EVENT_BLOCKED, EVENT_FAILURE, EVENT_PARTIAL

    text = (Path(__file__).parents[2] / "deploy" / "automations.yaml").read_text()
    data = yaml.safe_load(text.replace("${MEMLIFE_ALERT_BLOCK_ID}", str(uuid.uuid4())))
    alert, blocked = [AutomationCore.model_validate(a) for a in data["automations"]]
    assert {EVENT_PARTIAL, EVENT_FAILURE} <= set(alert.trigger.expect)
    assert set(blocked.trigger.expect) == {EVENT_BLOCKED}  # the gate's own alert
    for automation in (alert, blocked):
        patterns = automation.trigger.match.model_dump()["prefect.resource.id"]
        patterns = patterns if isinstance(patterns, list) else [patterns]
        assert any(fnmatch.fnmatch("memlife.run.20260301T000000Z-dry-abc", p) for p in patterns)


def test_shard_flow_resumes_the_parents_run(prefect_harness, seeded, home):
    """A child run (the memlife-shard flow) derives the parent's run id from the pinned
    cutoff and writes its decisions to a report part of that run."""
    from flows.shard import shard
    from memlife import fanout
    from memlife.pipeline import Shard, start_run

    config = RunConfig(
        dry_run=True,
        actors=tuple(ACTORS),
        namespaces=tuple(NAMESPACES),
        now=CUTOFF,
        store=seeded,
        receipts=f"file://{home / 'receipts'}",
    )
    parent = start_run(config)
    params = fanout.config_params(config, parent)
    assert fanout.config_from_params(params) == parent.config  # the parent's attempt included
    good = [Shard(a, f"/users/{a}/preferences") for a in ACTORS if a != BAD]

    returned = shard(config=params, shards=fanout.shard_params(good), part="7")

    # nothing goes back through Prefect (its result storage would keep replacement texts):
    # the parent reads the outcome where the child put it, beside the run's report
    assert returned is None
    outcome = fanout.child_outcome(parent, "7")
    assert outcome.shards == 2 and not outcome.failed_shards and outcome.records > 0
    part = parent.report_dir / "parts" / "7" / "proposed-actions.jsonl"
    assert parent.report_dir.parent == home / "reports" / parent.run_id  # one folder per attempt
    assert len(part.read_text().splitlines()) == outcome.records


def test_fan_out_is_threads_or_child_deployments_only():
    """The Dask runner was removed (issue 17): across machines, batches are child runs."""
    import inspect

    from flows import limits
    from flows.nightly import nightly

    params = inspect.signature(nightly.fn).parameters
    assert "task_runner" not in params and "dask_address" not in params
    from prefect.task_runners import ThreadPoolTaskRunner

    assert isinstance(limits.task_runner(0), ThreadPoolTaskRunner)
