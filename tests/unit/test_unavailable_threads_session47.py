"""Session 47 (audit 47m): the model failures a batch leaves for judging (memlife/apply/unavailable.py)
when the nightly flow's batch tasks run in threads (``max_workers``) and one is retried.
The nightly flow in-process under the session's Prefect harness, the embedded SQLite
store, the real SDK against the local Messages API; the store throttle is raised where
test_prefect_session47 raises it (``run_planning.plan_shard``). Events only order the two
batch threads as a scheduler may; nothing waits on time."""

from __future__ import annotations

import threading
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
from tests.unit.test_model_unavailable_alone import BLOCKED, _answers_all_but_tea, seed

SAFETY = 60  # seconds: a deadlock fails the test instead of hanging it


# fmt: skip
def test_another_batchs_end_does_not_judge_a_failure_its_retry_answers(
    run_env: Path,  # noqa: F811 (the imported fixture)
    messages_server: Any,
    prefect_harness: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two batch tasks in threads: B (u-1's notes, then zz) and A (u-2's). The service
    fails B's tea group once (529) while it answers coffee; A's batch ends; then the store
    throttles B's zz shard and Prefect retries B, whose second try gets tea answered. Must
    hold (as audit 47f holds it for one thread): tea is merged and nothing counts it as
    unavailable (no rejection row, no `consolidation_unavailable_alone`)."""
    import flows.shard
    from flows.nightly import nightly
    from memlife import run_planning
    from memlife.apply.executor import Executor
    from memlife.model import Status
    from memlife.stores.sqlite import SqliteStore

    seed(run_env)  # coffee and tea pairs in u-1's notes
    _seed(run_env, [rec("z-1", "I keep a bike in the garage.", 2, subject="bike", ns="zz"),
                    rec("v-1", "I play the violin.", 2, subject="violin", actor="u-2")])  # fmt: skip
    failed: list[int] = []

    def tea_fails_once(body: dict[str, Any]) -> Any:
        text = body["messages"][0]["content"]
        if BLOCKED in text and not failed:
            failed.append(1)
            return _answers_all_but_tea(body)  # the 529
        records = {rid: c for _, rid, c in RECORD.findall(text)}
        return _answer(records[max(records)], sorted(records), relation="duplicate")

    messages_server.set_handler(tea_fails_once)
    b_at_zz, a_judged = threading.Event(), threading.Event()
    real_judge = Executor.judge_unavailable

    def judge(self: Executor, *args: Any, **kwargs: Any) -> None:
        real_judge(self, *args, **kwargs)
        a_judged.set()  # the first batch end is A's: B waits for it below

    monkeypatch.setattr(Executor, "judge_unavailable", judge)
    monkeypatch.setattr(flows.shard, "process_batch", flows.shard.process_batch.with_options(
        retry_delay_seconds=0, retry_jitter_factor=None))  # fmt: skip
    real_plan, planned = run_planning.plan_shard, []

    def plan_shard(ctx: Any, store: Any, shard: Any, *args: Any, **kwargs: Any) -> Any:
        planned.append((shard.actor_id, shard.namespace))
        if shard.actor_id == "u-2":
            assert b_at_zz.wait(SAFETY)  # B has planned notes (tea failed) first
        elif shard.namespace.endswith("/zz") and planned.count(planned[-1]) == 1:
            b_at_zz.set()
            assert a_judged.wait(SAFETY)  # A's batch ended meanwhile
            raise botocore.exceptions.ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "Query"
            )
        return real_plan(ctx, store, shard, *args, **kwargs)

    monkeypatch.setattr(run_planning, "plan_shard", plan_shard)
    result = nightly({"dry_run": False, "now": NIGHT.isoformat(), "shards_per_batch": 2})
    assert result["failed_shards"] == [] and len(failed) == 1
    assert _state(run_env)["t-1"].status is Status.superseded  # merged on B's retry
    assert not result["other_counts"].get("consolidation_unavailable_alone")
    with SqliteStore(run_env / "memlife.db") as store:
        rows = store.connection.execute("SELECT * FROM consolidation_rejections").fetchall()
    assert rows == []
