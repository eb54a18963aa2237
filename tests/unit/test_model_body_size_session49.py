"""An answer's body is read whole into memory: how large may it be? (audit 49c)

The real anthropic SDK against the local Messages API fake. The SDK asked for
``gzip, deflate`` and read any body, compressed or not, whole into memory before parsing
it; the request deadline bounds the time, not the size. A 255 KB gzip body decoding to
256 MiB of JSON (a message padded with whitespace) was read and accepted, the process's
peak memory 517 MB higher: a 10 MB answer from a hostile or broken endpoint (or four at
once, the model concurrency) is tens of GB, and the night is killed for memory with no
receipt. A Messages API answer is at most ``max_tokens`` of text: a few hundred KB.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator

import pytest

from memlife.consolidate import ConsolidationError
from memlife.consolidate.prompts import TOOL_NAME
from memlife.embed import MiniLMEmbedder, default_embedder
from tests.fakes.messages_api import MessagesServer, raw_reply
from tests.unit.test_consolidation_adversarial import COFFEE, PAIR, _make

MIB = 1 << 20
GOOD = {"summary": COFFEE, "claims": [COFFEE], "confidence": 0.9, "source_ids": ["b-1", "b-2"]}
MESSAGE = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
    "content": [{"type": "tool_use", "id": "tu_1", "name": TOOL_NAME, "input": GOOD}],
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 300, "output_tokens": 40},
}  # fmt: skip


@pytest.fixture(name="messages_server")
def _messages_server() -> Iterator[MessagesServer]:
    with MessagesServer() as server:
        yield server


@pytest.fixture(scope="module")
def emb() -> MiniLMEmbedder:
    return default_embedder()


def _padded(mib: int) -> Iterator[bytes]:
    """The good answer followed by ``mib`` MiB of whitespace: still one JSON message."""
    yield json.dumps(MESSAGE).encode()
    for _ in range(mib):
        yield b" " * MIB


def _gzip(chunks: Iterator[bytes]) -> bytes:
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return b"".join([*(z.compress(c) for c in chunks), z.flush()])


def _refused(server: MessagesServer, emb: MiniLMEmbedder) -> ConsolidationError:
    c = _make(server, emb, timeout=30.0)
    with pytest.raises(ConsolidationError) as info:
        c.consolidate(PAIR)
    return info.value


def test_a_compressed_body_is_never_decoded_past_a_bound(messages_server, emb) -> None:
    """A 200 whose gzip body (about 64 KB) decodes to 64 MiB: the service was not reached
    as the Messages API answers (MODEL_UNAVAILABLE, retried, no group blamed)."""
    body = _gzip(_padded(64))
    assert len(body) < MIB
    messages_server.enqueue(raw_reply(body, headers={"content-encoding": "gzip"}))
    exc = _refused(messages_server, emb)
    assert exc.code == "MODEL_UNAVAILABLE" and exc.retryable


def test_a_body_far_over_any_answer_is_refused(messages_server, emb) -> None:
    messages_server.enqueue(raw_reply(b"".join(_padded(32))))
    exc = _refused(messages_server, emb)
    assert exc.code == "MODEL_UNAVAILABLE" and exc.retryable


def test_the_request_asks_for_an_answer_as_sent(messages_server, emb) -> None:
    """Compression is what lets a few KB on the wire become GB in memory: none is asked."""
    messages_server.enqueue(raw_reply(json.dumps(MESSAGE)))
    _make(messages_server, emb).consolidate(PAIR)
    assert messages_server.message_requests[0].headers["accept-encoding"] == "identity"


def test_an_answer_of_a_plausible_size_is_read(messages_server, emb) -> None:
    """Control: an answer with a megabyte of whitespace around it is still the answer."""
    messages_server.enqueue(raw_reply(b"".join(_padded(1))))
    result = _make(messages_server, emb).consolidate(PAIR)
    assert result.summary == COFFEE and result.source_ids == ["b-1", "b-2"]


def test_a_gateway_that_gzips_anyway_is_still_read(messages_server, emb) -> None:
    """Control (session 49, on integrating audit 49c): a gateway that ignores ``identity``
    and gzips a plausible answer is decoded here, within the bound, not refused."""
    messages_server.enqueue(
        raw_reply(_gzip(iter([json.dumps(MESSAGE).encode()])), headers={"content-encoding": "gzip"})
    )
    result = _make(messages_server, emb).consolidate(PAIR)
    assert result.summary == COFFEE and result.source_ids == ["b-1", "b-2"]


@pytest.mark.parametrize(
    ("body", "encoding"),
    [(b"\x1f\x8b\x08\x00 not gzip at all", "gzip"), (b"GOOD", "br"), (b"GOOD", "zstd")],
    ids=["damaged-gzip", "brotli", "zstd"],
)
def test_a_body_that_cannot_be_read_within_the_bound_is_unavailable(
    messages_server, emb, body: bytes, encoding: str
) -> None:
    """A damaged gzip body, or an encoding whose decoder this transport cannot bound."""
    messages_server.enqueue(raw_reply(body, headers={"content-encoding": encoding}))
    exc = _refused(messages_server, emb)
    assert exc.code == "MODEL_UNAVAILABLE" and exc.retryable
