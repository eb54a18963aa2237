"""Audit 43l (session 43): the Prefect path of the nightly run (flows/, the flow's one RunConfig
parameter), on the real components: the Prefect test harness, the AgentCore fake behind
real boto3 with its run state in moto DynamoDB, the embedded SQLite store."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlencode

import boto3
import pytest
from prefect.events.clients import AssertingEventsClient
from prefect.events.worker import EventsWorker

import memlife.state as state_mod
from flows.events import EVENT_FAILURE
from memlife.demo import generate
from memlife.lease import NAME, DynamoBackend, LeaseHeld
from memlife.model import utcnow
from memlife.run_types import RunConfig
from memlife.stores import store_identity
from tests.fakes.agentcore import AgentCoreHarness
from tests.support.aws_state import provision, state_url
from tests.support.lifecycle import ANCHOR, CUTOFF

OTHER_WORKER = "worker-2.internal/0badc0de/4026531836:4242:feedbeef"


@pytest.fixture(scope="module")
def harness() -> Iterator[AgentCoreHarness]:
    h = AgentCoreHarness()
    yield h
    h.close()


@pytest.fixture()
def agentcore(harness: AgentCoreHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """An AgentCore store of 60 records, a provisioned state table; this worker's
    environment names no state (MEMLIFE_STATE unset: the flow parameter names it)."""
    monkeypatch.delenv("MEMLIFE_STORE", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("MEMLIFE_STATE", "local")  # recorded: whatever the run sets is undone
    monkeypatch.delenv("MEMLIFE_STATE")
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path / "worker-1"))
    store = harness.store()
    store.put_many(list(generate(60, seed=5, anchor=ANCHOR)))
    store.close = lambda: None  # type: ignore[method-assign]
    query = {"region": "us-east-1", "endpoint_url": harness.fake.endpoint_url,
             "sidecar_table": harness.sidecar_table}  # fmt: skip
    url = f"agentcore://{harness.fake.memory_id}?{urlencode(query)}"
    surl = state_url(f"state-{tmp_path.name}"[:200])
    state = provision(surl)
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="receipts")
    monkeypatch.setattr(state_mod, "_open", {})
    return {"url": url, "state_url": surl, "state": state, "fake": harness.fake}


def test_a_flow_run_naming_its_state_by_parameter_is_refused_while_another_worker_holds_the_lease(
    agentcore: dict, prefect_harness: None
) -> None:
    """Adversary: a manual trigger of the nightly deployment passes the run's state as the
    flow parameter (``config.state: dynamodb://...``, "MEMLIFE_STATE for this run") on a
    worker whose environment names none, while another worker's nightly holds the store's
    lease in that state table. Must hold (invariant 9): the run is refused (LeaseHeld) and
    changes nothing. The pipeline takes the lease before ``start_run`` applies
    ``config.state``, so the lease is taken in the worker's own $MEMLIFE_HOME journal and
    the run goes on beside the live writer."""
    from flows.nightly import nightly

    state, url = agentcore["state"], agentcore["url"]
    identity = store_identity(url)
    state.check_store(identity, claim=True)  # the other worker's run bound the table
    now = utcnow()
    taken, _ = DynamoBackend(state, identity).lease_acquire(
        NAME, OTHER_WORKER, "20261101T120000Z-apply-0123456789", "nightly", now,
        now + timedelta(minutes=30),
    )  # fmt: skip
    assert taken
    before = {k: dict(v) for k, v in agentcore["fake"].records.items()}

    config = RunConfig(dry_run=False, now=CUTOFF, store=url, state=agentcore["state_url"],
                       receipts="s3://receipts/memlife")  # fmt: skip
    with pytest.raises(LeaseHeld):
        nightly(config)
    assert agentcore["fake"].records == before


@pytest.fixture()
def events(monkeypatch: pytest.MonkeyPatch) -> Iterator[EventsWorker]:
    """Prefect's asserting events client inside the EventsWorker (as test_fanout.py)."""
    worker = EventsWorker.instance(AssertingEventsClient)
    monkeypatch.setattr(EventsWorker, "instance", lambda *_a, **_k: worker)
    yield worker
    worker.drain()


def _failure_events(worker: EventsWorker) -> list:
    worker.drain()
    client = worker._client
    assert isinstance(client, AssertingEventsClient)
    return [e for e in client.events if e.event == EVENT_FAILURE]


@pytest.mark.parametrize(
    "params",
    [
        {"dryrun": False},  # a typo'd key: extra="forbid"
        {"dry_run": False, "now": "2026-11-01T12:00:00"},  # a cutoff without a zone
    ],
    ids=["typo", "naive-cutoff"],
)
def test_a_manual_trigger_with_bad_parameters_emits_the_failure_event(
    offline_home: Path, prefect_harness: None, events: EventsWorker, params: dict
) -> None:
    """Adversary: an operator triggers the nightly deployment by hand with a mistyped
    parameter or a cutoff without a zone. Must hold (session 29: "a run refused before it
    started emits memlife.run.failure", flows/events.on_refused: "a Failed flow run alone
    alerted nobody"): the run is refused and the automation watching memlife.run.* hears
    of it. Prefect validates the RunConfig before the flow body runs, so no event is sent."""
    from flows.nightly import nightly

    with pytest.raises(Exception, match="invalid parameters"):
        nightly(params)
    (event,) = _failure_events(events)
    assert event.payload["stage"] == "start" and event.payload["run_id"] is None


def test_a_bad_policy_path_emits_the_failure_event(
    offline_home: Path, prefect_harness: None, events: EventsWorker
) -> None:
    """The refusal the session 29 fix covers (the counterpart of the test above)."""
    from flows.nightly import nightly
    from memlife.stores.sqlite import SqliteStore

    SqliteStore(offline_home / "memlife.db").close()
    with pytest.raises(Exception, match="nope.yaml"):
        nightly({"dry_run": True, "now": CUTOFF.isoformat(), "policy": "policies/nope.yaml"})
    (event,) = _failure_events(events)
    assert event.payload["stage"] == "start" and event.payload["run_id"] is None


def _prefect_database() -> Path:
    from prefect.settings import get_current_settings

    url = str(get_current_settings().server.database.connection_url.get_secret_value())
    return Path(url.split(":///", 1)[1])


def test_the_prefect_engine_and_the_local_engine_leave_the_same_store_and_evidence(
    offline_home: Path, prefect_harness: None
) -> None:
    """Adversary: the same night (400 records, a canary in each content, an evaluation set)
    run by the local engine on one copy of a store and by the Prefect flow on another.
    Must hold: the same records in the same states, the same receipted operations by
    action and outcome, the flow's counts artifact equal to its receipt's counts, and no
    canary anywhere in Prefect's database (states, logs, parameters, artifacts, events)."""
    import json
    import shutil

    from flows.nightly import nightly
    from memlife.pipeline import run_local
    from tests.e2e.test_flow import _artifact_rows
    from tests.support import run_secret
    from tests.support.lifecycle import gate_cases, operation_receipts, seed, snapshot

    local_db, flow_db = offline_home / "local.db", offline_home / "flow.db"
    records = seed(local_db, records=400)
    run_secret.give(local_db)  # the copy carries it: replacement ids compare (50c2)
    shutil.copy(local_db, flow_db)
    cases = gate_cases(local_db, records.values(), offline_home / "cases.yaml")
    base = dict(dry_run=False, now=CUTOFF, eval_cases=cases)

    local = run_local(RunConfig(**base, store=f"sqlite:///{local_db}",
                                receipts=f"file://{offline_home / 'r-local'}"))  # fmt: skip
    flow = nightly(RunConfig(**base, store=f"sqlite:///{flow_db}",
                             receipts=f"file://{offline_home / 'r-flow'}"))  # fmt: skip

    assert local.status == flow["status"] == "success"
    assert local.lifecycle["consolidated"] > 0 and local.lifecycle["deleted"] > 0
    assert flow["lifecycle"] == local.lifecycle and flow["counts"] == local.counts

    def states(db: Path) -> dict:
        return {k: (v["status"], v["provenance"]["replaced_by"], v["content"])
                for k, v in snapshot(db).items()}  # fmt: skip

    assert states(flow_db) == states(local_db)

    def evidence(folder: Path) -> list:
        return sorted((o["record_id"], o["action"], o["outcome"])
                      for o in operation_receipts(folder).values())  # fmt: skip

    assert evidence(offline_home / "r-flow") == evidence(offline_home / "r-local")
    receipt = json.loads(Path(flow["receipt"]).read_text())
    emitted = {r["count"]: r["records"] for r in _artifact_rows("memlife-counts")}
    assert {k: emitted[k] for k in receipt["counts"]} == receipt["counts"]

    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=30)  # the run's log lines reach the database
    data = _prefect_database().read_bytes()
    wal = _prefect_database().with_name(_prefect_database().name + "-wal")
    data += wal.read_bytes() if wal.exists() else b""
    assert flow["run_id"].encode() in data  # the run's logs and artifacts are there
    canaries = [c.split("[canary ")[1][:16] for c in (r.content for r in records.values())]
    assert not [c for c in canaries if c.encode() in data]


