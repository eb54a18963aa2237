"""Audit 49ii: AgentCore strategy namespace templates as the service fills them.

AgentCore's own strategies write their records under ``namespaceTemplates`` such as
``/strategies/{memoryStrategyId}/actors/{actorId}`` (semantic, preferences) and
``/strategies/{memoryStrategyId}/actors/{actorId}/sessions/{sessionId}`` (summaries). The
service fills ``{memoryStrategyId}`` with the strategy's own id. Before the fix:

* ``list_namespaces`` resolved a template only when ``{actorId}`` was its one slot, so
  the records the service extracted under its default templates were never listed: never
  paged by a night, never found by ``erase --subject`` (``erase.actor_records``), never
  exported (``iter_all``);
* ``actor_of`` read ``{memoryStrategyId}`` as any segment, so a hostile actor id
  ``u-9/sessions/x`` of the semantic strategy wrote a namespace that the summary
  template reads as u-9's session ``x``: ``get`` decoded that record as u-9's, and a
  status change then wrote ``actor_id = u-9`` into it (tenants mixed).

The fake AgentCore (real boto3 over HTTP) seeds the records as the service's extraction
would (``add_native_record``: no memlife metadata).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from memlife.erase import actor_records
from memlife.model import Status
from memlife.stores.agentcore import AgentCoreStore
from memlife.stores.agentcore.namespaces import Strategies
from tests.fakes.agentcore import AgentCoreHarness, FakeAgentCore

SEM, SUMM = "sem-a1b2c3d4e5", "summ-a1b2c3d4e5"
DEFAULT_TEMPLATES: list[dict[str, Any]] = [
    {
        "strategyId": SEM, "name": "facts", "type": "SEMANTIC", "status": "ACTIVE",
        "namespaces": ["/strategies/{memoryStrategyId}/actors/{actorId}"],
        "namespaceTemplates": ["/strategies/{memoryStrategyId}/actors/{actorId}"],
    },
    {
        "strategyId": SUMM, "name": "summaries", "type": "SUMMARIZATION", "status": "ACTIVE",
        "namespaces": ["/strategies/{memoryStrategyId}/actors/{actorId}/sessions/{sessionId}"],
        "namespaceTemplates": [
            "/strategies/{memoryStrategyId}/actors/{actorId}/sessions/{sessionId}"
        ],
    },
]  # fmt: skip


@pytest.fixture(scope="module")
def harness() -> Iterator[AgentCoreHarness]:
    h = AgentCoreHarness()
    yield h
    h.close()


@pytest.fixture
def ac(harness: AgentCoreHarness) -> tuple[AgentCoreStore, FakeAgentCore]:
    return harness.store(strategies=DEFAULT_TEMPLATES), harness.fake


def test_records_under_the_default_semantic_template_are_listed_and_paged(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    store, fake = ac
    fake.add_actor("u-9")
    ns = f"/strategies/{SEM}/actors/u-9"
    rid = fake.add_native_record(ns, "prefers window seats", strategy_id=SEM)
    fake.add_native_record(f"/strategies/{SEM}/actors/u-8", "not u-9's", strategy_id=SEM)
    assert ns in store.list_namespaces("u-9")
    assert [r.id for r in actor_records(store, "u-9")] == [rid]  # what erase --subject reads
    assert [r.id for r in store.iter_all()] == [rid]  # u-8 has no events: not an actor


def test_session_summaries_the_service_wrote_are_listed_for_their_actor_only(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """Summaries are per session: their namespaces are found under the actor's own part
    of the template (``namespacePath``), each read back to its actor. The actor ``u``
    (a prefix of ``u-9``) and ``u-9/x`` (a longer id) get none of u-9's sessions."""
    store, fake = ac
    mine = [f"/strategies/{SUMM}/actors/u-9/sessions/s-{i}" for i in (1, 2)]
    for ns in mine:
        fake.add_native_record(ns, "talked about the trip", strategy_id=SUMM)
    fake.add_native_record(f"/strategies/{SUMM}/actors/u-9/x/sessions/s-3", "u-9/x's", SUMM)
    fake.add_native_record(f"/strategies/{SUMM}/actors/u/sessions/s-4", "u's", SUMM)
    assert [n for n in store.list_namespaces("u-9") if "/sessions/" in n] == mine
    assert [n for n in store.list_namespaces("u") if "/sessions/" in n] == [
        f"/strategies/{SUMM}/actors/u/sessions/s-4"
    ]
    assert [n for n in store.list_namespaces("u-9/x") if "/sessions/" in n] == [
        f"/strategies/{SUMM}/actors/u-9/x/sessions/s-3"
    ]
    got = actor_records(store, "u-9")
    assert sorted(r.namespace for r in got) == mine and {r.actor_id for r in got} == {"u-9"}


def test_a_hostile_actor_id_is_not_read_as_another_actors_session(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """The semantic strategy's record of actor ``u-9/sessions/x`` lives at
    ``/strategies/sem-.../actors/u-9/sessions/x``; only the summary strategy writes
    ``/strategies/summ-.../actors/u-9/sessions/x``. Read with ``{memoryStrategyId}`` as any
    segment, the record was u-9's (fewest '/'), and a quarantine wrote ``actor_id = u-9``
    into it."""
    store, fake = ac
    rid = fake.add_native_record(
        f"/strategies/{SEM}/actors/u-9/sessions/x", "hostile's own fact", strategy_id=SEM
    )
    got = store.get(rid)
    assert got is not None and got.actor_id == "u-9/sessions/x"
    assert store.set_status([rid], Status.quarantined).succeeded == [rid]
    assert fake.records[rid]["metadata"]["actor_id"] == {"stringValue": "u-9/sessions/x"}


def test_control_a_template_with_only_the_actor_slot_is_resolved(harness: AgentCoreHarness) -> None:
    templates = [{"strategyId": "s1", "name": "f", "type": "SEMANTIC",
                  "namespaces": ["/users/{actorId}/facts"]}]  # fmt: skip
    store, fake = harness.store(strategies=templates), harness.fake
    rid = fake.add_native_record("/users/u-9/facts", "likes jazz", strategy_id="s1")
    assert store.list_namespaces("u-9") == ["/users/u-9/facts"]
    assert [r.id for r in actor_records(store, "u-9")] == [rid]


def test_a_strategy_template_reads_only_its_own_strategys_namespaces() -> None:
    strategies = Strategies({"strategies": DEFAULT_TEMPLATES})
    assert strategies.actor_of(f"/strategies/{SEM}/actors/a/sessions/s") == "a/sessions/s"
    assert strategies.actor_of(f"/strategies/{SUMM}/actors/a/sessions/s") == "a"
    assert strategies.actor_of("/strategies/other-a1b2c3d4e5/actors/a") is None
    assert strategies.resolved_for("a") == [f"/strategies/{SEM}/actors/a"]
