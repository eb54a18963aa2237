"""The model path under an outage and an account error (session 29 review, a hostile
Messages API): a 400 "Your credit balance is too low" was MODEL_REJECTED, blamed on each
group (three nights: every group to review for good); an overloaded or hanging service
cost every group of the run its attempts x the timeout (1,000 groups: about 50 hours under
the store's lease). The account's 400 is the run's configuration now, and an outage stops
the run sending after OUTAGE_CALLS groups in a row."""

from __future__ import annotations

import pytest

from memlife.consolidate import ConsolidationError
from memlife.consolidate.anthropic import OUTAGE_CALLS
from memlife.consolidate.prompts import TOOL_NAME
from memlife.embed import MiniLMEmbedder, default_embedder
from tests.fakes.messages_api import error_reply, invalid_request_error, tool_use_reply
from tests.unit.test_consolidation_adversarial import PAIR, _make


@pytest.fixture(scope="module")
def emb() -> MiniLMEmbedder:
    return default_embedder()


@pytest.mark.parametrize(
    "message",
    [
        "Your credit balance is too low to access the Anthropic API. Please go to Plans & "
        "Billing to upgrade or purchase credits.",
        # names the configured model id without the word "model" (session 34 audit)
        "claude-haiku-4-5 is not available to you",
    ],
    ids=["account", "model-id"],
)
def test_an_account_error_is_the_runs_not_the_groups(messages_server, emb, message: str) -> None:
    """A 400 about the account or the configured model is MODEL_MISCONFIGURED, sticky:
    later groups are not sent."""
    messages_server.enqueue(invalid_request_error(message))
    c = _make(messages_server, emb)
    for _ in range(3):
        with pytest.raises(ConsolidationError) as info:
            c.consolidate(PAIR)
        assert info.value.code == "MODEL_MISCONFIGURED" and info.value.retryable
    assert len(messages_server.message_requests) == 1


def test_a_bad_request_about_the_group_is_still_the_groups(messages_server, emb) -> None:
    messages_server.enqueue(invalid_request_error("messages.0.content: text too long"))
    with pytest.raises(ConsolidationError) as info:
        _make(messages_server, emb).consolidate(PAIR)
    assert info.value.code == "MODEL_REJECTED"


@pytest.mark.parametrize("status", [529, 503, 429])
def test_an_outage_stops_the_run_sending(messages_server, emb, status: int) -> None:
    messages_server.set_handler(lambda body: error_reply(status, "overloaded_error", "Overloaded"))
    c = _make(messages_server, emb)
    for _ in range(OUTAGE_CALLS + 10):
        with pytest.raises(ConsolidationError) as info:
            c.consolidate(PAIR)
        assert info.value.code == "MODEL_UNAVAILABLE" and info.value.retryable
    # then one probe after OUTAGE_CALLS groups held back (session 44), the next after twice that
    assert len(messages_server.message_requests) == OUTAGE_CALLS + 1


def test_an_outage_costs_a_few_probes_a_run(messages_server, emb) -> None:
    """Down for a whole run of 1,000 groups: the first OUTAGE_CALLS are sent, then one
    probe after each doubling of the groups held back (about log2 of the run's size)."""
    messages_server.set_handler(lambda body: error_reply(529, "overloaded_error", "Overloaded"))
    c = _make(messages_server, emb)
    for _ in range(1000):
        with pytest.raises(ConsolidationError):
            c.consolidate(PAIR)
    assert len(messages_server.message_requests) == OUTAGE_CALLS + 7  # held 5+10+...+320


def test_groups_that_fail_on_their_own_first_do_not_hold_back_the_run(messages_server, emb) -> None:
    """Five groups that always fail come first (the outage stop trips); the service is up:
    a probe finds it, and every later group is sent and answered (session 44; they waited
    for the next night before, and the same five came first again)."""
    down = error_reply(529, "overloaded_error", "Overloaded")
    ok = tool_use_reply(TOOL_NAME, {
        "summary": "I drink black coffee.", "claims": ["I drink black coffee."],
        "confidence": 0.9, "source_ids": ["s-0", "s-1"]})  # fmt: skip
    messages_server.enqueue(*([down] * OUTAGE_CALLS))
    messages_server.set_handler(lambda body: ok)
    c = _make(messages_server, emb)
    for _ in range(OUTAGE_CALLS + 20):
        try:
            c.consolidate(PAIR)
        except ConsolidationError:  # the five; the held back; the answers' own checks
            pass
    # held back: the OUTAGE_CALLS - 1 groups before the probe, no later one
    assert c.answered and len(messages_server.message_requests) == 20 + 1


def test_a_call_that_gets_through_ends_the_streak(messages_server, emb) -> None:
    down = error_reply(529, "overloaded_error", "Overloaded")
    ok = tool_use_reply(TOOL_NAME, {
        "summary": "I drink black coffee.", "claims": ["I drink black coffee."],
        "confidence": 0.9, "source_ids": ["s-0", "s-1"]})  # fmt: skip
    messages_server.enqueue(*([down] * (OUTAGE_CALLS - 1)), ok, *([down] * (OUTAGE_CALLS - 1)))
    c = _make(messages_server, emb)
    for _ in range(2 * OUTAGE_CALLS - 1):
        try:
            c.consolidate(PAIR)
        except ConsolidationError:
            pass
    assert len(messages_server.message_requests) == 2 * OUTAGE_CALLS - 1  # every one was sent
