"""The LangGraph adapter, session 29 (a reviewer's findings):

- erased text comes back through no LangGraph value: the tombstone check read only the
  value as stored (its canonical JSON), so ``{"content": <erased>, "x": 1}`` was stored
  and served; every string value the JSON carries, at any depth, is now checked too;
- a filtered search ranked only the top 1000 of a namespace, then filtered: with more
  items, items passing the filter were never returned; it now ranks deeper until enough
  items pass (or none are left), as InMemoryStore filters before it ranks;
- a put dropped the actor's whole recall index (the next search reloaded and re-read it);
  it is now kept in step as ``remember`` keeps it, and stays exact for the staleness check
  that compares it with the store after another connection's write.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.memory import InMemoryStore  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from memlife import Memory  # noqa: E402
from memlife.cli import app  # noqa: E402
from memlife.integrations.langgraph import MemlifeStore  # noqa: E402

NS = ("users", "u1", "facts")
ERASED = "My home address is 12 Elm Street."


def _open(db: Path, ledger: Path) -> MemlifeStore:
    return MemlifeStore(Memory(f"sqlite:///{db}", ledger=ledger))


def _rows_with(db: Path, word: str) -> list[str]:
    with sqlite3.connect(db) as con:
        rows = con.execute("select content from records where status='active'").fetchall()
    return [c for (c,) in rows if word.lower() in c.lower()]


# -- 1. erased text inside a JSON value ------------------------------------------------------
@pytest.fixture(name="erased")
def _erased(home: Path) -> Iterator[tuple[MemlifeStore, Path]]:
    """A store whose actor u1 had ERASED remembered and then erased (`memlife erase`)."""
    db = home / "memlife.db"
    with Memory(f"sqlite:///{db}", ledger=home / "ledger") as m:
        m.remember(ERASED, actor="u1", subject="address", namespace="/users/u1/facts")
        m.remember("I like chess.", actor="u1", namespace="/users/u1/facts")
    res = CliRunner().invoke(app, ["erase", "--actor", "u1", "--subject", "address", "--yes"])
    assert res.exit_code == 0, res.output
    assert _rows_with(db, "Elm") == []
    store = _open(db, home / "ledger")
    store.search(NS, query="chess")  # the recall index is loaded: a put must not slip into it
    yield store, db
    store.memory.close()


@pytest.mark.parametrize(
    "value",
    [
        {"content": ERASED},  # as stored: refused before too
        {"content": ERASED, "x": 1},  # the reviewer's bypass
        {"note": ERASED, "tag": "home"},
        {"content": "see below", "more": {"lines": ["first", ERASED]}},  # nested in a list
        {"content": "my home address is 12 elm street!", "x": 1},  # folded case, punctuation
        {"a": {"b": {"c": {"d": ["  " + ERASED + "  "]}}}},
    ],
)
def test_erased_text_anywhere_in_a_value_is_refused(
    erased: tuple[MemlifeStore, Path], value: dict[str, Any]
) -> None:
    store, db = erased
    with pytest.raises(PermissionError, match="ERASED_CONTENT"):
        store.put(NS, "addr", value)
    assert store.get(NS, "addr") is None
    assert _rows_with(db, "Elm") == []
    found = store.search(("users", "u1"), query="home address Elm Street", limit=10)
    assert all("elm" not in str(i.value).lower() for i in found)
    assert [i.key for i in store.search(("users", "u1"), filter={"tag": "home"})] == []


def test_values_without_erased_text_are_stored(erased: tuple[MemlifeStore, Path]) -> None:
    """Not over-refused: other text, a mere part of the erased text, numbers and keys."""
    store, _ = erased
    values = {
        "a": {"content": "I like chess.", "x": 1},  # a live memory's text, in a JSON value
        "b": {"note": "Elm Street", "n": 12},  # part of the erased text is not the text
        "c": {"12 Elm Street": True, "list": ["home", "", "  "]},
    }
    for key, value in values.items():
        store.put(NS, key, value)
    assert {k: store.get(NS, k).value for k in values} == values


# -- 2. filtered search beyond the first 1000 ranked ----------------------------------------
@pytest.fixture(name="crowded")
def _crowded(tmp_path: Path) -> Iterator[tuple[MemlifeStore, InMemoryStore]]:
    """1010 items that match the query well and 2 that match it worst, the filter's (plain
    text values, the cheapest to embed: the first search embeds every one)."""
    ours, ref = _open(tmp_path / "lg.db", tmp_path / "ledger"), InMemoryStore()
    ns = ("users", "u1", "notes")
    items = [(f"k{i:04d}", {"content": f"hike {i}"}) for i in range(1010)]
    items += [(f"z{i}", {"content": "tax due"}) for i in range(2)]
    for store in (ours, ref):
        for key, value in items:
            store.put(ns, key, value)
    yield ours, ref
    ours.memory.close()


def test_a_filtered_search_finds_matches_ranked_below_the_first_thousand(
    crowded: tuple[MemlifeStore, InMemoryStore],
) -> None:
    ours, ref = crowded
    query, tax = "hike", {"content": "tax due"}
    got = ours.search(("users", "u1"), query=query, filter=tax, limit=10)
    want = ref.search(("users", "u1"), query=query, filter=tax, limit=10)
    assert sorted(i.key for i in got) == sorted(i.key for i in want) == ["z0", "z1"]
    assert all(i.score is not None for i in got)
    # paged: the second of the two, and nothing past them
    first = ours.search(("users", "u1"), query=query, filter=tax, limit=1)
    second = ours.search(("users", "u1"), query=query, filter=tax, limit=1, offset=1)
    assert [i.key for i in first + second] == [i.key for i in got]
    assert ours.search(("users", "u1"), query=query, filter=tax, limit=5, offset=2) == []
    # a filter most items pass keeps the unfiltered ranking
    top = ours.search(("users", "u1"), query=query, limit=5)
    hike = ours.search(
        ("users", "u1"), query=query, filter={"content": {"$ne": "tax due"}}, limit=5
    )
    assert [i.key for i in hike] == [i.key for i in top]


# -- 3. put keeps the recall index in step -----------------------------------------------------
FACTS = [
    "Drinks only green tea.",
    "Has a dog called Rex.",
    "Flew to Lisbon in May.",
    "Allergic to peanuts.",
]
QUERIES = ["tea", "kayak", "cello", "dog", "Lisbon trip", "peanut allergy", "Finnish"]


def _ranked(store: MemlifeStore, query: str) -> list[tuple[str, float]]:
    return [(i.key, round(i.score, 5)) for i in store.search(("users", "u1"), query=query)]


def test_a_put_updates_the_loaded_index_without_a_reload(tmp_path: Path) -> None:
    db, ledger = tmp_path / "lg.db", tmp_path / "ledger"
    ours = _open(db, ledger)
    for i, fact in enumerate(FACTS):
        ours.put(NS, f"k{i}", {"content": fact})
    ours.search(NS, query="warm up")  # loads the shard
    lt = ours.memory.long_term
    loads = lt.load_count
    ours.put(NS, "boat", {"content": "Owns a red kayak."})  # a new row
    ours.put(NS, "k0", {"content": "Plays the cello on Sundays."})  # an indexed row rewritten
    ours.put(("users", "u1", "other"), "j", {"text": "Speaks some Finnish.", "n": 1})  # JSON
    assert ours.search(NS, query="kayak", limit=1)[0].key == "boat"
    [cello] = ours.search(NS, query="cello", limit=1)
    assert (cello.key, cello.value) == ("k0", {"content": "Plays the cello on Sundays."})
    assert ours.search(("users", "u1"), query="Finnish", limit=1)[0].key == "j"
    assert lt.load_count == loads + 1  # the new namespace's shard only: none reloaded
    # the index as kept equals the index as loaded afresh: same items, same scores
    fresh = _open(db, tmp_path / "ledger2")
    for q in QUERIES:
        assert _ranked(ours, q) == _ranked(fresh, q), q
    assert lt.load_count == loads + 1
    fresh.memory.close()
    ours.memory.close()


def test_after_a_put_the_index_still_matches_the_store_when_another_connection_writes(
    tmp_path: Path,
) -> None:
    """Another connection's write makes every shard compare its fingerprint with the store:
    a put's shard must match when nothing of its own changed (no reload), and must not
    when something did (its new row is found)."""
    db, ledger = tmp_path / "lg.db", tmp_path / "ledger"
    ours, other = _open(db, ledger), _open(db, tmp_path / "ledger2")
    for i, fact in enumerate(FACTS):
        ours.put(NS, f"k{i}", {"content": fact})
    ours.search(NS, query="warm up")
    lt = ours.memory.long_term
    loads = lt.load_count
    ours.put(NS, "boat", {"content": "Owns a red kayak."})
    ours.put(NS, "k1", {"content": "Has a cat called Tom.", "since": 2019})
    other.put(("users", "u2", "facts"), "x", {"content": "Another user's fact."})
    assert ours.search(NS, query="kayak", limit=1)[0].key == "boat"
    assert ours.search(NS, query="cat", limit=1)[0].key == "k1"
    assert lt.load_count == loads  # fingerprint moved exactly by our rows: still matches
    other.put(NS, "fin", {"content": "Speaks fluent Finnish."})  # this shard, elsewhere
    assert ours.search(NS, query="Finnish", limit=1)[0].key == "fin"
    assert lt.load_count == loads + 1
    other.delete(NS, "boat")
    assert "boat" not in [i.key for i in ours.search(NS, query="kayak")]
    other.memory.close()
    ours.memory.close()
