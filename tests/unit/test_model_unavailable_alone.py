"""A group the model fails for a retryable reason night after night (session 44; was Left).

The service answers every group of the actor but one, which it fails with a 529 each
time (a request that always times out, a proxy that blocks it). A retryable failure was
no group's fault, so nothing was remembered: the group was sent, and paid for, every
night for good. A failure right after the service answered another call is the group's
own now: it backs off as a refused answer does and goes to review after MAX_REJECTIONS.
An outage (nothing answered) still blames no group. Real SDK against the local Messages
API server, real MiniLM, real SQLite store.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from memlife.apply.rejections import MAX_REJECTIONS
from memlife.journal import open_journal
from memlife.model import Status
from memlife.stores.sqlite import SqliteStore
from tests.fakes.messages_api import Reply, error_reply, text_reply
from tests.unit.test_consolidation_adversarial import (  # noqa: F401  (run_env: a fixture)
    NIGHT,
    RECORD,
    _answer,
    _run,
    _seed,
    _state,
    rec,
    run_env,
)

BLOCKED = "green tea"  # the group whose requests always fail


def _down(_: Any = None) -> Reply:
    reply = error_reply(529, "overloaded_error", "Overloaded")
    reply.headers["x-should-retry"] = "false"  # the SDK's own retries aside
    return reply


def _answers_all_but_tea(body: dict[str, Any]) -> Reply:
    text = body["messages"][0]["content"]
    if BLOCKED in text:
        return _down()
    records = {rid: c for _, rid, c in RECORD.findall(text)}
    newest = sorted(records)[-1]
    return _answer(records[newest], sorted(records), relation="duplicate")


def seed(home: Path) -> None:
    _seed(home, [rec("c-1", "I drink black coffee every morning.", 1),
                 rec("c-2", "Every morning I drink black coffee.", 3),
                 rec("t-1", f"I drink {BLOCKED} every evening.", 1, subject="tea"),
                 rec("t-2", f"Every evening I drink {BLOCKED}.", 3, subject="tea")])  # fmt: skip


def tea_requests(server: Any) -> int:
    return sum(BLOCKED in str(r.body) for r in server.message_requests)


def test_a_group_failing_alone_every_night_goes_to_review(
    run_env: Path,  # noqa: F811 (the imported fixture)
    messages_server,
) -> None:
    """Night after night the agent writes new facts, which the service consolidates, while
    the tea group alone is unavailable: it is sent at most MAX_REJECTIONS times, then waits
    in review (listed with its code); its records stay."""
    seed(run_env)
    messages_server.set_handler(_answers_all_but_tea)
    for night in range(MAX_REJECTIONS + 2):  # nights far enough apart for any back-off
        _seed(run_env, [rec(f"w-{night}-{i}", f"I walk {night + 2} miles each Sunday.", 10 * night + i,
                            subject=f"walk-{night}") for i in (1, 2)])  # fmt: skip
        receipt = _run(NIGHT + timedelta(days=10 * night))
        if night < MAX_REJECTIONS:
            assert receipt["other_counts"].get("consolidation_unavailable_alone") == 1
    assert tea_requests(messages_server) == MAX_REJECTIONS
    assert receipt["other_counts"].get("consolidation_in_review") == 1
    state = _state(run_env)
    assert {state["t-1"].status, state["t-2"].status} == {Status.active}
    with SqliteStore(run_env / "memlife.db") as store:
        (group,) = open_journal(store).groups_in_review()
    assert (group["code"], group["actor_id"]) == ("MODEL_UNAVAILABLE", "u-1")


def test_an_outage_blames_no_group(
    run_env: Path,  # noqa: F811 (the imported fixture)
    messages_server,
) -> None:
    """The service answers nothing, night after night: every group is sent again each
    night (nothing is the groups' fault), and none goes to review."""
    seed(run_env)
    messages_server.set_handler(_down)
    nights = MAX_REJECTIONS + 1
    for night in range(nights):
        receipt = _run(NIGHT + timedelta(days=10 * night))
        assert not receipt["other_counts"].get("consolidation_unavailable_alone")
    assert tea_requests(messages_server) == nights
    assert not receipt["other_counts"].get("consolidation_in_review")


def _tea_down_probes_answered(body: dict[str, Any]) -> Reply:
    if body["messages"][0]["content"] == "ping":  # the probe: the service is up
        return text_reply("pong")
    return _answers_all_but_tea(body)


def test_a_group_alone_in_its_run_failing_every_night_goes_to_review(
    run_env: Path,  # noqa: F811 (the imported fixture)
    messages_server,
) -> None:
    """Was Left (session 45): the tea group is the only one sent each night and always
    fails, while the service is up. Nothing else of the run was answered, so nothing told
    its failure from an outage and it was sent, and paid for, every night for good. A
    one-token probe (no memory content) now answers: the failure is the group's, it backs
    off and goes to review after MAX_REJECTIONS; its records stay."""
    _seed(run_env, [rec("t-1", f"I drink {BLOCKED} every evening.", 1, subject="tea"),
                    rec("t-2", f"Every evening I drink {BLOCKED}.", 3, subject="tea")])  # fmt: skip
    messages_server.set_handler(_tea_down_probes_answered)
    for night in range(MAX_REJECTIONS + 2):
        receipt = _run(NIGHT + timedelta(days=10 * night))
        if night < MAX_REJECTIONS:
            assert receipt["other_counts"].get("consolidation_unavailable_alone") == 1
            assert receipt["other_counts"].get("model_probes") == 1
    assert tea_requests(messages_server) == MAX_REJECTIONS
    assert receipt["other_counts"].get("consolidation_in_review") == 1
    probes = [r for r in messages_server.message_requests if BLOCKED not in str(r.body)]
    assert len(probes) == MAX_REJECTIONS  # one per night it was sent, none after
    assert all(r.body["max_tokens"] == 1 and "tools" not in r.body for r in probes)
    state = _state(run_env)
    assert {state["t-1"].status, state["t-2"].status} == {Status.active}
