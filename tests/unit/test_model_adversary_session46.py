"""The consolidation model as an adversary (session 46, audit 46d).

The real anthropic SDK against the local Messages API fake, the real MiniLM embedder and,
where the run's fate is the point, the real pipeline on the embedded SQLite store. Each
answer breaks the contract the request sets (a forced tool call under ``max_tokens``, the
tool's JSON schema): it must be refused with a content-free code, the originals untouched,
and never end the run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.consolidate import ConsolidationError
from memlife.consolidate.prompts import TOOL_NAME
from memlife.embed import MiniLMEmbedder, default_embedder
from tests.fakes.messages_api import MessagesServer, Reply, raw_reply, tool_use_reply
from tests.unit.test_consolidation_adversarial import (
    COFFEE,
    NIGHT,
    PAIR,
    T0,
    CountingEmbedder,
    _make,
    _run,
    _seed,
    _state,
    rec,
    run_env,  # noqa: F401 - the pipeline tests' fixture
)

GOOD: dict[str, Any] = {
    "summary": COFFEE,
    "claims": [COFFEE],
    "confidence": 0.9,
    "source_ids": ["b-1", "b-2"],
}


@pytest.fixture(name="messages_server")
def _messages_server() -> Iterator[MessagesServer]:
    with MessagesServer() as server:
        yield server


@pytest.fixture(scope="module")
def emb() -> MiniLMEmbedder:
    return default_embedder()


def _nested_input() -> Reply:
    """A message whose tool input nests past the JSON decoder's recursion limit."""
    call = {"type": "tool_use", "id": "toolu_1", "name": TOOL_NAME, "input": "@"}
    message = {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
        "content": [call], "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }  # fmt: skip
    deep = '{"summary": ' + "[" * 100_000 + "]" * 100_000 + "}"
    return raw_reply(json.dumps(message).replace('"@"', deep))


@pytest.mark.parametrize(
    "reply",
    [raw_reply("[" * 100_000), _nested_input()],
    ids=["nested-body", "nested-tool-input"],
)
def test_a_body_nested_past_the_decoder_s_limit_is_the_model_unavailable(
    messages_server: MessagesServer, emb: MiniLMEmbedder, reply: Reply
) -> None:
    """A proxy (or a hostile endpoint) answers 200 with JSON nested 100,000 deep: the SDK's
    ``json.loads`` raises RecursionError. It must be what any body that is no message is:
    MODEL_UNAVAILABLE, retryable, nobody blamed, and nothing of the body in the message."""
    messages_server.enqueue(reply)
    with pytest.raises(ConsolidationError) as info:
        _make(messages_server, emb).consolidate(PAIR)
    assert info.value.code == "MODEL_UNAVAILABLE" and info.value.retryable


def test_a_nested_body_does_not_end_the_run(run_env: Path, messages_server) -> None:  # noqa: F811
    """The endpoint answers every group with a body nested past the decoder's limit, every
    night. The run must go on: another actor's hard-expired record is deleted (an
    obligation), the group's originals stay active, the failure is counted as the model's."""
    expired = rec("e-1", "Old event.", 1, subject="ev", actor="u-2", ns="facts",
                  expires_at=T0 + timedelta(days=2))  # fmt: skip
    _seed(run_env, [rec("b-1", COFFEE, 1), rec("b-2", COFFEE, 6), expired])
    messages_server.set_handler(lambda body: raw_reply("[" * 100_000))
    receipt = _run(NIGHT)
    state = _state(run_env)
    assert "e-1" not in state
    assert {i: r.status.value for i, r in state.items()} == {"b-1": "active", "b-2": "active"}
    assert receipt["other_counts"]["consolidation_model_unavailable"] == 1


def test_an_answer_of_hundreds_of_claims_is_refused_before_embedding(
    messages_server: MessagesServer, emb: MiniLMEmbedder
) -> None:
    """The model answers a two-record group with 500 claims (about 4,500 tokens under a
    ``max_tokens`` of 512: no real answer), each a copy of a true one. A summary that long
    is OVERSIZED_RESULT before anything is embedded; so must the claims be, or a hostile
    endpoint sets the embedding work (and the lease's hold) per group."""
    messages_server.enqueue(tool_use_reply(TOOL_NAME, {**GOOD, "claims": [COFFEE] * 500}))
    counting = CountingEmbedder(emb)
    with pytest.raises(ConsolidationError) as info:
        _make(messages_server, counting).consolidate(PAIR)  # type: ignore[arg-type]
    assert info.value.code == "OVERSIZED_RESULT" and not info.value.retryable
    assert counting.texts == 0


def test_a_confidence_of_true_is_refused_not_read_as_one(
    messages_server: MessagesServer, emb: MiniLMEmbedder
) -> None:
    """The tool's schema asks for a number; the model answers ``"confidence": true``. Import
    and ``remember`` refuse a bool as confidence; the model's answer must too (SCHEMA_INVALID
    naming the field), not write a replacement that claims full confidence."""
    messages_server.enqueue(tool_use_reply(TOOL_NAME, {**GOOD, "confidence": True}))
    with pytest.raises(ConsolidationError) as info:
        _make(messages_server, emb).consolidate(PAIR)
    assert info.value.code == "SCHEMA_INVALID" and "confidence" in str(info.value)


def test_a_faithful_answer_still_passes(messages_server: MessagesServer, emb: MiniLMEmbedder) -> None:  # fmt: skip
    """The same answer with a number as confidence and one claim a sentence is taken: the
    refusals above are about the contract, not the content."""
    messages_server.enqueue(tool_use_reply(TOOL_NAME, {**GOOD, "confidence": 1}))
    result = _make(messages_server, emb).consolidate(PAIR)
    assert result.summary == COFFEE and result.confidence == 1.0


def test_json_labelled_pages_in_a_row_stop_the_run_sending(
    messages_server: MessagesServer, emb: MiniLMEmbedder
) -> None:
    """A gateway answers every request 200 with a page labelled ``application/json`` that is
    no JSON (the SDK's decoder raises in ``_call``, not in ``_answer``). After OUTAGE_CALLS
    groups in a row found no message, later groups of the run are not sent: a broken
    gateway must not cost a request per group, whichever branch meets its page."""
    from memlife.consolidate.anthropic import OUTAGE_CALLS

    messages_server.set_handler(lambda body: raw_reply("<html>502 Bad Gateway</html>"))
    c = _make(messages_server, emb)
    for _ in range(OUTAGE_CALLS + 3):
        with pytest.raises(ConsolidationError) as info:
            c.consolidate(PAIR)
        assert info.value.code == "MODEL_UNAVAILABLE" and info.value.retryable
    assert len(messages_server.message_requests) == OUTAGE_CALLS
