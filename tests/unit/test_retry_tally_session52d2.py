"""Audit 52d2: a shard batch retried after a throttle keeps what its failed attempt recorded.

A throttled batch is retried from the start (memlife/throttling.retried on the local
engine, the task's retries under Prefect) and the retry began a fresh BatchOutcome. What
the failed attempt had recorded stayed recorded (the model answered and was paid; the
group's refusal is in the journal), so the retry read the group as "backing off" or "in
review" from an earlier night: the night's receipt under-counted model spend, lost the
refusal, and a group sent to review that night was listed in no receipt's failures.

Real SQLite store, the real SDK against the local Messages API fake, the real pipeline and
(once) the nightly flow under the session's Prefect harness. The throttle is a botocore
ClientError raised where the network would raise it: the next shard's page read
(``run_planning.plan_shard``, as test_unavailable_threads_session47 does) or the state
table's write of the refusal (the journal's ``reject``).
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest

from memlife.apply.rejections import MAX_REJECTIONS
from memlife.consolidate.prompts import TOOL_NAME
from memlife.journal.sqlite import SqliteJournal
from tests.fakes.messages_api import Reply, tool_use_reply
from tests.unit.test_consolidation_adversarial import (  # noqa: F401  (run_env: a fixture)
    NIGHT,
    RECORD,
    _run,
    _seed,
    rec,
    run_env,
)

REFUSED = "INCOMPLETE_SOURCES"  # the answer names only one of the pair's two members


IN, OUT = 700, 40  # each answer's usage, as the service bills it


def names_only_the_newest(body: dict[str, Any]) -> Reply:
    records = {rid: c for _, rid, c in RECORD.findall(body["messages"][0]["content"])}
    newest = sorted(records)[-1]
    answer = {"summary": records[newest], "claims": [records[newest]], "confidence": 0.9,
              "source_ids": [newest], "relation": "duplicate"}  # fmt: skip
    return tool_use_reply(TOOL_NAME, answer, input_tokens=IN, output_tokens=OUT)


def seed(home: Path) -> None:
    """u-1's coffee pair (its answers are refused), then a shard of one record planned
    after it in the same batch (``zz``: where the store throttles)."""
    _seed(home, [rec("c-1", "I drink black coffee every morning.", 1),
                 rec("c-2", "Every morning I drink black coffee.", 3),
                 rec("z-1", "I keep a bike in the garage.", 2, subject="bike", ns="zz")])  # fmt: skip


def throttle() -> botocore.exceptions.ClientError:
    error = {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}
    return botocore.exceptions.ClientError(error, "Query")  # type: ignore[arg-type]


@pytest.fixture()
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLIFE_RETRY_BACKOFF_SECONDS", "0")  # the local engine's waits


def zz_throttled_once(monkeypatch: pytest.MonkeyPatch, times: int = 1) -> list[int]:
    """The zz shard's first page read is throttled (``times`` reads; -1: every one): after
    the coffee group's model call."""
    from memlife import run_planning

    real, seen = run_planning.plan_shard, [0]

    def plan_shard(ctx: Any, store: Any, shard: Any, *args: Any, **kwargs: Any) -> Any:
        if shard.namespace.endswith("/zz") and (times < 0 or seen[0] < times):
            seen[0] += 1
            raise throttle()
        return real(ctx, store, shard, *args, **kwargs)

    monkeypatch.setattr(run_planning, "plan_shard", plan_shard)
    return seen


def reject_throttled_once(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The state table throttles the refusal's write once (it never lands)."""
    real, seen = SqliteJournal.reject, [0]

    def reject(self: SqliteJournal, *args: Any, **kwargs: Any) -> Any:
        if not seen[0]:
            seen[0] += 1
            raise throttle()
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SqliteJournal, "reject", reject)
    return seen


def refused_night(receipt: dict[str, Any], requests: int) -> None:
    """What a night whose coffee answer was refused (backoff) reports, throttled or not."""
    assert receipt["status"] == "success" and receipt["shards"]["failed"] == []
    assert receipt["model"]["calls"] == requests == 1
    assert (receipt["model"]["input_tokens"], receipt["model"]["output_tokens"]) == (IN, OUT)
    assert receipt["model"]["rejections"] == {REFUSED: 1}
    other = receipt["other_counts"]
    assert other.get("consolidation_rejected") == 1
    assert "consolidation_backing_off" not in other  # refused tonight: no earlier night's


def test_control_an_unthrottled_night_counts_the_refusal_and_its_call(
    run_env: Path,  # noqa: F811 (the imported fixture)
    messages_server: Any,
) -> None:
    seed(run_env)
    messages_server.set_handler(names_only_the_newest)
    refused_night(_run(NIGHT), len(messages_server.message_requests))


def test_a_retried_batch_keeps_its_failed_attempts_call_and_refusal(
    run_env: Path,  # noqa: F811
    messages_server: Any,
    monkeypatch: pytest.MonkeyPatch,
    quick: None,
) -> None:
    """The coffee group is sent, refused and journaled; the zz shard is then throttled and
    the batch retried: the retry reads the group as backing off and sends nothing. Must
    hold: the receipt says what an unthrottled night says (one call, its tokens, one
    refusal), not 0 calls, no refusal and a group "backing off" from an earlier night."""
    seed(run_env)
    messages_server.set_handler(names_only_the_newest)
    seen = zz_throttled_once(monkeypatch)
    receipt = _run(NIGHT)
    assert seen == [1]
    refused_night(receipt, len(messages_server.message_requests))


