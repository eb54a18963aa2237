"""Session 49 (left by audit 49c, now fixed): the other two model clients.

Audit 49c bounded the consolidator's requests (the SDK slept as long as a 429's
``retry-after`` said, up to 49 days; a body was read whole at any size). Compaction's
summariser (in the agent's own process) and the gate's model answerer built plain SDK
clients, open to both. They now go through the same deadline transport: a wait is at most
the request's timeout, a body at most ``MAX_BODY_BYTES``.

The SDK's clock is replaced in its own module only (no test sleeps); the network is real:
the real SDK against the local Messages API fake.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import anthropic._base_client as sdk_base
import pytest

from memlife.consolidate.deadline import MAX_BODY_BYTES
from memlife.online.compaction import AnthropicSummarizer
from tests.fakes.messages_api import MessagesServer, error_reply, raw_reply, text_reply
from tests.unit.test_model_retry_wait_session49 import _RecordingClock

DAY = 86_400
TIMEOUT = 2.0


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _RecordingClock:
    """The SDK's sleep, recorded and returned at once (audit 49c's clock)."""
    recording = _RecordingClock()
    monkeypatch.setattr(sdk_base, "time", recording)
    return recording


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[MessagesServer]:
    with MessagesServer() as s:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", s.base_url)
        monkeypatch.setenv("MEMLIFE_MODEL_TIMEOUT", str(TIMEOUT))
        yield s


def _day_long_refusals(server: MessagesServer) -> None:
    refused = error_reply(429, "rate_limit_error", "slow down", headers={"retry-after": str(DAY)})
    server.enqueue(refused, refused, text_reply("Green tea."))


HISTORY = [{"role": "user", "content": "I drink green tea."},
           {"role": "assistant", "content": "Noted."}]  # fmt: skip


def test_the_summariser_waits_no_longer_than_its_timeout(server, clock) -> None:
    _day_long_refusals(server)
    summary = AnthropicSummarizer(timeout=TIMEOUT).summarize(HISTORY)
    assert summary and len(clock.waits) == 2
    assert all(0 < w <= TIMEOUT for w in clock.waits), clock.waits


def test_the_gates_answerer_waits_no_longer_than_the_model_timeout(server, clock) -> None:
    from memlife.gate import model_answerer_from_env

    _day_long_refusals(server)
    answer = model_answerer_from_env()
    assert answer is not None
    assert answer("What does she drink?", ["Drinks green tea."]) == "Green tea."
    assert len(clock.waits) == 2 and all(0 < w <= TIMEOUT for w in clock.waits), clock.waits


def test_the_summariser_never_reads_a_body_past_the_bound(server, clock) -> None:
    padded = json.dumps({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
        "content": [{"type": "text", "text": "Drinks green tea."}], "stop_reason": "end_turn",
        "stop_sequence": None, "usage": {"input_tokens": 30, "output_tokens": 5},
    }).encode() + b" " * (MAX_BODY_BYTES + 1)  # fmt: skip
    server.enqueue(raw_reply(padded), raw_reply(padded), raw_reply(padded))
    with pytest.raises(anthropic.APIConnectionError):
        AnthropicSummarizer(timeout=TIMEOUT).summarize(HISTORY)


def test_control_a_short_wait_is_honoured_as_asked(server, clock) -> None:
    refused = error_reply(429, "rate_limit_error", "slow down", headers={"retry-after": "1"})
    server.enqueue(refused, text_reply("Green tea."))
    assert AnthropicSummarizer(timeout=TIMEOUT).summarize(HISTORY)
    assert clock.waits == [1.0]