def _one_record_store(home: Path) -> None:
    from memlife.model import MemoryRecord
    from memlife.stores.sqlite import SqliteStore

    home.mkdir(parents=True, exist_ok=True)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([MemoryRecord(id="m-1", actor_id="u-1", namespace="/users/u-1/facts",
                                     memory_type="semantic", content="Likes tea.",
                                     created_at=ANCHOR)])  # fmt: skip


@pytest.fixture()
def batch_calls(offline_home: Path, prefect_harness: None, monkeypatch: pytest.MonkeyPatch):
    """A one-record store; the flow's batch task without its retry delay (its retry
    condition, flows/limits.retry_on_throttling, unchanged); planning raises the errors
    handed in (one per call, then plans as usual) and counts its calls."""
    import flows.shard
    from memlife import run_planning

    _one_record_store(offline_home)
    monkeypatch.setattr(flows.shard, "process_batch", flows.shard.process_batch.with_options(
        retry_delay_seconds=0, retry_jitter_factor=None))  # fmt: skip
    real, calls, errors = run_planning.plan_shard, [], []

    def plan_shard(*args, **kwargs):
        calls.append(1)
        if errors:
            raise errors.pop(0)
        return real(*args, **kwargs)

    monkeypatch.setattr(run_planning, "plan_shard", plan_shard)
    return calls, errors


