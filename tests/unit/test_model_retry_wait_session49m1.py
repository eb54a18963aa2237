"""Audit 49m1 (mutation pass over session 49): ``deadline._asked_wait`` reads the wait
headers in the SDK's order.

An answer may carry both ``retry-after-ms`` and ``retry-after``; the SDK takes the
milliseconds first. The transport rewrites both into one ``retry-after-ms``, so it must
read them in that order too, or a 250 ms wait the service asked for becomes the other
header's 1.5 s. Real SDK against the local Messages API fake; the SDK's sleep recorded.
"""

from __future__ import annotations

from tests.fakes.messages_api import MessagesServer
from tests.unit.test_model_retry_wait_session49 import (  # noqa: F401  (fixtures)
    _RecordingClock,
    _refused,
    _run,
    clock,
    emb,
)


def test_retry_after_ms_is_read_before_retry_after_as_the_sdk_does(
    messages_server: MessagesServer,  # noqa: F811
    emb,  # noqa: F811
    clock: _RecordingClock,  # noqa: F811
) -> None:
    _run(messages_server, emb, _refused(429, {"retry-after-ms": "250", "retry-after": "1.5"}))
    assert clock.waits == [0.25, 0.25]


def test_an_unreadable_retry_after_ms_falls_back_to_retry_after(
    messages_server: MessagesServer,  # noqa: F811
    emb,  # noqa: F811
    clock: _RecordingClock,  # noqa: F811
) -> None:
    _run(messages_server, emb, _refused(429, {"retry-after-ms": "soon", "retry-after": "1.5"}))
    assert clock.waits == [1.5, 1.5]
