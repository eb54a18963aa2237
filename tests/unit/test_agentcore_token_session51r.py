"""Audit 51r: a throttled resend with a new token (audit 51ii) after a lost answer.

51ii gave our own resend of items the service answered 429 a new ``clientToken``: the
service replays a token's first answer, so the same token got the same 429s. But a
request-level ``ThrottledException`` is also turned into per-item 429s, and that one can
follow a request the service *did* carry out: the first BatchCreate creates the record,
its answer is lost (a 500, a reset connection), botocore resends the very request, and
the service, throttling now, answers 429 until botocore gives up. The throttle is checked
before the request is looked at (the fake's order, and any API front door's), so the
token never had its chance to deduplicate. memlife then resent the items under a new
token: the record was created a second time, two AgentCore records carrying one memlife
id (one the sidecar names, one an orphan whose text stays).

Control: the same lost answer and a throttle of a request that never got through (429
on the first send) still writes the record once.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from memlife.model import MemoryRecord
from memlife.stores.agentcore import AgentCoreStore
from tests.fakes.agentcore import AgentCoreHarness, ApiError, FakeAgentCore, _Script

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def rec(rid: str) -> MemoryRecord:
    return MemoryRecord(id=rid, actor_id="u1", namespace="/users/u1", memory_type="semantic",
                        content=f"fact {rid}", created_at=T0)  # fmt: skip


@pytest.fixture(scope="module")
def harness() -> Iterator[AgentCoreHarness]:
    h = AgentCoreHarness()  # botocore: standard mode, 3 attempts
    yield h
    h.close()


@pytest.fixture
def ac(harness: AgentCoreHarness) -> tuple[AgentCoreStore, FakeAgentCore]:
    return harness.store(), harness.fake


def ours(fake: FakeAgentCore, memlife_id: str) -> list[str]:
    with fake.lock:
        return [rid for rid, r in fake.records.items()
                if ((r.get("metadata") or {}).get("memlife_id") or {}).get("stringValue")
                == memlife_id]  # fmt: skip


def _lost_then_throttled(
    fake: FakeAgentCore, monkeypatch: pytest.MonkeyPatch, *, create: bool
) -> None:
    """The first BatchCreate is carried out (``create``) or not, its answer lost (500); the
    service then throttles the next three requests (botocore's resends: the harness allows
    3 retries), so the throttle reaches memlife."""
    real = fake._op_BatchCreate
    done: list[bool] = []

    def answer(body: dict[str, Any], query: dict[str, Any], groups: tuple[str, ...]) -> Any:
        if done:
            return real(body, query, groups)
        done.append(True)
        if create:
            real(body, query, groups)
        # the fake's lock is held here: the throttle is scripted in place
        fake._throttle.append(_Script("BatchCreate", 3))
        raise ApiError(500, "ServiceException", "answer lost")

    monkeypatch.setattr(fake, "_op_BatchCreate", answer)


def test_a_lost_create_answer_then_a_throttle_creates_the_record_once(
    ac: tuple[AgentCoreStore, FakeAgentCore], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, fake = ac
    _lost_then_throttled(fake, monkeypatch, create=True)
    res = store.put_many([rec("r1")])
    assert res.succeeded == ["r1"], [(f.id, f.code) for f in res.failed]
    assert len(ours(fake, "r1")) == 1, "two AgentCore records carry one memlife id"


def test_control_a_throttle_of_a_request_never_carried_out_still_writes_once(
    ac: tuple[AgentCoreStore, FakeAgentCore], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, fake = ac
    _lost_then_throttled(fake, monkeypatch, create=False)
    res = store.put_many([rec("r2")])
    assert res.succeeded == ["r2"], [(f.id, f.code) for f in res.failed]
    assert len(ours(fake, "r2")) == 1
