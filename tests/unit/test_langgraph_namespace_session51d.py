"""Audit 51d: a LangGraph ``put`` took a namespace that prints as another one.

Audit 50b refused, for every new record, a namespace that prints as another (decomposed
``sant\\u0065\\u0301`` beside ``sant\\u00e9``, a zero-width space, a word joiner): import on
every path and ``remember`` answer a NamespaceError. The LangGraph adapter's ``put`` checked
only glob characters, so ``("users", "u1", "sante\\u0301")`` was stored as a namespace of its
own beside u1's composed one: a policy rule (TTL, ``enforce_deletion_in``), ``run
--namespace`` or recall's filter written as it prints reaches only one twin.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import InvalidNamespaceError  # noqa: E402

from memlife import Memory  # noqa: E402
from memlife.errors import NamespaceError  # noqa: E402
from memlife.integrations.langgraph import MemlifeStore, actor_label  # noqa: E402
from memlife.namespaces import glob_match  # noqa: E402

TEA = {"content": "I like black tea."}
LOOKALIKE_LABELS = [
    unicodedata.normalize("NFD", "sant\u00e9"),  # prints as "santé"
    "facts\u200b",  # zero-width space: prints as "facts"
    "\u2060facts",  # word joiner
]


@pytest.fixture(name="lg")
def _lg(home: Path) -> Iterator[MemlifeStore]:
    store = MemlifeStore(Memory(f"sqlite:///{home / 'memlife.db'}", ledger=home / "ledger"))
    yield store
    store.memory.close()


@pytest.mark.parametrize("label", LOOKALIKE_LABELS, ids=["nfd", "zwsp", "wj"])
def test_a_put_refuses_a_namespace_remember_refuses(lg: MemlifeStore, label: str) -> None:
    path = f"/users/u1/{label}"
    with pytest.raises(NamespaceError):  # what remember answers for the same namespace
        lg.memory.remember("I like black tea.", actor="u1", namespace=path)
    with pytest.raises(InvalidNamespaceError, match="namespace"):
        lg.put(("users", "u1", label), "k", TEA)
    assert list(lg.store.list_namespaces("u1")) == []  # nothing written


def test_a_policy_glob_written_as_it_prints_never_misses_a_put_item(lg: MemlifeStore) -> None:
    """The consequence: a TTL or deletion rule for ``/users/*/santé`` reaches every item."""
    lg.put(("users", "u1", "sant\u00e9"), "a", TEA)
    try:
        lg.put(("users", "u1", unicodedata.normalize("NFD", "sant\u00e9")), "b", TEA)
    except InvalidNamespaceError:
        pass  # refused, once fixed
    stored = list(lg.store.list_namespaces("u1"))
    assert all(glob_match("/users/*/sant\u00e9", ns) for ns in stored), stored


def test_a_label_other_than_the_actor_is_checked_too(home: Path) -> None:
    """langmem's layout (``actor_label(1)``): the first label is a namespace part too."""
    lg = MemlifeStore(
        Memory(f"sqlite:///{home / 'memlife.db'}", ledger=home / "ledger"),
        actor_of=actor_label(1),
    )
    try:
        with pytest.raises(InvalidNamespaceError):
            lg.put(("memories\u200b", "u1"), "k", TEA)
    finally:
        lg.memory.close()


def test_plain_labels_of_any_script_are_still_put_and_found(lg: MemlifeStore) -> None:
    """Control: a composed accent, spaces inside, another script are stored and searched."""
    labels = ["sant\u00e9", "my facts", "\u5de5\u7a0b\u5e08", "facts"]
    for label in labels:
        lg.put(("users", "u1", label), "k", TEA)
    assert sorted(lg.store.list_namespaces("u1")) == sorted(f"/users/u1/{x}" for x in labels)
    assert {i.namespace[2] for i in lg.search(("users", "u1"), limit=10)} == set(labels)
    assert lg.get(("users", "u1", "sant\u00e9"), "k") is not None
