"""A model's answer never reaches an error message.

A ConsolidationError's message is held to "codes and indices only" (its code goes into
receipts; ``test_consolidate_anthropic.py::test_claim_in_no_source_is_rejected``), and the
evaluation set names a key it does not know by its place, never its text
(``evalset._part``). The model's own answer is the adversary here: real anthropic SDK
against the local Messages API fake.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memlife.consolidate import ConsolidationError
from memlife.consolidate.prompts import TOOL_NAME
from memlife.embed import MiniLMEmbedder, default_embedder
from tests.fakes.messages_api import MessagesServer, Reply, message_reply
from tests.unit.test_consolidate_anthropic import COFFEE, GOOD, answer, make

SECRET = "Diagnosed with hepatitis C in March"


@pytest.fixture(name="messages_server")
def _messages_server() -> Iterator[MessagesServer]:
    with MessagesServer() as server:
        yield server


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return default_embedder()


def _stopped_as(reason: str) -> Reply:
    call = {"type": "tool_use", "id": "toolu_1", "name": TOOL_NAME, "input": GOOD}
    return message_reply([call], stop_reason=reason)


@pytest.mark.parametrize(
    "reply",
    [answer({**GOOD, SECRET: True}), _stopped_as(SECRET)],
    ids=["unknown-key", "unknown-stop-reason"],
)
def test_a_schema_refusal_never_quotes_the_models_answer(
    messages_server: MessagesServer, embedder: MiniLMEmbedder, reply: Reply
) -> None:
    """The model answers with memory text as a key of its tool input (or the answer comes
    back with it as its stop reason): the answer is refused SCHEMA_INVALID, and the
    refusal names the place, never the text."""
    messages_server.enqueue(reply)
    with pytest.raises(ConsolidationError) as info:
        make(messages_server, embedder).consolidate(COFFEE)
    assert info.value.code == "SCHEMA_INVALID" and not info.value.retryable
    assert "hepatitis" not in str(info.value)
    assert "<key>" in str(info.value) or "<other>" in str(info.value)