def test_a_batch_throttled_past_its_retries_keeps_its_attempts_calls_and_refusal(
    run_env: Path,  # noqa: F811
    messages_server: Any,
    monkeypatch: pytest.MonkeyPatch,
    quick: None,
) -> None:
    """Every try of the batch is throttled at zz: its shards are failed-shard entries
    (THROTTLED), and the coffee group's call and refusal of the first try stay counted."""
    monkeypatch.setenv("MEMLIFE_TASK_RETRIES", "2")
    seed(run_env)
    messages_server.set_handler(names_only_the_newest)
    seen = zz_throttled_once(monkeypatch, times=-1)
    receipt = _run(NIGHT)
    assert seen == [3] and receipt["status"] == "partial_failure"
    assert {s["code"] for s in receipt["shards"]["failed"]} == {"THROTTLED"}
    assert receipt["model"]["calls"] == len(messages_server.message_requests) == 1
    assert (receipt["model"]["input_tokens"], receipt["model"]["output_tokens"]) == (IN, OUT)
    assert receipt["model"]["rejections"] == {REFUSED: 1}


def review_entries(receipt: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in receipt["failures"] if f.get("review")]


def third_night(home: Path, server: Any) -> None:
    """Two nights refuse the coffee group (far enough apart for its backoff)."""
    seed(home)
    server.set_handler(names_only_the_newest)
    for night in range(MAX_REJECTIONS - 1):
        receipt = _run(NIGHT + timedelta(days=2 * night))
        assert receipt["model"]["rejections"] == {REFUSED: 1} and not review_entries(receipt)


def to_review_night(receipt: dict[str, Any], requests: int) -> None:
    """The third refusal's night: the group is listed for review once, with its code."""
    assert receipt["model"]["calls"] == requests == 1
    assert (receipt["model"]["input_tokens"], receipt["model"]["output_tokens"]) == (IN, OUT)
    assert receipt["model"]["rejections"] == {REFUSED: 1}
    [entry] = review_entries(receipt)
    assert entry["code"] == REFUSED and entry["attempts"] == MAX_REJECTIONS
    assert entry["action"] == "consolidate" and entry["retryable"] is False
    other = receipt["other_counts"]
    assert other.get("consolidation_to_review") == 1
    assert "consolidation_in_review" not in other  # sent tonight, not waiting from before


def test_control_an_unthrottled_third_refusal_is_listed_for_review(
    run_env: Path,  # noqa: F811
    messages_server: Any,
) -> None:
    third_night(run_env, messages_server)
    before = len(messages_server.message_requests)
    receipt = _run(NIGHT + timedelta(days=2 * (MAX_REJECTIONS - 1)))
    to_review_night(receipt, len(messages_server.message_requests) - before)


def test_a_group_sent_to_review_by_a_failed_attempt_is_listed(
    run_env: Path,  # noqa: F811
    messages_server: Any,
    monkeypatch: pytest.MonkeyPatch,
    quick: None,
) -> None:
    third_night(run_env, messages_server)
    before = len(messages_server.message_requests)
    seen = zz_throttled_once(monkeypatch)
    receipt = _run(NIGHT + timedelta(days=2 * (MAX_REJECTIONS - 1)))
    assert seen == [1]
    to_review_night(receipt, len(messages_server.message_requests) - before)


def test_a_refusal_the_retry_records_again_is_counted_once_and_both_calls_paid(
    run_env: Path,  # noqa: F811
    messages_server: Any,
    monkeypatch: pytest.MonkeyPatch,
    quick: None,
) -> None:
    """The refusal's own write is throttled: nothing of it landed, so the retry sends the
    group again (paid again) and is refused again. Must hold: two calls and both their
    tokens, one refusal (the journal holds one), never two."""
    seed(run_env)
    messages_server.set_handler(names_only_the_newest)
    seen = reject_throttled_once(monkeypatch)
    receipt = _run(NIGHT)
    assert seen == [1]
    assert len(messages_server.message_requests) == 2
    assert receipt["model"]["calls"] == 2
    assert (receipt["model"]["input_tokens"], receipt["model"]["output_tokens"]) == (
        2 * IN,
        2 * OUT,
    )
    assert receipt["model"]["rejections"] == {REFUSED: 1}
    assert receipt["other_counts"].get("consolidation_rejected") == 1
    assert receipt["status"] == "success" and receipt["shards"]["failed"] == []


def test_prefect_counts_what_the_local_engine_counts(
    run_env: Path,  # noqa: F811
    messages_server: Any,
    monkeypatch: pytest.MonkeyPatch,
    prefect_harness: None,
) -> None:
    """The same third night through the nightly flow, its batch task retried by Prefect:
    the receipt says what the local engine's says (test above): the group listed for
    review once, its call and its refusal counted."""
    import flows.shard
    from flows.nightly import nightly

    third_night(run_env, messages_server)
    before = len(messages_server.message_requests)
    monkeypatch.setattr(flows.shard, "process_batch", flows.shard.process_batch.with_options(
        retry_delay_seconds=0, retry_jitter_factor=None))  # fmt: skip
    seen = zz_throttled_once(monkeypatch)
    night = NIGHT + timedelta(days=2 * (MAX_REJECTIONS - 1))
    result = nightly({"dry_run": False, "now": night.isoformat()})
    assert seen == [1] and result["failed_shards"] == []
    receipt = json.loads(Path(result["receipt"]).read_text())
    to_review_night(receipt, len(messages_server.message_requests) - before)
