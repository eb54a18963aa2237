"""Audit 53t: two LangGraph item keys of one namespace shared a record.

Audit 53d gave each item up to 64 id slots: slot 0 is ``sha256(actor \\0 path \\0 key)``
(the ids of before), slot N ``sha256(actor \\0 path \\0 key \\0 N)``. An item key may hold
a NUL (LangGraph takes any string; check_key bounds its length only), so the key
``"k\\x001"`` has, at its slot 0, the very id of key ``"k"``'s slot 1. ``item_row`` takes any
live record among the 64 slots as the item's, so ``get("k")`` answered the other item
(under its key), and ``put("k", ...)`` wrote over it: that item's value was lost with no
delete asked. LangGraph's own ``InMemoryStore`` keeps the two items apart (the oracle).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.memory import InMemoryStore  # noqa: E402

from memlife import Memory  # noqa: E402
from memlife.integrations.langgraph import MemlifeStore, record_id  # noqa: E402

NS = ("users", "u1", "prefs")
TEA, COFFEE = {"content": "Drinks only green tea."}, {"content": "Never drinks coffee."}
NUL_KEY = "k\x001"  # at slot 0 the id of "k"'s slot 1


@pytest.fixture(name="lg")
def _lg(home: Path) -> Iterator[MemlifeStore]:
    store = MemlifeStore(Memory(f"sqlite:///{home / 'memlife.db'}", ledger=home / "ledger"))
    yield store
    store.memory.close()


def test_control_the_two_keys_collide_in_the_id_formula() -> None:
    assert record_id("u1", "/users/u1/prefs", NUL_KEY) == record_id("u1", "/users/u1/prefs", "k", 1)


def test_control_the_oracle_keeps_the_two_items_apart() -> None:
    oracle = InMemoryStore()
    oracle.put(NS, NUL_KEY, TEA)
    assert oracle.get(NS, "k") is None
    oracle.put(NS, "k", COFFEE)
    got = oracle.get(NS, NUL_KEY)
    assert got is not None and got.value == TEA


def test_control_keys_without_a_nul_stay_apart(lg: MemlifeStore) -> None:
    lg.put(NS, "k1", TEA)
    assert lg.get(NS, "k") is None
    lg.put(NS, "k", COFFEE)
    first, second = lg.get(NS, "k1"), lg.get(NS, "k")
    assert first is not None and (first.key, first.value) == ("k1", TEA)
    assert second is not None and (second.key, second.value) == ("k", COFFEE)


def test_a_get_never_answers_another_keys_item(lg: MemlifeStore) -> None:
    lg.put(NS, NUL_KEY, TEA)
    assert lg.get(NS, "k") is None


def test_a_put_never_writes_over_another_keys_item(lg: MemlifeStore) -> None:
    lg.put(NS, NUL_KEY, TEA)
    lg.put(NS, "k", COFFEE)
    first, second = lg.get(NS, NUL_KEY), lg.get(NS, "k")
    assert first is not None and (first.key, first.value) == (NUL_KEY, TEA)
    assert second is not None and (second.key, second.value) == ("k", COFFEE)
