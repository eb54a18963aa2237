"""Short-term compaction, session 48 (audit 48c): the default summariser takes only a finished reply.
The Messages API also ends a reply cut off at the model's context window, with
``stop_reason`` ``model_context_window_exceeded`` (in the SDK's ``StopReason``): that text
is truncated just as one cut at ``max_tokens`` is, and must not become the summary; a
custom summariser's padding is not written into the summary either. Real
components: the SDK against the local Messages API, the offline estimate."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from memlife.online.compaction import AnthropicSummarizer, Message, compact
from memlife.online.compaction_summary import summary_block
from tests.fakes.messages_api import MessagesServer, text_reply
from tests.support.messages import A, U


@pytest.fixture(name="messages_server")
def _messages_server() -> Iterator[MessagesServer]:
    # Local twin of tests.fakes.messages_api's plugin fixture (as in test_compaction.py).
    with MessagesServer() as server:
        yield server


def _history() -> list[Message]:
    return [
        U("Refund order 1234 to the card ending 9921, then close ticket 77. " * 10),
        A("Refunded order 1234; ticket 77 closed. " * 10),
        U("Thanks."),
        A("You're welcome."),
    ]


def test_a_summary_cut_off_at_the_context_window_leaves_the_history_unchanged(
    messages_server: MessagesServer,
) -> None:
    """Adversary: the model's reply stops mid-sentence at its context window
    (``stop_reason: model_context_window_exceeded``). Must hold: as for a reply cut at
    ``max_tokens``, the summariser fails, compaction changes nothing and says why;
    a truncated summary would silently lose the end of the summarised turns."""
    messages_server.enqueue(
        text_reply("Order 1234 was refunded to the ca", stop_reason="model_context_window_exceeded")
    )
    summarizer = AnthropicSummarizer(messages_server.client(max_retries=0), max_tokens=50)
    got = compact(_history(), budget_tokens=60, keep_last_turns=1, summarizer=summarizer)
    assert (got.reason, got.compacted) == ("summarizer_failed", False)
    assert got.messages == _history() and got.error


class Padded:
    """A custom summariser whose answer comes wrapped in blank lines and spaces."""

    max_tokens = 50

    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        return "\n\n  Order 1234 refunded; ticket 77 closed.  \n\n"


def test_a_custom_summarisers_padding_is_not_written_into_the_summary() -> None:
    """Adversary: a custom summariser (not the SDK one, which strips its own reply)
    answers with the summary padded by blank lines and spaces. Must hold: the summary
    written is the text alone, the block exactly header, summary and marker line.
    Kills compaction.py ``_summarise.read``: ``return got.strip()`` as ``return got``."""
    got = compact(_history(), budget_tokens=60, keep_last_turns=1, summarizer=Padded())
    assert got.compacted and got.summary == "Order 1234 refunded; ticket 77 closed."
    assert got.messages[0]["content"][0] == summary_block(got.summary)