def test_a_throttled_batch_is_retried_by_its_task_and_completes(batch_calls) -> None:
    """Adversary: the store throttles the first page of a batch (past botocore's own
    attempts). Must hold: Prefect retries the batch task (retry_on_throttling says yes),
    the retry plans it, and the night is a success with no failed shard."""
    import botocore.exceptions

    from flows.nightly import nightly

    calls, errors = batch_calls
    errors.append(botocore.exceptions.ClientError(
        {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "Query"))  # fmt: skip
    result = nightly({"dry_run": True, "now": CUTOFF.isoformat()})
    assert result["status"] == "success" and result["failed_shards"] == []
    assert result["records"] == 1 and len(calls) == 2


def test_a_batch_that_failed_for_good_is_not_replayed_by_its_task(batch_calls) -> None:
    """Adversary: a batch fails with an error that is no throttling (a bug, a refused
    request). Must hold ("failed operations are replayed" was an original complaint): the
    task runs it once, the shard is reported failed by its error's type, the run goes on."""
    from flows.nightly import nightly

    calls, errors = batch_calls
    errors.append(KeyError("memory_type"))
    result = nightly({"dry_run": True, "now": CUTOFF.isoformat()})
    assert [s["code"] for s in result["failed_shards"]] == ["KeyError"]
    assert len(calls) == 1


def test_a_partial_failure_ends_completed_under_its_own_name(batch_calls) -> None:
    """Adversary: a shard fails; automations and the UI read the flow run's state. Must
    hold (flows/nightly.STATE_NAMES): Completed, named PartialFailure (not plain
    Completed, not Failed, which Prefect would retry)."""
    from flows.nightly import nightly

    _, errors = batch_calls
    errors.append(KeyError("memory_type"))
    state = nightly({"dry_run": True, "now": CUTOFF.isoformat()}, return_state=True)
    assert state.is_completed() and state.name == "PartialFailure"
    assert state.result()["status"] == "partial_failure"
