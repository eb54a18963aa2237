"""Audit 49m1 (mutation pass over session 49): the encodings the deadline transport decodes.

Audit 49c decodes, within ``MAX_BODY_BYTES``, an answer a gateway compressed although
``identity`` was asked (refusing it would fail every group behind such a gateway). An
encoding name is case-insensitive (RFC 9110) and may carry spaces, and ``deflate`` is one
of the encodings decoded: each read as the good answer it is. Kills ``content-encoding``
compared as sent, and ``deflate`` left out. Real SDK against the local Messages API fake.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator

import pytest

from tests.fakes.messages_api import MessagesServer, raw_reply
from tests.unit.test_consolidation_adversarial import COFFEE, PAIR, _make
from tests.unit.test_model_body_size_session49 import (  # noqa: F401  (fixtures)
    MESSAGE,
    _gzip,
    _padded,
    _refused,
    emb,
)


@pytest.fixture(name="messages_server")
def _messages_server() -> Iterator[MessagesServer]:
    with MessagesServer() as server:
        yield server


@pytest.mark.parametrize(
    ("encoding", "body"),
    [
        ("GZIP", _gzip(iter([json.dumps(MESSAGE).encode()]))),
        (" gzip ", _gzip(iter([json.dumps(MESSAGE).encode()]))),
        ("deflate", zlib.compress(json.dumps(MESSAGE).encode())),
    ],
    ids=["upper-case", "spaced", "deflate"],
)
def test_a_compressed_answer_in_any_spelling_of_its_encoding_is_read(
    messages_server: MessagesServer,
    emb,  # noqa: F811
    encoding: str,
    body: bytes,
) -> None:
    messages_server.enqueue(raw_reply(body, headers={"content-encoding": encoding}))
    result = _make(messages_server, emb).consolidate(PAIR)
    assert result.summary == COFFEE and result.source_ids == ["b-1", "b-2"]


def test_a_deflate_body_is_never_decoded_past_the_bound(
    messages_server: MessagesServer,
    emb,  # noqa: F811
) -> None:
    """As gzip's: 64 MiB behind a few dozen KB of deflate is cut off at the bound."""
    body = zlib.compress(b"".join(_padded(64)), 9)
    messages_server.enqueue(raw_reply(body, headers={"content-encoding": "deflate"}))
    exc = _refused(messages_server, emb)
    assert exc.code == "MODEL_UNAVAILABLE" and exc.retryable
