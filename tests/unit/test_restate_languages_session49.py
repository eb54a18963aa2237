"""Audit 49x5 (session 49: what a merge may write): `restates` outside English.

`restates` reads roles through English words (not, but, than, prefer ... to, with, ...).
Two statements in French, Spanish, Italian or Portuguese whose objects trade places kept
every rule: "Alice est allergique aux arachides mais pas aux crevettes" (allergic to
peanuts, not shrimp) restated "... aux crevettes mais pas aux arachides" (cosine 0.998),
as did "préfère le thé au café" / "le café au thé" and "aime le thé et déteste le café"
/ "aime le café et déteste le thé". `remember` then refreshed the old fact and dropped the
new one (the user is told it is kept), and a night merged the two into one record.
The fix (memlife/restate_swap.py) needs no word of those languages: two runs of words
traded places across words that are no list's joiners.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore
from tests.support.restating import both, neither

TRADED = [
    ("Alice est allergique aux arachides mais pas aux crevettes.",
     "Alice est allergique aux crevettes mais pas aux arachides."),
    ("Marie préfère le thé au café.", "Marie préfère le café au thé."),
    ("Alice aime le thé et déteste le café.", "Alice aime le café et déteste le thé."),
    ("Marie boit du thé le matin mais jamais de café.",
     "Marie boit du café le matin mais jamais de thé."),
    ("Marie aime le thé plus que le café.", "Marie aime le café plus que le thé."),
    ("Prefiere el té al café.", "Prefiere el café al té."),
    ("Ana bebe té pero nunca café.", "Ana bebe café pero nunca té."),
    ("Ana prefiere el té en vez del café.", "Ana prefiere el café en vez del té."),
    ("Paolo preferisce il tè al caffè.", "Paolo preferisce il caffè al tè."),
    ("Ele prefere o chá ao café.", "Ele prefere o café ao chá."),
]  # fmt: skip
# the same facts, a list or whole clauses in another order: they restated before and must
# still (a merge of them loses nothing)
SAME = [
    ("Alice aime le thé et le café.", "Alice aime le café et le thé."),
    ("Ana bebe té y café.", "Ana bebe café y té."),
    ("Alice aime le thé et elle déteste le café.", "Alice déteste le café et elle aime le thé."),
    ("Likes tea, coffee and juice", "likes juice, tea and coffee"),
    ("Caroline likes tea and she hates coffee", "Caroline hates coffee and she likes tea"),
    ("Drinks neither tea nor coffee.", "drinks neither coffee nor tea"),
    ("I only drink tea.", "I drink only tea."),
    ("Every morning she drinks coffee.", "She drinks coffee every morning."),
]

_TEMPLATES = [
    "{s} préfère le {x} au {y}.",
    "{s} est allergique au {x} mais pas au {y}.",
    "{s} aime le {x} et déteste le {y}.",
    "{s} boit du {x} le matin mais jamais de {y}.",
    "{s} prefiere el {x} al {y}.",
    "{s} bebe {x} pero nunca {y}.",
    "{s} preferisce il {x} al {y}.",
    "{s} prefere o {x} ao {y}.",
]
_NOUNS = ["thé", "café", "vin", "lait", "jus", "cidre", "chocolat", "poisson", "poulet", "riz"]


@pytest.mark.parametrize(("a", "b"), TRADED)
def test_objects_traded_in_another_language_are_two_statements(a: str, b: str) -> None:
    assert neither(a, b)


@pytest.mark.parametrize(("a", "b"), SAME)
def test_control_lists_and_clauses_in_another_order_still_restate(a: str, b: str) -> None:
    assert both(a, b)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(_TEMPLATES),
    st.lists(st.sampled_from(_NOUNS), min_size=2, max_size=2, unique=True),
)
def test_any_two_objects_traded_across_a_preposition_or_negation_never_restate(
    template: str, nouns: list[str]
) -> None:
    """One detail changed: which object the preference, the denial or the verb takes."""
    x, y = nouns
    a, b = template.format(s="Marie", x=x, y=y), template.format(s="Marie", x=y, y=x)
    assert neither(a, b)


def test_remember_keeps_an_allergy_whose_objects_trade_places(
    memory_and_store: tuple[LongTermMemory, SqliteStore],
) -> None:
    m, store = memory_and_store
    ns = "/users/u1/health"
    old, new = TRADED[0]
    m.remember("u1", ns, None, old)
    second = m.remember("u1", ns, None, new)
    assert second.created and second.refreshed_duplicate_of is None
    assert sorted(r.content for r in store.page("u1", ns).records) == sorted([old, new])


def test_control_remember_still_refreshes_a_list_said_in_another_order(
    memory_and_store: tuple[LongTermMemory, SqliteStore],
) -> None:
    m, store = memory_and_store
    ns = "/users/u1/prefs"
    first = m.remember("u1", ns, None, SAME[0][0])
    again = m.remember("u1", ns, None, SAME[0][1])
    assert not again.created and again.refreshed_duplicate_of == first.record_id
    assert [r.content for r in store.page("u1", ns).records] == [SAME[0][0]]
