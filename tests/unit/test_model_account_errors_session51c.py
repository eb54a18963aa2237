"""Account-level refusals of the Messages API are the run's, not a group's (audit 51c).

The real anthropic SDK against the local Messages API server. The API answers a workspace
past its spend limit, and a disabled organization, with a 400 ``invalid_request_error``
whose words name neither the model nor the credit balance:

    "You have reached your specified API usage limits. You will regain access on
     2026-04-01 at 00:00 UTC."
    "This organization has been disabled."

(both as the API sends them; anthropics/claude-code issues #38038 and #19028), and a
gateway in front of it (``ANTHROPIC_BASE_URL``) answers 402 Payment Required when its
budget is spent. Not one of them is about the group that was sent. Like a bad key
(session 10) each must stop the run's model calls (MODEL_MISCONFIGURED: one request, no
group blamed), not count a refusal against every group of every actor until each is parked
in review for good, the model never having read one.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from memlife.consolidate import ConsolidationError
from memlife.embed import MiniLMEmbedder, default_embedder
from tests.fakes.messages_api import MessagesServer, Reply, error_reply, invalid_request_error
from tests.unit.test_consolidation_adversarial import (
    COFFEE,
    NIGHT,
    PAIR,
    _make,
    _run,
    _seed,
    _state,
    careful,
    rec,
    run_env,  # noqa: F401 - the pipeline tests' fixture
)

USAGE_LIMIT = (
    "You have reached your specified API usage limits. "
    "You will regain access on 2026-04-01 at 00:00 UTC."
)
ACCOUNT_REFUSALS = {
    "usage-limits": invalid_request_error(USAGE_LIMIT),
    "organization-disabled": invalid_request_error("This organization has been disabled."),
    "gateway-402": error_reply(402, "payment_required", "Budget exhausted for this key."),
}


@pytest.fixture(name="messages_server")
def _messages_server() -> Iterator[MessagesServer]:
    with MessagesServer() as server:
        yield server


@pytest.fixture(scope="module")
def emb() -> MiniLMEmbedder:
    return default_embedder()


@pytest.mark.parametrize("reply", list(ACCOUNT_REFUSALS.values()), ids=list(ACCOUNT_REFUSALS))
def test_an_account_level_refusal_stops_the_model_for_the_run(
    messages_server: MessagesServer, emb: MiniLMEmbedder, reply: Reply
) -> None:
    """The first group's request is refused for the account: that group and every later one
    are MODEL_MISCONFIGURED (retryable, nobody's refusal), and only one request is sent."""
    messages_server.set_handler(lambda body: reply)
    c = _make(messages_server, emb)
    for _ in range(3):
        with pytest.raises(ConsolidationError) as info:
            c.consolidate(PAIR)
        assert info.value.code == "MODEL_MISCONFIGURED" and info.value.retryable
    assert len(messages_server.message_requests) == 1


@pytest.mark.parametrize(
    "message",
    [
        "prompt is too long: 215304 tokens > 200000 maximum",
        "input length and `max_tokens` exceed context limit: 199500 + 1024 > 200000, "
        "decrease input length or `max_tokens` and try again",
    ],
    ids=["prompt-too-long", "context-limit"],
)
def test_a_request_too_large_for_the_window_is_still_the_group_s(
    messages_server: MessagesServer, emb: MiniLMEmbedder, message: str
) -> None:
    """Control: a 400 about this group's own request (its prompt past the model's context
    window) stays MODEL_REJECTED, the group's (backoff, then review); the next group is sent."""
    messages_server.set_handler(lambda body: invalid_request_error(message))
    c = _make(messages_server, emb)
    for _ in range(2):
        with pytest.raises(ConsolidationError) as info:
            c.consolidate(PAIR)
        assert info.value.code == "MODEL_REJECTED" and not info.value.retryable
    assert len(messages_server.message_requests) == 2


def test_a_spend_limit_does_not_park_every_group_in_review(run_env: Path, messages_server) -> None:  # noqa: F811
    """Four nights past the workspace's spend limit, then the limit is raised: every group
    must still be merged the next night. Before the fix each night blamed both groups
    (MODEL_REJECTED), and after three both waited for a reviewer for good."""
    _seed(run_env, [rec("b-1", COFFEE, 1), rec("b-2", COFFEE, 6),
                    rec("t-1", "I like green tea.", 1, subject="tea"),
                    rec("t-2", "I like green tea.", 3, subject="tea")])  # fmt: skip
    messages_server.set_handler(lambda body: invalid_request_error(USAGE_LIMIT))
    night = NIGHT
    for _ in range(4):
        before = len(messages_server.message_requests)
        receipt = _run(night)
        assert len(messages_server.message_requests) - before == 1  # one request, then none
        other = receipt["other_counts"]
        assert not {"consolidation_to_review", "consolidation_in_review",
                    "consolidation_backing_off"} & set(other)  # fmt: skip
        assert "MODEL_REJECTED" not in receipt["model"].get("rejections", {})
        assert [f["code"] for f in receipt["failures"]] == ["MODEL_MISCONFIGURED"]
        night += timedelta(days=30)
    messages_server.set_handler(careful)  # the limit is raised
    receipt = _run(night)
    assert receipt["counts"]["consolidated"] == 2
    assert {i: r.status.value for i, r in _state(run_env).items() if not i.startswith("r-")} == {
        "b-1": "superseded", "b-2": "superseded", "t-1": "superseded", "t-2": "superseded"
    }  # fmt: skip
