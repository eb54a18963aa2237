"""Audit 44g (session 44): the LangGraph ``BaseStore`` adapter used as a LangGraph agent and LangGraph's
own store tests use it, with ``InMemoryStore`` as the differential oracle.

Real bugs (strict xfail until fixed):

- a put over a key whose item is gone (deleted, expired) rewrites the old record and keeps
  its ``created_at``: the new item is not new (InMemoryStore and PostgresStore give it
  its own creation time) and, on an episodic store, a put over an expired item is expired
  at once: the put succeeds and ``get`` returns None;
- ``list_namespaces`` lists a namespace whose only items are past their deadline, which
  ``get`` and ``search`` no longer serve;
- erasing an item put as a JSON value tombstones only its canonical JSON: the erased text
  comes straight back as ``{"content": <text>}`` (the shape of every text item);
- with an ``actor_of`` function of the application's own (as the docs invite), a search
  lists another actor's record stored under this user's namespace, which ``get`` refuses;
- a filter on a list given as a tuple matches nothing (InMemoryStore compares it as a list).

Weak tests (each holds a mutation no other test caught): the ``$gt`` and ``$lte`` filter
bounds, a filter operator on an item missing the field, a nested filter on a non-dict
value, a namespace pattern longer than the namespace, ``_actor_fixed`` (``actor_label``'s
bound, the default mapping's ``"users"``), ``default_actor_of``'s length check,
``actor_label``'s blank label, and ``_locate``'s key check for a record addressed by id.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import InvalidNamespaceError, PutOp  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

from memlife import Memory  # noqa: E402
from memlife.integrations.langgraph import MemlifeStore, actor_label, record_id  # noqa: E402
from memlife.model import utcnow  # noqa: E402
from tests.support.cli import invoke

NS = ("users", "u1", "facts")
PATH = "/users/u1/facts"
ERASED = "My home address is 12 Elm Street."


@pytest.fixture()
def memory(tmp_path: Path) -> Iterator[Memory]:
    m = Memory(f"sqlite:///{tmp_path / 'lg.db'}", ledger=tmp_path / "ledger")
    yield m
    m.close()


def _view(items: list) -> list[tuple]:
    return [(i.namespace, i.key, i.value) for i in items]


# -- bugs ---------------------------------------------------------------------------------
def test_a_put_over_an_expired_episodic_item_is_served(memory: Memory) -> None:
    """The agent's episodic store holds an item older than the policy's episodic TTL
    (365 days): get no longer serves it. The agent puts a new value under the key; the
    put succeeds, so get must return the new value (and the night must not delete it)."""
    lg = MemlifeStore(memory, memory_type="episodic")
    lg.put(NS, "trip", {"content": "Went to Rome."})
    rid = record_id("u1", PATH, "trip")
    old = lg.store.get(rid)
    aged = old.model_copy(update={"created_at": utcnow() - timedelta(days=400)})
    lg.store.put_many([aged])  # a year passes
    memory.long_term.invalidate()
    assert lg.get(NS, "trip") is None
    lg.put(NS, "trip", {"content": "Went to Paris last week."})
    got = lg.get(NS, "trip")
    assert got is not None and got.value == {"content": "Went to Paris last week."}


def test_a_put_after_a_delete_is_a_new_item_as_in_the_reference(memory: Memory) -> None:
    """Delete, then put the key again: on InMemoryStore (and PostgresStore, which deletes
    the row) the item is new, created by the second put; memlife rewrote the deleted
    record and kept its creation time (and its access history)."""
    ours, ref = MemlifeStore(memory), InMemoryStore()
    for store in (ours, ref):
        store.put(NS, "drink", {"content": "Drinks tea."})
        store.delete(NS, "drink")
    before = utcnow()
    for store in (ours, ref):
        store.put(NS, "drink", {"content": "Drinks coffee now."})
    assert ref.get(NS, "drink").created_at >= before
    assert ours.get(NS, "drink").created_at >= before


def test_list_namespaces_leaves_out_a_namespace_whose_items_all_expired(
    memory: Memory,
) -> None:
    """An item put with a TTL already gone (a ``PutOp`` with ``ttl=-1``) is served by
    neither get nor search; a namespace holding only it has no items, so it is not listed
    (as a namespace whose items were all deleted is not)."""
    lg = MemlifeStore(memory)
    lg.put(("users", "u1", "kept"), "a", {"content": "Likes tea."})
    lg.batch([PutOp(("users", "u1", "gone"), "b", {"content": "Parked on level 3."}, ttl=-1)])
    assert lg.get(("users", "u1", "gone"), "b") is None and lg.search(("users", "u1", "gone")) == []
    assert lg.list_namespaces() == [("users", "u1", "kept")]


def test_an_erased_json_items_text_does_not_come_back(home: Path) -> None:
    """The agent stored a note as JSON (``{"note": ..., "at": ...}``); the user's erasure
    (``memlife erase --id``) removes it. The same text put again as a text item, or with
    another date, is the erased content back (invariant 11): refused."""
    db = home / "memlife.db"
    with Memory(f"sqlite:///{db}", ledger=home / "ledger") as m:
        MemlifeStore(m).put(NS, "addr", {"note": ERASED, "at": "2026-01-01"})
    code, out, err = invoke("erase", "--actor", "u1", "--id", record_id("u1", PATH, "addr"), "-y")
    assert code == 0, out + err
    with Memory(f"sqlite:///{db}", ledger=home / "ledger") as m:
        lg = MemlifeStore(m)
        for value in ({"content": ERASED}, {"note": ERASED, "at": "2026-02-02"}):
            with pytest.raises(PermissionError, match="ERASED_CONTENT"):
                lg.put(NS, "addr2", value)
        assert lg.search(NS) == []


def test_search_with_an_own_actor_mapping_never_lists_another_actors_record(
    memory: Memory,
) -> None:
    """The application maps ``("memories", user)`` with a function of its own. A record of
    u2 sits under u1's path ``/memories/u1`` (a mis-set namespace, an import): get refuses
    it as not u1's; u1's search (listing or ranked) must not list it either."""
    lg = MemlifeStore(memory, actor_of=lambda ns: ns[1])
    lg.put(("memories", "u1"), "tea", {"content": "Likes green tea."})
    rid = memory.remember("u2's secret: owes money.", actor="u2", namespace="/memories/u1").id
    assert lg.get(("memories", "u1"), rid) is None
    listed = lg.search(("memories", "u1"))
    ranked = lg.search(("memories", "u1"), query="secret money")
    assert [i.key for i in listed] == ["tea"]
    assert [i.key for i in ranked] == ["tea"]


def test_a_tuple_filter_matches_the_list_it_equals_as_in_the_reference(memory: Memory) -> None:
    """``filter={"tags": ("a", "b")}``: InMemoryStore (and PostgresStore's JSON) compare it
    as the list ``["a", "b"]``; the item with those tags is found."""
    ours, ref = MemlifeStore(memory), InMemoryStore()
    for store in (ours, ref):
        store.put(NS, "t", {"tags": ["a", "b"]})
    want = _view(ref.search(NS, filter={"tags": ("a", "b")}))
    assert [k for _, k, _ in want] == ["t"]
    assert _view(ours.search(NS, filter={"tags": ("a", "b")})) == want


# -- weak tests: guards no other test held ----------------------------------------------------
@pytest.mark.parametrize(
    "flt",
    [
        {"n": {"$gt": 2}},
        {"n": {"$gte": 2}},
        {"n": {"$lt": 2}},
        {"n": {"$lte": 2}},
        {"n": {"$gt": 1, "$lte": 3}},
        {"n": {"$ne": 2}},
    ],
)
def test_comparison_operators_match_the_reference_at_their_bounds(
    memory: Memory, flt: dict
) -> None:
    """``_operator``: each bound, at the item equal to it, as InMemoryStore decides
    (a strict ``$gt`` read as ``$gte``, or ``$lte`` as ``$lt``, changes the answer)."""
    ours, ref = MemlifeStore(memory), InMemoryStore()
    for store in (ours, ref):
        for n in (1, 2, 3):
            store.put(NS, f"k{n}", {"n": n})
    assert _view(ours.search(NS, filter=flt)) == _view(ref.search(NS, filter=flt))


def test_an_operator_filter_skips_items_without_the_field(memory: Memory) -> None:
    """``_operator``'s None check: an item lacking ``n`` does not pass ``$gt`` (nor make
    the search fail); InMemoryStore raises there, memlife leaves such an item out."""
    lg = MemlifeStore(memory)
    lg.put(NS, "with", {"n": 5})
    lg.put(NS, "without", {"content": "No number here."})
    assert [i.key for i in lg.search(NS, filter={"n": {"$gt": 1}})] == ["with"]


def test_a_nested_filter_skips_items_whose_field_is_not_an_object(memory: Memory) -> None:
    """``_matches``' dict check: ``{"meta": {"lang": "en"}}`` is no match for an item whose
    ``meta`` is a string (nor does it fail the search), as in InMemoryStore."""
    ours, ref = MemlifeStore(memory), InMemoryStore()
    for store in (ours, ref):
        store.put(NS, "obj", {"meta": {"lang": "en"}})
        store.put(NS, "str", {"meta": "en"})
    flt = {"meta": {"lang": "en"}}
    assert _view(ours.search(NS, filter=flt)) == _view(ref.search(NS, filter=flt))
    assert [i.key for i in ours.search(NS, filter=flt)] == ["obj"]


def test_a_namespace_pattern_longer_than_the_namespace_matches_nothing(memory: Memory) -> None:
    """``_ns_matches``' length check: prefix ``("users", "u1", "facts", "x")`` is deeper than
    ``("users", "u1", "facts")``; that namespace is not under it (nor is it with suffix)."""
    ours, ref = MemlifeStore(memory), InMemoryStore()
    for store in (ours, ref):
        store.put(NS, "a", {"content": "Likes tea."})
    for kw in ({"prefix": (*NS, "x")}, {"suffix": ("zz", *NS)}):
        assert ours.list_namespaces(**kw) == ref.list_namespaces(**kw) == []


def test_search_under_a_prefix_without_the_actor_label_spans_its_users(memory: Memory) -> None:
    """``_actor_fixed`` with ``actor_label(1)``: ``("memories",)`` holds no actor label, so
    it spans every user's items (as InMemoryStore); it is not read as one actor's."""
    ours, ref = MemlifeStore(memory, actor_of=actor_label(1)), InMemoryStore()
    for store in (ours, ref):
        store.put(("memories", "u1"), "a", {"content": "Likes tea."})
        store.put(("memories", "u2"), "b", {"content": "Likes coffee."})
    assert _view(ours.search(("memories",))) == _view(ref.search(("memories",)))
    assert len(ours.search(("memories",))) == 2


def test_a_default_store_lists_records_outside_users_without_refusing(memory: Memory) -> None:
    """``_actor_fixed``'s ``"users"`` check: under the default mapping ``("docs", "hr")``
    names no actor; memlife's own records there (``remember``) are listed, not refused
    as an unmappable namespace."""
    rid = memory.remember("Leave requests go to HR.", actor="org", namespace="/docs/hr").id
    lg = MemlifeStore(memory)
    assert [(i.namespace, i.key) for i in lg.search(("docs", "hr"))] == [(("docs", "hr"), rid)]


def test_a_namespace_of_users_alone_is_an_invalid_namespace(memory: Memory) -> None:
    """``default_actor_of``'s length check: ``("users",)`` has no actor label; refused as
    an InvalidNamespaceError (what LangGraph callers catch), not an IndexError."""
    with pytest.raises(InvalidNamespaceError):
        MemlifeStore(memory).put(("users",), "k", {"content": "Likes tea."})


def test_an_empty_actor_label_is_an_invalid_namespace(memory: Memory) -> None:
    """``actor_label``'s blank check: a ``PutOp`` sent to ``batch`` (no BaseStore label
    check) with ``("memories", "", "x")`` is refused as an InvalidNamespaceError naming
    the missing actor, before any record is built."""
    lg = MemlifeStore(memory, actor_of=actor_label(1))
    with pytest.raises(InvalidNamespaceError, match="no actor label"):
        lg.batch([PutOp(("memories", "", "x"), "k", {"content": "Likes tea."})])


def test_an_item_is_addressed_by_its_key_not_by_its_record_id(memory: Memory) -> None:
    """``_locate``'s key check: memlife's own records are addressed by their id, but an
    item put through LangGraph is addressed by its key alone: its record id (``lg-...``)
    names no item (InMemoryStore has no such key either), and deleting by it deletes nothing."""
    ours, ref = MemlifeStore(memory), InMemoryStore()
    for store in (ours, ref):
        store.put(NS, "drink", {"content": "Drinks tea."})
    rid = record_id("u1", PATH, "drink")
    assert ours.get(NS, rid) is None and ref.get(NS, rid) is None
    ours.delete(NS, rid)
    assert ours.get(NS, "drink").value == {"content": "Drinks tea."}
