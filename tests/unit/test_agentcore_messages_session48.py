"""Session 48 (audit 48e): AgentCore's refusals never carry memory content into memlife's results.

The service's ValidationException quotes what it refused ("Value '<the text>' at
'records.1.member.content.text' failed to satisfy constraint"). memlife withholds that
message when it raises (``errors.store_error``); a refused batch is also bisected down to
the record, and that record's ``ItemFailure.message`` goes on to ``remember``'s and the
LangGraph adapter's RuntimeError (logs) and to the run's failure lists.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from memlife.model import MemoryRecord
from memlife.stores.agentcore import AgentCoreStore
from tests.fakes.agentcore import AgentCoreHarness, ApiError, FakeAgentCore

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SECRET = "diagnosed with hepatitis C in March"


def rec(content: str, **kw: Any) -> MemoryRecord:
    fields: dict[str, Any] = {
        "id": "r1",
        "actor_id": "u1",
        "namespace": "/users/u1",
        "memory_type": "semantic",
        "content": content,
        "created_at": T0,
        **kw,
    }
    return MemoryRecord(**fields)


@pytest.fixture(scope="module")
def harness() -> Iterator[AgentCoreHarness]:
    h = AgentCoreHarness()
    yield h
    h.close()


@pytest.fixture
def ac(harness: AgentCoreHarness) -> tuple[AgentCoreStore, FakeAgentCore]:
    return harness.store(), harness.fake


def quoting_refusal(fake: FakeAgentCore, op: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake refuses every ``op`` request naming SECRET as the service does: the whole
    request, its message quoting the value."""
    real = getattr(fake, f"_op_{op}")

    def refuse(body: dict[str, Any], query: dict[str, Any], groups: tuple[str, ...]) -> Any:
        for r in body.get("records") or []:
            if SECRET in ((r.get("content") or {}).get("text") or ""):
                raise ApiError(
                    400,
                    "ValidationException",
                    f"1 validation error detected: Value '{r['content']['text']}' at "
                    "'records.1.member.content.text' failed to satisfy constraint",
                    reason="FieldValidationFailed",
                )
        return real(body, query, groups)

    monkeypatch.setattr(fake, f"_op_{op}", refuse)


@pytest.mark.parametrize("op", ["BatchCreate", "BatchUpdate"])
def test_a_refusal_quoting_the_record_is_not_the_items_message(
    ac: tuple[AgentCoreStore, FakeAgentCore], monkeypatch: pytest.MonkeyPatch, op: str
) -> None:
    """A batch of two records, one of which the service refuses with a message quoting
    its text: the other is written, the refused one fails VALIDATION (not retried), and
    nothing memlife hands back about it holds the text."""
    store, fake = ac
    if op == "BatchUpdate":
        store.put_many([rec("likes tea"), rec("likes coffee", id="r2")])
    quoting_refusal(fake, op, monkeypatch)
    res = store.put_many([rec(f"{SECRET}, says the user"), rec("likes green tea", id="r2")])
    assert res.succeeded == ["r2"]
    [failure] = res.failed
    assert (failure.id, failure.code, failure.retryable) == ("r1", "VALIDATION", False)
    assert SECRET not in failure.message
