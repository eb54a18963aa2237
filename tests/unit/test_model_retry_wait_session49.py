"""How long the SDK waits between a refused request and its retry (audit 49c).

The real anthropic SDK against the local Messages API fake. A 429, 529 or 5xx answer may
carry ``retry-after`` (seconds or an HTTP date) or ``retry-after-ms``; the SDK pinned in
uv.lock sleeps as long as it is told (up to 49 days), where earlier SDKs waited at most
60 s. ``MEMLIFE_MODEL_TIMEOUT`` bounds each request (consolidate/deadline.py), not the
sleep between two of them: a hostile or broken endpoint answering ``retry-after: 86400``
held the group, a model slot and the store's lease for a day per retry.

The SDK's clock is replaced in its own module only, so that no test sleeps: each wait the
SDK asks for is recorded and returned at once. The network is the real one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from email.utils import formatdate
from typing import Any

import anthropic._base_client as sdk_base
import pytest

from memlife.consolidate import ConsolidationError
from memlife.consolidate.anthropic import AnthropicConsolidator
from memlife.embed import MiniLMEmbedder, default_embedder
from tests.fakes.messages_api import MessagesServer, Reply, error_reply
from tests.unit.test_consolidation_adversarial import PAIR

TIMEOUT = 2.0  # MEMLIFE_MODEL_TIMEOUT of the consolidator under test
DAY = 86_400


class _RecordingClock:
    """The ``time`` module as the SDK's base client sees it, but ``sleep`` only records."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _RecordingClock:
    recording = _RecordingClock()
    monkeypatch.setattr(sdk_base, "time", recording)
    return recording


@pytest.fixture(name="messages_server")
def _messages_server() -> Iterator[MessagesServer]:
    with MessagesServer() as server:
        yield server


@pytest.fixture(scope="module")
def emb() -> MiniLMEmbedder:
    return default_embedder()


def _consolidator(server: MessagesServer, emb: MiniLMEmbedder) -> AnthropicConsolidator:
    # max_retries as from_env leaves it (the SDK's 2)
    return AnthropicConsolidator(
        model="claude-haiku-4-5", max_tokens=512, base_url=server.base_url,
        api_key="sk-ant-fake", embedder=emb, timeout=TIMEOUT,
    )  # fmt: skip


def _refused(status: int, headers: dict[str, str]) -> Reply:
    kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
    return error_reply(status, kind, "try later", headers=headers)


def _run(server: MessagesServer, emb: MiniLMEmbedder, reply: Reply) -> ConsolidationError:
    server.enqueue(reply, reply, reply)  # the request and the SDK's two retries
    c = _consolidator(server, emb)
    with pytest.raises(ConsolidationError) as info:
        c.consolidate(PAIR)
    return info.value


@pytest.mark.parametrize(
    ("status", "headers"),
    [
        (429, {"retry-after": str(DAY)}),
        (529, {"retry-after": str(DAY)}),
        (503, {"retry-after-ms": str(DAY * 1000)}),
        (429, {"retry-after": formatdate(time.time() + 30 * DAY, usegmt=True)}),
        (429, {"retry-after": "inf"}),
    ],
    ids=["429-seconds", "529-seconds", "503-ms", "429-http-date", "429-inf"],
)
def test_a_retry_after_longer_than_a_request_is_not_slept(
    messages_server: MessagesServer,
    emb: MiniLMEmbedder,
    clock: _RecordingClock,
    status: int,
    headers: dict[str, str],
) -> None:
    """The service is unavailable to this group (MODEL_UNAVAILABLE, retried by the next
    run) after the SDK's retries, and no wait between them is longer than one request may
    take: on the old code the SDK slept a day (or 49 days) before each retry."""
    exc = _run(messages_server, emb, _refused(status, headers))
    assert exc.code == "MODEL_UNAVAILABLE" and exc.retryable
    assert exc.requests == 3 and len(messages_server.message_requests) == 3
    assert len(clock.waits) == 2
    assert max(clock.waits) <= TIMEOUT, clock.waits


def test_a_short_retry_after_is_still_honoured(
    messages_server: MessagesServer, emb: MiniLMEmbedder, clock: _RecordingClock
) -> None:
    """Control: a wait shorter than a request is the service's to ask, as given (the real
    API's 429s carry one); without any, the SDK's own back-off (under 8 s) applies."""
    _run(messages_server, emb, _refused(429, {"retry-after": "1.5"}))
    assert clock.waits == [1.5, 1.5]
    clock.waits.clear()
    _run(messages_server, emb, _refused(529, {"retry-after-ms": "250"}))
    assert clock.waits == [0.25, 0.25]
    clock.waits.clear()
    _run(messages_server, emb, _refused(500, {}))
    assert len(clock.waits) == 2 and all(0 < w <= 8 for w in clock.waits)
