"""Token figures no request could have cost (audit 49c).

The real anthropic SDK against the local Messages API fake, the real MiniLM embedder and,
for the receipt, the real pipeline on the embedded SQLite store. Since audit 43n a count
that is no count (NaN, text, below 0) reads as missing and is estimated, counted
``model_usage_estimated``. A count of the right type that the request cannot have cost
was still taken as given, into the run receipt's model figures (write-once evidence):

- ``input_tokens`` of 10**30 for a request of a few kilobytes (a token is at least one
  byte of what is sent; the API adds a tool prompt of a few hundred tokens);
- ``output_tokens`` over the request's ``max_tokens`` (the API stops there);
- ``output_tokens`` missing beside a good ``input_tokens``: counted 0 for an answer that
  holds a tool call, and not marked estimated.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memlife.consolidate.estimate import estimate_input_tokens
from memlife.pipeline import RunConfig, run_local
from tests.fakes.messages_api import raw_reply
from tests.unit.test_consolidation_adversarial import (  # noqa: F401  (emb, run_env: fixtures)
    COFFEE,
    NIGHT,
    PAIR,
    _make,
    _seed,
    emb,
    rec,
    run_env,
)
from tests.unit.test_model_message_fields import body

MAX_TOKENS = 512  # _make's


@pytest.mark.parametrize(
    "usage",
    [
        {"input_tokens": 10**30, "output_tokens": 40},
        {"input_tokens": 300, "output_tokens": 10**12},
        {"input_tokens": 300, "output_tokens": MAX_TOKENS + 1},
        {"input_tokens": 300},
    ],
    ids=["input-10e30", "output-10e12", "output-over-max-tokens", "output-missing"],
)
def test_a_count_the_request_cannot_have_cost_is_estimated(messages_server, emb, usage) -> None:  # noqa: F811
    """The answer stands (it is the model's good one); its figures are estimates, within
    what the request can cost, and say so."""
    messages_server.enqueue(raw_reply(body(usage=usage)))
    c = _make(messages_server, emb)
    result = c.consolidate(PAIR)
    assert result.usage_estimated
    assert 0 < result.input_tokens <= 2 * estimate_input_tokens(PAIR)
    assert 0 < result.output_tokens <= MAX_TOKENS
    assert (c.usage.input_tokens, c.usage.output_tokens) == (
        result.input_tokens,
        result.output_tokens,
    )


@pytest.mark.parametrize(
    "usage",
    [
        {"input_tokens": 300, "output_tokens": 40},
        {"input_tokens": 300, "output_tokens": MAX_TOKENS},
        {"input_tokens": 300, "output_tokens": 0},
    ],
    ids=["plain", "output-at-max-tokens", "output-zero"],
)
def test_a_count_the_request_can_have_cost_is_taken_as_given(messages_server, emb, usage) -> None:  # noqa: F811
    """Control: figures within the request's reach are the service's word."""
    messages_server.enqueue(raw_reply(body(usage=usage)))
    c = _make(messages_server, emb)
    result = c.consolidate(PAIR)
    assert not result.usage_estimated
    assert (result.input_tokens, result.output_tokens) == (300, usage["output_tokens"])


def _night() -> dict[str, Any]:
    summary = run_local(RunConfig(dry_run=False, now=NIGHT))
    receipt: dict[str, Any] = json.loads(Path(str(summary.receipt)).read_text())
    return receipt


def test_the_receipt_never_claims_a_cost_no_request_had(run_env: Path, messages_server) -> None:  # noqa: F811
    """The night merges the pair on the model's answer; the receipt's input tokens are the
    estimate of the one request sent (counted estimated), not the proxy's 10**30."""
    _seed(run_env, [rec("b-1", COFFEE, 1), rec("b-2", COFFEE, 6)])
    usage = {"input_tokens": 10**30, "output_tokens": 40}
    messages_server.set_handler(lambda _: raw_reply(body(usage=usage)))
    receipt = _night()
    assert receipt["status"] == "success"
    assert receipt["model"]["calls"] == 1
    assert receipt["other_counts"].get("model_usage_estimated") == 1
    assert 0 < receipt["model"]["input_tokens"] < 100_000
