"""The LangGraph BaseStore adapter, checked against LangGraph's own InMemoryStore.

Every deterministic operation (put/get/update/delete, filtered and paged search, namespace
listing) is run on both stores and must give the same answers; semantic search and the
lifecycle (supersede, hold, ledger) are checked on their own.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import BaseStore, InvalidNamespaceError  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

from memlife import Memory, RetentionClass, Status  # noqa: E402
from memlife.integrations.langgraph import (  # noqa: E402
    MemlifeStore,
    default_actor_of,
    record_id,
)
from memlife.ledger import AccessLedger  # noqa: E402

# inserted in sorted order so both stores list in the same order
ITEMS = [
    (("docs", "handbook"), "a1", {"title": "leave", "pages": 3, "tags": ["hr"]}),
    (
        ("users", "u1", "prefs"),
        "diet",
        {"content": "Vegetarian since 2020.", "kind": "pref", "n": 1},
    ),
    (
        ("users", "u1", "prefs"),
        "drink",
        {"content": "Drinks only green tea.", "kind": "pref", "n": 2},
    ),
    (("users", "u1", "prefs"), "pet", {"content": "Has a dog called Rex.", "kind": "fact", "n": 3}),
    (("users", "u1", "trips"), "t1", {"content": "Flew to Lisbon in May.", "n": 4}),
    (
        ("users", "u2", "prefs"),
        "drink",
        {"content": "Coffee, black, no sugar.", "kind": "pref", "n": 5},
    ),
    (("users", "u2", "prefs"), "plain", {"content": "Likes jazz."}),
]


def actor_of(namespace: tuple[str, ...]) -> str:
    """The default mapping for ("users", <actor>, ...); the shared docs belong to "org"."""
    return "org" if namespace[0] == "docs" else default_actor_of(namespace)


@pytest.fixture(name="stores")
def _stores(tmp_path: Path) -> tuple[MemlifeStore, InMemoryStore]:
    ours = MemlifeStore(
        Memory(f"sqlite:///{tmp_path / 'lg.db'}", ledger=tmp_path / "ledger"), actor_of=actor_of
    )
    ref = InMemoryStore()
    for store in (ours, ref):
        for ns, key, value in ITEMS:
            store.put(ns, key, value)
    yield ours, ref
    ours.memory.close()


def view(items: list) -> list[tuple]:
    return [(i.namespace, i.key, i.value) for i in items]


def test_is_a_langgraph_store(stores: tuple[MemlifeStore, InMemoryStore]) -> None:
    assert isinstance(stores[0], BaseStore)


def test_get_matches_reference(stores: tuple[MemlifeStore, InMemoryStore]) -> None:
    ours, ref = stores
    for ns, key, value in ITEMS:
        got, want = ours.get(ns, key), ref.get(ns, key)
        assert (
            (got.namespace, got.key, got.value)
            == (want.namespace, want.key, want.value)
            == (ns, key, value)
        )
        assert got.updated_at >= got.created_at
    for ns, key in [
        (("users", "u1", "prefs"), "nope"),
        (("users", "u2", "prefs"), "diet"),
        (("users", "u1"), "drink"),
    ]:
        assert ours.get(ns, key) is None and ref.get(ns, key) is None


def test_update_and_delete(stores: tuple[MemlifeStore, InMemoryStore]) -> None:
    ours, ref = stores
    ns = ("users", "u1", "prefs")
    first = ours.get(ns, "drink")
    for store in (ours, ref):
        store.put(ns, "drink", {"content": "Now drinks rooibos.", "kind": "pref", "n": 9})
        store.delete(ns, "pet")
        store.delete(ns, "never-existed")
    after = ours.get(ns, "drink")
    assert (
        after.value
        == ref.get(ns, "drink").value
        == {"content": "Now drinks rooibos.", "kind": "pref", "n": 9}
    )
    assert after.created_at == first.created_at and after.updated_at >= first.updated_at
    assert ours.get(ns, "pet") is None and ref.get(ns, "pet") is None
    # one record per key: the update rewrote it, the delete left it for the nightly run
    rec = ours.store.get(record_id("u1", "/users/u1/prefs", "pet"))
    assert rec.status is Status.pending_delete
    assert view(ours.search(ns)) == view(ref.search(ns))


@pytest.mark.parametrize(
    "prefix, kwargs",
    [
        ((), {}),
        (("users",), {}),
        (("users", "u1"), {}),
        (("users", "u1", "prefs"), {"filter": {"kind": "pref"}}),
        (("users",), {"filter": {"kind": "pref"}, "limit": 2}),
        (("users",), {"filter": {"kind": "pref"}, "limit": 2, "offset": 1}),
        (("users", "u1"), {"filter": {"n": {"$gte": 2, "$lt": 4}}}),
        (("users",), {"filter": {"kind": {"$ne": "pref"}}}),
        (("docs",), {"filter": {"tags": ["hr"]}}),
        (("nobody",), {}),
    ],
)
def test_search_without_query_matches_reference(
    stores: tuple[MemlifeStore, InMemoryStore], prefix: tuple, kwargs: dict
) -> None:
    ours, ref = stores
    assert view(ours.search(prefix, **kwargs)) == view(ref.search(prefix, **kwargs))


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"prefix": ("users",)},
        {"suffix": ("prefs",)},
        {"prefix": ("users", "*", "prefs")},
        {"max_depth": 2},
        {"prefix": ("users",), "max_depth": 2, "limit": 1, "offset": 1},
    ],
)
def test_list_namespaces_matches_reference(
    stores: tuple[MemlifeStore, InMemoryStore], kwargs: dict
) -> None:
    ours, ref = stores
    assert ours.list_namespaces(**kwargs) == ref.list_namespaces(**kwargs)


def test_semantic_search_ranks_and_ledgers(
    stores: tuple[MemlifeStore, InMemoryStore], tmp_path: Path
) -> None:
    ours, _ = stores
    hits = ours.search(("users", "u1"), query="what does she like to drink?", limit=2)
    assert [h.key for h in hits][:1] == ["drink"]
    assert len(hits) == 2 and hits[0].score >= hits[1].score and hits[0].score is not None
    assert all(h.namespace[:2] == ("users", "u1") for h in hits)  # never u2's tea or coffee
    only_facts = ours.search(("users", "u1"), query="drink", filter={"kind": "fact"})
    assert [h.key for h in only_facts] == ["pet"]
    ours.memory.long_term.ledger.flush()
    stats = AccessLedger(tmp_path / "ledger").access_stats(actor_id="u1")
    assert record_id("u1", "/users/u1/prefs", "drink") in stats  # nightly scoring sees it


def test_superseded_items_leave_the_view(stores: tuple[MemlifeStore, InMemoryStore]) -> None:
    ours, _ = stores
    ns = ("users", "u1", "prefs")
    old = record_id("u1", "/users/u1/prefs", "drink")
    # what a nightly consolidation does: a replacement record, the original superseded
    new = ours.memory.remember(
        "Drinks green tea, never coffee.", actor="u1", namespace="/users/u1/prefs"
    ).id
    ours.store.set_status([old], Status.superseded, replaced_by=new)
    ours.memory.long_term.invalidate()
    assert ours.get(ns, "drink") is None
    hits = ours.search(ns, query="what does she drink", limit=1)
    assert hits[0].key == new and hits[0].value == {"content": "Drinks green tea, never coffee."}
    assert ours.get(ns, new).value == hits[0].value  # memlife's own records by their id


def test_held_record_is_never_rewritten(stores: tuple[MemlifeStore, InMemoryStore]) -> None:
    ours, _ = stores
    ns = ("users", "u1", "prefs")
    rid = record_id("u1", "/users/u1/prefs", "diet")
    rec = ours.store.get(rid)
    ours.store.put_many([rec.model_copy(update={"retention_class": RetentionClass.legal_hold})])
    with pytest.raises(PermissionError):
        ours.put(ns, "diet", {"content": "Eats meat again."})
    with pytest.raises(PermissionError):  # nor deleted (a delete is a pending_delete)
        ours.delete(ns, "diet")
    assert ours.get(ns, "diet").value == ITEMS[1][2]  # unchanged
    assert ours.store.get(rid).status is Status.active


def test_namespace_rules(stores: tuple[MemlifeStore, InMemoryStore]) -> None:
    ours, _ = stores
    with pytest.raises(InvalidNamespaceError):
        ours.put(("users", "u.1"), "k", {"content": "x"})  # LangGraph's own rule
    with pytest.raises(InvalidNamespaceError):
        ours.put(("users", "a/b"), "k", {"content": "x"})  # would change the memlife path
    with pytest.raises(InvalidNamespaceError):
        ours.put((), "k", {"content": "x"})


def test_json_values_round_trip(stores: tuple[MemlifeStore, InMemoryStore]) -> None:
    ours, _ = stores
    value = {"content": "ok", "nested": {"ü": [1, 2.5, None, True]}, "emoji": "☕"}
    ours.put(("users", "u3", "misc"), "j", value)
    assert ours.get(("users", "u3", "misc"), "j").value == value


def test_async_methods(stores: tuple[MemlifeStore, InMemoryStore]) -> None:
    ours, _ = stores

    async def scenario() -> tuple:
        await ours.aput(("users", "u4", "prefs"), "k", {"content": "Prefers window seats."})
        got = await ours.aget(("users", "u4", "prefs"), "k")
        found = await ours.asearch(("users", "u4"), query="seat preference")
        await ours.adelete(("users", "u4", "prefs"), "k")
        return got, found, await ours.aget(("users", "u4", "prefs"), "k")

    got, found, gone = asyncio.run(scenario())
    assert (
        got.value == {"content": "Prefers window seats."} and found[0].key == "k" and gone is None
    )


def test_erased_content_is_refused(stores: tuple[MemlifeStore, InMemoryStore]) -> None:
    from memlife import tombstones

    ours, _ = stores
    ns = ("users", "u1", "prefs")
    rec = ours.store.get(record_id("u1", "/users/u1/prefs", "pet"))
    tombstones.add(ours.store, [rec])  # what an erasure leaves behind
    with pytest.raises(PermissionError, match="ERASED_CONTENT"):
        ours.put(("users", "u1", "other"), "again", ITEMS[3][2])
    assert ours.get(("users", "u1", "other"), "again") is None
    ours.put(ns, "fresh", {"content": "Likes hiking."})  # other content is fine
