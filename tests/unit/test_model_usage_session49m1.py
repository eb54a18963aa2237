"""Audit 49m1 (mutation pass over session 49): ``anthropic._usage``'s bounds, edge by edge.

Kills, one each: an input count of 0 taken as given (every request has input: a proxy's
``0`` is no count); the input bound dropped or made strict; the output bound made strict
(``max_tokens`` itself is what a truncated answer costs); the estimate of a missing output
not capped at ``max_tokens``. Real SDK against the local Messages API fake.
"""

from __future__ import annotations

import json

import pytest

from memlife.consolidate.anthropic import _API_PROMPT_TOKENS
from tests.fakes.messages_api import raw_reply
from tests.unit.test_consolidation_adversarial import PAIR, _make
from tests.unit.test_consolidation_adversarial import emb as emb  # noqa: F401  (a fixture)
from tests.unit.test_model_message_fields import body

MAX_TOKENS = 512  # _make's


def _sent(c) -> int:  # noqa: ANN001
    """What `_usage` allows as input: the request's UTF-8 bytes and the API's prompt."""
    request = c._request(PAIR)
    return len(json.dumps(request, ensure_ascii=False).encode()) + _API_PROMPT_TOKENS


def test_an_input_count_of_zero_is_no_count(messages_server, emb) -> None:  # noqa: F811
    messages_server.enqueue(raw_reply(body(usage={"input_tokens": 0, "output_tokens": 40})))
    result = _make(messages_server, emb).consolidate(PAIR)
    assert result.usage_estimated and result.input_tokens > 0
    assert result.output_tokens == 40  # the output figure was within reach: kept


@pytest.mark.parametrize("over", [0, 1])
def test_the_input_bound_is_the_request_s_bytes_and_the_api_prompt(
    messages_server,
    emb,  # noqa: F811
    over: int,
) -> None:
    c = _make(messages_server, emb)
    most = _sent(c)
    messages_server.enqueue(
        raw_reply(body(usage={"input_tokens": most + over, "output_tokens": 40}))
    )
    result = c.consolidate(PAIR)
    assert result.usage_estimated is bool(over)
    assert (result.input_tokens == most) is not bool(over)


def test_a_missing_output_beside_good_input_is_estimated_within_max_tokens(
    messages_server,
    emb,  # noqa: F811
) -> None:
    """The answer's text estimated at 4 characters a token, never past ``max_tokens``."""
    answer = json.loads(body())["content"][0]
    content = [{"type": "text", "text": "x" * (8 * MAX_TOKENS)}, answer]  # a long preamble
    messages_server.enqueue(raw_reply(body(usage={"input_tokens": 300}, content=content)))
    result = _make(messages_server, emb).consolidate(PAIR)
    assert result.usage_estimated
    assert (result.input_tokens, result.output_tokens) == (300, MAX_TOKENS)


def test_a_good_output_count_beside_an_impossible_input_is_kept(messages_server, emb) -> None:  # noqa: F811
    """Only the input is estimated: the output figure, within ``max_tokens``, is the
    service's (the answer's own text would estimate far fewer than 500)."""
    usage = {"input_tokens": 10**30, "output_tokens": 500}
    messages_server.enqueue(raw_reply(body(usage=usage)))
    result = _make(messages_server, emb).consolidate(PAIR)
    assert result.usage_estimated and 0 < result.input_tokens < 10**6
    assert result.output_tokens == 500
