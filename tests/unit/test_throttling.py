"""The local engine retries a throttled shard batch as a Prefect task would, then names its
shards failed and goes on (memlife/throttling.py). Throttling is injected where boto would
raise it: a botocore ClientError from the store's page read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

import memlife.run_planning as run_planning
from memlife.pipeline import RunConfig, run_local
from memlife.run_types import BatchOutcome, Shard
from memlife.stores.sqlite import SqliteStore
from memlife.throttling import retried
from tests.support.gate import NOW, rec

SHARDS = [Shard("u-1", "/users/u-1/facts")]


def throttled(op: str = "Query") -> ClientError:
    error = {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}}
    return ClientError(error, op)  # type: ignore[arg-type]  # botocore's TypedDict


@pytest.fixture()
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLIFE_TASK_RETRIES", "3")
    monkeypatch.setenv("MEMLIFE_RETRY_BACKOFF_SECONDS", "2")
    monkeypatch.setenv("MEMLIFE_RETRY_JITTER", "0")


def test_a_throttled_batch_is_retried_with_doubling_backoff(quick: None) -> None:
    calls, waits = [0], []

    def batch() -> BatchOutcome:
        calls[0] += 1
        if calls[0] <= 2:
            raise throttled()
        return BatchOutcome(records=7)

    out = retried(batch, SHARDS, sleep=waits.append)
    assert out.records == 7 and calls[0] == 3 and waits == [2.0, 4.0]


def test_a_batch_throttled_past_its_retries_is_named_failed(quick: None) -> None:
    waits: list[float] = []

    def batch() -> BatchOutcome:
        raise throttled()

    out = retried(batch, SHARDS, sleep=waits.append)
    assert out.failed_shards == [SHARDS[0].failed("THROTTLED")]
    assert waits == [2.0, 4.0, 8.0]  # three retries, then it gives up


def test_every_wait_is_capped_and_the_prefect_tasks_wait_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The most retries and the largest factor the settings allow: the doubling stops at
    MAX_RETRY_DELAY_SECONDS (uncapped, the tenth wait was 21 days), and the Prefect tasks'
    delays are the local engine's list."""
    from flows.limits import retrying
    from memlife.throttling import MAX_RETRY_DELAY_SECONDS

    monkeypatch.setenv("MEMLIFE_TASK_RETRIES", "10")
    monkeypatch.setenv("MEMLIFE_RETRY_BACKOFF_SECONDS", "3600")
    monkeypatch.setenv("MEMLIFE_RETRY_JITTER", "0")
    waits: list[float] = []

    def batch() -> BatchOutcome:
        raise throttled()

    out = retried(batch, SHARDS, sleep=waits.append)
    assert out.failed_shards and len(waits) == 10
    assert waits == [MAX_RETRY_DELAY_SECONDS] * 10
    assert retrying()["retry_delay_seconds"] == waits and retrying()["retries"] == 10


@pytest.mark.parametrize("value", ["11", "1000"])
def test_a_retry_count_past_ten_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """A typo (MEMLIFE_TASK_RETRIES=100) would keep a throttled night retrying for a day
    and break Prefect's limit of 50 delays: refused, naming the setting."""
    from memlife.settings import settings

    monkeypatch.setenv("MEMLIFE_TASK_RETRIES", value)
    with pytest.raises(Exception, match="MEMLIFE_TASK_RETRIES"):
        settings()


def test_any_other_error_is_not_retried(quick: None) -> None:
    waits: list[float] = []

    def batch() -> BatchOutcome:
        raise ValueError("a bug in our own code")

    with pytest.raises(ValueError):
        retried(batch, SHARDS, sleep=waits.append)
    assert waits == []


@pytest.fixture()
def two_actors(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("MEMLIFE_RETRY_BACKOFF_SECONDS", "0")
    home.mkdir()
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("a-1", "facts", "Likes tea."), rec("b-1", "facts", "Likes jazz.", actor="u-2")])  # fmt: skip
    return home


def throttle_reads(monkeypatch: pytest.MonkeyPatch, actor: str, times: int) -> list[int]:
    """The shard's page reads raise throttling ``times`` times (-1: always)."""
    real, seen = run_planning.iter_views, [0]

    def reads(store: Any, shard: Shard, *args: Any, **kwargs: Any) -> Any:
        if shard.actor_id == actor and (times < 0 or seen[0] < times):
            seen[0] += 1
            raise throttled()
        return real(store, shard, *args, **kwargs)

    monkeypatch.setattr(run_planning, "iter_views", reads)
    return seen


def test_the_local_engine_rides_out_throttling(
    two_actors: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = throttle_reads(monkeypatch, "u-1", 2)
    summary = run_local(RunConfig(dry_run=True, now=NOW, workers=1))
    assert seen[0] == 2 and summary.failed_shards == [] and summary.records == 2


def test_a_shard_throttled_for_good_fails_alone(
    two_actors: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    throttle_reads(monkeypatch, "u-1", -1)
    summary = run_local(RunConfig(now=NOW, workers=1, shards_per_batch=1))
    assert [f["code"] for f in summary.failed_shards] == ["THROTTLED"]
    assert "u-1" in summary.failed_shards[0]["shard"] and summary.records == 1  # u-2's planned
    receipt = json.loads(Path(summary.receipt or "").read_text())
    assert receipt["status"] == "partial_failure"
