"""AgentCore store: a create is one attempt (clientToken) and a native record keeps its actor.

* A record written, deleted, then written again with the same values must exist: the
  second create is a new attempt, so the service must not answer it with the first
  create's (deleted) record. A retry of the *same* attempt (botocore's, or ours after a
  crash between BatchCreate and the sidecar) must still create nothing twice.
* An AgentCore ``actorId`` may contain ``/``: a native record is decoded (and written
  back by ``set_status``) with the actor its namespace template names, never a made-up
  one; when nothing names it, the store refuses.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from memlife.model import MemoryRecord, Status
from memlife.stores.agentcore import AgentCoreStore
from memlife.stores.agentcore.namespaces import Strategies
from memlife.stores.base import StoreError
from tests.fakes.agentcore import AgentCoreHarness, ApiError, FakeAgentCore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def rec(content: str = "likes tea", **kw: Any) -> MemoryRecord:
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


def pending_item(store: AgentCoreStore, key: str = "r1") -> dict[str, Any]:
    got = store.sidecar.client.get_item(
        TableName=store.sidecar.table, Key={"pk": {"S": f"rec#{key}"}, "sk": {"S": "rec"}}
    )
    item: dict[str, Any] = got["Item"]
    return item


# -- create attempts ------------------------------------------------------------------------
def put_crashing_at_sidecar_write(store: AgentCoreStore, r: MemoryRecord, call: int) -> None:
    """``store.put_many([r])`` with the sidecar's ``call``-th write raising (a crash between
    steps); the sidecar is restored afterwards."""
    real_put = store.sidecar.put_many
    calls: list[int] = []

    def crash(items: Any) -> dict[str, str]:
        calls.append(len(items))
        if len(calls) == call:
            raise RuntimeError("crash")
        return real_put(items)

    store.sidecar.put_many = crash  # type: ignore[method-assign]
    try:
        with pytest.raises(RuntimeError, match="^crash$"):
            store.put_many([r])
        assert len(calls) == call  # the crash is the one injected, at the asked step
    finally:
        store.sidecar.put_many = real_put  # type: ignore[method-assign]


def test_written_deleted_written_again_exists(ac: tuple[AgentCoreStore, FakeAgentCore]) -> None:
    store, fake = ac
    r = rec()
    assert store.put_many([r]).succeeded == ["r1"]
    assert store.delete_many(["r1"]).succeeded == ["r1"]
    assert store.put_many([r]).succeeded == ["r1"]
    assert len(fake.records) == 1
    assert store.get("r1") == r
    assert [x.id for x in store.page("u1", "/users/u1").records] == ["r1"]
    tokens = [p["clientToken"] for p in fake.ops("create")]
    assert len(tokens) == 2 and tokens[0] != tokens[1]
    item = store.sidecar.get("r1")
    assert item is not None and item.memory_record_id in fake.records


def test_deleted_behind_our_back_is_recreated_with_a_new_attempt(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    store, fake = ac
    r = rec()
    store.put_many([r])
    with fake.lock:
        fake.records.clear()  # e.g. the service's own expiry; the sidecar still points at it
    assert store.put_many([r]).succeeded == ["r1"]  # update 404 -> create
    assert len(fake.records) == 1
    assert store.get("r1") == r
    tokens = [p["clientToken"] for p in fake.ops("create")]
    assert len(tokens) == 2 and tokens[0] != tokens[1]


def test_recreate_after_404_is_pending_first(ac: tuple[AgentCoreStore, FakeAgentCore]) -> None:
    """A crash right after the re-create leaves a pending item: recovered, not duplicated."""
    store, fake = ac
    r = rec()
    store.put_many([r])
    with fake.lock:
        fake.records.clear()
    put_crashing_at_sidecar_write(store, r, 3)  # stage, re-stage pending, (crash) new id
    assert pending_item(store)["state"]["S"] == "pending"
    assert store.get("r1") == r
    assert store.put_many([r.model_copy(update={"content": "after crash"})]).succeeded
    assert len(fake.records) == 1
    got = store.get("r1")
    assert got is not None and got.content == "after crash"


def test_botocore_retry_of_a_create_creates_nothing_twice(
    ac: tuple[AgentCoreStore, FakeAgentCore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service created the records but its answer was lost (a 500): botocore resends
    the same request, same clientToken, and the service answers the first create again."""
    store, fake = ac
    real = fake._op_BatchCreate
    lost: list[bool] = []

    def answer_lost(body: dict, query: dict, groups: tuple) -> tuple[int, dict]:
        out = real(body, query, groups)
        if not lost:
            lost.append(True)
            raise ApiError(500, "ServiceException", "answer lost")
        return out

    monkeypatch.setattr(fake, "_op_BatchCreate", answer_lost)
    res = store.put_many([rec(), rec(id="r2")])
    assert sorted(res.succeeded) == ["r1", "r2"] and not res.failed
    assert len(fake.ops("create")) == 2  # sent twice
    assert len({p["clientToken"] for p in fake.ops("create")}) == 1
    assert len(fake.records) == 2
    assert store.get("r1") == rec() and store.get("r2") == rec(id="r2")


