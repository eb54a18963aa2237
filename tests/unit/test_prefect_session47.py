"""Session 47 (audit 47f): the Prefect flow layer as an adversary (retries of tasks and flow runs, runs at
once, wrong parameters, what Prefect keeps). The nightly flow in-process under the
session's Prefect test harness, the embedded SQLite store, the real SDK against the local
Messages API server; a store throttle is raised where the existing flow tests raise it
(``run_planning.plan_shard``, the store's boundary)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest

from tests.unit.test_consolidation_adversarial import (  # noqa: F401  (run_env: a fixture)
    NIGHT,
    RECORD,
    _answer,
    _seed,
    _state,
    rec,
    run_env,
)
from tests.unit.test_model_unavailable_alone import (
    BLOCKED,
    _answers_all_but_tea,
    seed,
    tea_requests,
)


def _throttle_once(monkeypatch: pytest.MonkeyPatch, namespace: str) -> list[str]:
    """The batch task without its retry delay; the store throttles the first page of
    ``namespace`` once (past botocore's attempts). Returns the shards planned, in order."""
    import flows.shard
    from memlife import run_planning

    monkeypatch.setattr(flows.shard, "process_batch", flows.shard.process_batch.with_options(
        retry_delay_seconds=0, retry_jitter_factor=None))  # fmt: skip
    real, planned = run_planning.plan_shard, []

    def plan_shard(ctx: Any, store: Any, shard: Any, *args: Any, **kwargs: Any) -> Any:
        planned.append(shard.namespace)
        if shard.namespace == namespace and planned.count(namespace) == 1:
            raise botocore.exceptions.ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "Query"
            )
        return real(ctx, store, shard, *args, **kwargs)

    monkeypatch.setattr(run_planning, "plan_shard", plan_shard)
    return planned


def test_a_group_the_retried_batch_consolidated_is_not_also_rejected(
    run_env: Path,  # noqa: F811 (the imported fixture)
    messages_server: Any,
    prefect_harness: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Adversary: the service fails the tea group once (529) while it answers the coffee
    group; then the store throttles the batch's next shard, and Prefect retries the batch
    task (retry_on_throttling); this time the service answers tea too. Must hold: tea is
    consolidated and nothing counts it as unavailable (no rejection, no backoff: it was
    answered). The failed attempt's entry stays in the executor's ``unavailable`` list
    (judged only at a batch's end) and the retry's batch end judges it: a group this night
    merged is also recorded as refused (MODEL_UNAVAILABLE, one step towards review)."""
    from flows.nightly import nightly
    from memlife.model import Status
    from memlife.stores.sqlite import SqliteStore

    seed(run_env)  # coffee and tea pairs in /users/u-1/notes
    _seed(run_env, [rec("z-1", "I keep a bike in the garage.", 2, subject="bike", ns="zz")])
    failed: list[int] = []

    def tea_fails_once(body: dict[str, Any]) -> Any:
        text = body["messages"][0]["content"]
        if BLOCKED in text and not failed:
            failed.append(1)
            return _answers_all_but_tea(body)  # the 529
        records = {rid: c for _, rid, c in RECORD.findall(text)}
        return _answer(records[max(records)], sorted(records), relation="duplicate")

    messages_server.set_handler(tea_fails_once)
    planned = _throttle_once(monkeypatch, "/users/u-1/zz")

    result = nightly({"dry_run": False, "now": NIGHT.isoformat()})
    assert planned == ["/users/u-1/notes", "/users/u-1/zz"] * 2  # the batch ran twice
    assert result["failed_shards"] == [] and tea_requests(messages_server) == 2
    state = _state(run_env)
    assert state["t-1"].status is Status.superseded  # tea was merged on the retry
    assert not result["other_counts"].get("consolidation_unavailable_alone")
    with SqliteStore(run_env / "memlife.db") as store:
        rows = store.connection.execute("SELECT * FROM consolidation_rejections").fetchall()
    assert rows == []


def test_a_typoed_shard_deployment_is_refused_before_the_run_starts(
    offline_home: Path, prefect_harness: None
) -> None:
    """Adversary: a manual trigger asks for child-run fan-out with the shard deployment's
    name mistyped (``memlife-shard/shrad``). Must hold: a clear refusal naming the
    deployment before anything is written (no lease taken, no manifest, no receipt, the
    run chain not advanced), as for a mistyped store or glob. Today the run starts (lease,
    manifest, the retry queue drained, the chain advanced), then fails in its fan-out with
    Prefect's ``ObjectNotFound: None`` and a sealed failure receipt for the night."""
    from flows.nightly import nightly
    from tests.support.lifecycle import CUTOFF
    from tests.support.lifecycle import seed as seed_store

    seed_store(offline_home / "memlife.db", records=20)
    config = {"dry_run": False, "now": CUTOFF.isoformat(), "fan_out": "deployments",
              "shard_deployment": "memlife-shard/shrad"}  # fmt: skip
    with pytest.raises(Exception, match="memlife-shard/shrad"):
        nightly(config)
    assert not (offline_home / "receipts" / "runs").exists()


def test_a_step_task_failing_with_content_in_its_message_leaves_none_in_prefect(
    offline_home: Path, prefect_harness: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adversary: a library fails inside one of the run's step tasks (not a shard batch:
    the shard listing) with pydantic's message quoting a record's content. Must hold
    (invariant 5, flows/nightly.as_task): the run fails by the error's type, and no log
    line Prefect keeps (the task's "failed with exception" line included) holds the text."""
    import memlife.pipeline as pipeline
    from flows.nightly import nightly
    from memlife.foreign_errors import ForeignError
    from tests.e2e.test_flow_foreign_errors import SECRET, quote_the_content
    from tests.support.lifecycle import CUTOFF
    from tests.support.lifecycle import seed as seed_store
    from tests.unit.test_prefect_session43 import _prefect_database

    seed_store(offline_home / "memlife.db", records=20)
    monkeypatch.setattr(pipeline, "list_shards", lambda *_: quote_the_content())
    with pytest.raises(ForeignError):
        nightly({"dry_run": True, "now": CUTOFF.isoformat()})

    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=30)  # the run's log lines reach the database
    db = _prefect_database()
    wal = db.with_name(db.name + "-wal")
    data = db.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    assert b"ValidationError" in data  # the failure is there, by type
    assert SECRET.encode() not in data
