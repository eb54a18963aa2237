"""Audit 49d (session 49): the LangGraph adapter against hostile namespace labels and keys.

1. ``put`` took its actor from a namespace label without the checks every other door
   applies (``remember``, ``recall``, import: :func:`memlife.online.inputs.actor_arg`): a
   label with a trailing space, a fullwidth letter or a zero-width character was stored as
   an actor that looks like another ("u1 " beside "u1"), which ``memlife erase --actor u1``
   never finds. And ``recall`` refuses that actor, so from then on every search with a
   query whose prefix covers it (``("users",)``: every tenant) raised InputError.
2. A lone surrogate (text decoded with ``surrogateescape``) in a key, a label or a value
   surfaced as a bare UnicodeEncodeError from a hash deep inside, naming no field, where
   ``remember`` and ``recall`` answer an InputError naming where.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import InvalidNamespaceError  # noqa: E402

from memlife import Memory  # noqa: E402
from memlife.errors import InputError  # noqa: E402
from memlife.integrations.langgraph import MemlifeStore  # noqa: E402

TEA = {"content": "I like black tea."}


@pytest.fixture(name="lg")
def _lg(home: Path) -> Iterator[MemlifeStore]:
    store = MemlifeStore(Memory(f"sqlite:///{home / 'memlife.db'}", ledger=home / "ledger"))
    yield store
    store.memory.close()


# -- 1. actor labels every other door refuses ------------------------------------------------
LOOKALIKES = ["u1 ", " u1", "\uff551", "u1\u200b", "u1\u00ad"]  # a tab: refused already


@pytest.mark.parametrize("label", LOOKALIKES)
def test_a_put_refuses_an_actor_label_remember_and_import_refuse(
    lg: MemlifeStore, label: str
) -> None:
    with pytest.raises(InvalidNamespaceError, match="actor") as err:
        lg.put(("users", label, "facts"), "k", TEA)
    assert label.strip() not in str(err.value).replace("'u1'", "")  # the label is not quoted
    assert list(lg.store.list_actors()) == []  # nothing written


def test_one_tenants_lookalike_label_never_breaks_another_tenants_search(lg: MemlifeStore) -> None:
    lg.put(("users", "u2", "facts"), "k", {"content": "I like green tea."})
    with contextlib.suppress(ValueError):  # refused, once fixed
        lg.put(("users", "u1 ", "facts"), "k", TEA)
    found = lg.search(("users",), query="tea")
    assert [(i.namespace, i.key) for i in found] == [(("users", "u2", "facts"), "k")]


def test_plain_actor_labels_are_still_stored_and_searched(lg: MemlifeStore) -> None:
    """The control: what ``remember`` takes, a put takes (case, spaces inside, any script)."""
    labels = ["u1", "U1", "user 1", "Zo\u00eb", "user@example", "\u5de5\u7a0b\u5e08-7"]
    for label in labels:
        lg.put(("users", label, "facts"), "k", TEA)
    assert sorted(lg.store.list_actors()) == sorted(labels)
    found = lg.search(("users",), query="tea", limit=20)
    assert sorted(i.namespace[1] for i in found) == sorted(labels)


# -- 2. lone surrogates ----------------------------------------------------------------------
BAD_PUTS: list[tuple[tuple[str, ...], str, dict[str, Any], str]] = [
    (("users", "u1", "facts"), "k", {"content": "tea \ud800"}, "value"),
    (("users", "u1", "facts"), "k", {"note": ["tea", "\udcff"]}, "value"),
    (("users", "u1", "facts"), "k", {"n\ud800": "tea"}, "value"),
    (("users", "u1", "facts"), "k\udcff", TEA, "key"),
    (("users", "u1", "f\udcff"), "k", TEA, "namespace"),
    (("users", "u\udcff", "facts"), "k", TEA, "namespace"),
]


@pytest.mark.parametrize(("ns", "key", "value", "where"), BAD_PUTS)
def test_a_lone_surrogate_is_an_input_error_naming_where(
    lg: MemlifeStore, ns: tuple[str, ...], key: str, value: dict[str, Any], where: str
) -> None:
    with pytest.raises(InputError, match=where) as err:
        lg.put(ns, key, value)
    assert not isinstance(err.value, UnicodeError)
    assert "surrogate" in str(err.value)
    assert list(lg.store.list_actors()) == []


def test_get_and_delete_of_a_key_no_item_can_have_find_nothing(lg: MemlifeStore) -> None:
    """As for a key over 256 characters: no item can have it, so there is none to get or
    delete (InMemoryStore answers None too)."""
    lg.put(("users", "u1", "facts"), "k", TEA)
    assert lg.get(("users", "u1", "facts"), "k\udcff") is None
    lg.delete(("users", "u1", "facts"), "k\udcff")
    item = lg.get(("users", "u1", "facts"), "k")
    assert item is not None and item.value == TEA


def test_a_key_over_the_bound_finds_nothing(lg: MemlifeStore) -> None:
    """The control: the rule the surrogate case is held to."""
    lg.put(("users", "u1", "facts"), "k", TEA)
    assert lg.get(("users", "u1", "facts"), "k" * 300) is None
    lg.delete(("users", "u1", "facts"), "k" * 300)
    assert lg.get(("users", "u1", "facts"), "k") is not None
