"""A 409 from the Messages API is the service's, not the group's (audit 43n).

The SDK retries 408, 409, 429 and 5xx as transient; the consolidator must read a 409
that survives those retries as MODEL_UNAVAILABLE (retryable, nobody blamed, counted in the
outage streak), never MODEL_REJECTED, which backs the group off and after MAX_REJECTIONS
nights parks it in review for good although the model never answered it. Guards
``anthropic._RETRYABLE_STATUS`` (no other test sends a 409).
"""

from __future__ import annotations

import pytest

from memlife.consolidate import ConsolidationError
from memlife.consolidate.anthropic import AnthropicConsolidator
from tests.fakes.messages_api import error_reply
from tests.unit.test_consolidation_adversarial import PAIR, emb  # noqa: F401


def test_a_conflict_status_is_the_services_failure_not_the_groups(messages_server, emb) -> None:  # noqa: F811
    """The service answers 409 twice: the SDK's own retry, then the consolidator. The
    group is left as it was, the failure is retryable, and both requests are counted."""
    conflict = error_reply(409, "conflict_error", "Conflict")
    messages_server.enqueue(conflict, conflict)
    before = [r.model_dump() for r in PAIR.records]
    c = AnthropicConsolidator(model="claude-haiku-4-5", max_tokens=512, max_retries=1,
                              base_url=messages_server.base_url, api_key="sk-ant-fake",
                              embedder=emb, timeout=5.0)  # fmt: skip
    with pytest.raises(ConsolidationError) as info:
        c.consolidate(PAIR)
    assert info.value.code == "MODEL_UNAVAILABLE" and info.value.retryable
    assert [r.model_dump() for r in PAIR.records] == before
    assert len(messages_server.message_requests) == 2 == c.usage.calls