def test_retry_after_crash_reuses_the_pending_attempt(
    ac: tuple[AgentCoreStore, FakeAgentCore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Crash between BatchCreate and the sidecar, and the recovery lookup misses the record
    (an eventually consistent listing): the retry is the same attempt, same clientToken,
    so the service answers with the record it created and nothing is created twice."""
    store, fake = ac
    r = rec()
    put_crashing_at_sidecar_write(store, r, 2)  # stage, (crash) record the new id
    item = pending_item(store)
    assert item["state"]["S"] == "pending" and item["create_nonce"]["S"]
    assert len(fake.records) == 1

    monkeypatch.setattr(store.transport, "find_by_key", lambda ns, key: None)
    assert store.put_many([r]).succeeded == ["r1"]
    assert len(fake.records) == 1
    tokens = [p["clientToken"] for p in fake.ops("create")]
    assert len(tokens) == 2 and tokens[0] == tokens[1]
    done = store.sidecar.get("r1")
    assert done is not None and done.memory_record_id in fake.records
    assert "create_nonce" not in pending_item(store)  # a live item carries no attempt
    monkeypatch.undo()
    assert store.get("r1") == r


# -- native records: actors ------------------------------------------------------------------
SLASH_TEMPLATES = [
    {
        "strategyId": "sem1",
        "name": "facts",
        "type": "SEMANTIC",
        "namespaces": ["/users/{actorId}"],
        "status": "ACTIVE",
    }
]


def test_native_record_of_an_actor_with_a_slash_keeps_its_actor(
    harness: AgentCoreHarness,
) -> None:
    store, fake = harness.store(strategies=SLASH_TEMPLATES), harness.fake
    fake.add_actor("org/u1")
    rid = fake.add_native_record("/users/org/u1", "prefers window seats", strategy_id="sem1")
    assert store.list_namespaces("org/u1") == ["/users/org/u1"]
    assert [r.actor_id for r in store.page("org/u1", "/users/org/u1").records] == ["org/u1"]
    got = store.get(rid)
    assert got is not None and got.actor_id == "org/u1"
    assert store.set_status([rid], Status.quarantined).succeeded == [rid]
    assert fake.records[rid]["metadata"]["actor_id"] == {"stringValue": "org/u1"}
    after = store.page("org/u1", "/users/org/u1").records
    assert [(r.id, r.actor_id, r.status) for r in after] == [(rid, "org/u1", Status.quarantined)]
    assert len(fake.records) == 1


def test_overlapping_templates_put_a_native_record_under_one_actor(
    harness: AgentCoreHarness,
) -> None:
    strategies = [
        {**SLASH_TEMPLATES[0], "namespaces": ["/users/{actorId}"]},
        {**SLASH_TEMPLATES[0], "strategyId": "sem2", "namespaces": ["/users/{actorId}/facts"]},
    ]
    store, fake = harness.store(strategies=strategies), harness.fake
    rid = fake.add_native_record("/users/a/facts", "likes tea", strategy_id="sem2")
    assert [r.id for r in store.page("a", "/users/a/facts").records] == [rid]
    assert store.page("a/facts", "/users/a/facts").records == []
    got = store.get(rid)
    assert got is not None and got.actor_id == "a"


def test_native_record_no_template_names_is_refused(harness: AgentCoreHarness) -> None:
    store, fake = harness.store(strategies=SLASH_TEMPLATES), harness.fake
    rid = fake.add_native_record("/elsewhere/x", "a fact", strategy_id="sem1")
    with pytest.raises(StoreError) as err:
        store.get(rid)
    assert err.value.code == "NATIVE_ACTOR_UNKNOWN" and rid in str(err.value)
    with pytest.raises(StoreError) as err:
        store.set_status([rid], Status.quarantined)
    assert rid in str(err.value)
    assert "metadata" not in fake.records[rid]  # nothing written


@pytest.mark.parametrize(
    ("templates", "namespace", "actor"),
    [
        (["/users/{actorId}"], "/users/u1", "u1"),
        (["/users/{actorId}"], "/users/org/team/u1", "org/team/u1"),
        (["/summaries/{actorId}/{sessionId}"], "/summaries/org/u1/s-1", "org/u1"),
        (["/strategies/{memoryStrategyId}/actors/{actorId}"], "/strategies/s0/actors/a/b", "a/b"),
        # the slot is the template's own strategy id (audit 49ii), never another strategy's
        (["/strategies/{memoryStrategyId}/actors/{actorId}"], "/strategies/s1/actors/a/b", None),
        (["/users/{actorId}", "/users/{actorId}/facts"], "/users/a/facts", "a"),
        (["/users/{actorId}/facts"], "/users/a/prefs", None),
        (["/a/{actorId}/b/{actorId}"], "/a/x/y/b/x/y", "x/y"),
        (["/a/{actorId}/b/{actorId}"], "/a/x/b/y", None),
        (["/users/{actorId}"], "/users/-bad", None),  # not an AgentCore actorId
    ],
)
def test_actor_of_namespace(templates: list[str], namespace: str, actor: str | None) -> None:
    strategies = Strategies(
        {
            "strategies": [
                {"strategyId": f"s{i}", "namespaces": [t]} for i, t in enumerate(templates)
            ]
        }
    )
    assert strategies.actor_of(namespace) == actor
    if actor is not None:
        assert strategies.actor_owns(actor, namespace)
