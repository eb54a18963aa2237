"""Two words traded are another statement (session 39).

``restates`` compared a clause's words as a bag, so a subject and object traded with no
name or article to mark them ("dogs chase cats" / "cats chase dogs") and the words either
side of a preposition traded ("replaced tea with coffee") were one statement:
online ``remember`` refreshed the old fact instead of keeping the new one, and the night
merged them. Only a swap counts: words that merely move still restate.
"""

from __future__ import annotations

import pytest

from memlife.online.memory import LongTermMemory
from memlife.restate import restates
from memlife.stores.sqlite import SqliteStore

TRADED = [
    ("Dogs chase cats.", "Cats chase dogs."),
    ("The children teach the parents.", "Parents teach the children."),
    ("Replaced tea with coffee.", "Replaced coffee with tea."),
    ("Swapped the red car for the blue bike.", "Swapped the blue bike for the red car."),
    ("Hung the mirror above the painting.", "Hung the painting above the mirror."),
    ("Parked the van behind the truck", "parked the truck behind the van"),
    ("Puts cups on plates.", "Puts plates on cups."),
    ("Sends letters to friends", "sends friends to letters"),
    ("Dogs chase cats and birds sing.", "Cats chase dogs and birds sing."),
    ("Birds sing, and dogs chase cats.", "Birds sing, and cats chase dogs."),
]

MOVED = [
    ("I only drink tea.", "I drink only tea."),
    ("Every morning she drinks coffee.", "She drinks coffee every morning."),
    ("Goes hiking with her friends.", "With her friends goes hiking."),
    ("Caroline hates coffee and likes tea.", "Caroline likes tea and hates coffee."),
    ("Drinks tea with milk.", "drinks tea with milk"),
    ("A fan of jazz and of blues.", "A fan of blues and of jazz."),
    ("Moved to Lisbon in spring.", "In spring moved to Lisbon."),
    ("Dogs chase cats.", "dogs chase cats"),
]


@pytest.mark.parametrize(("a", "b"), TRADED)
def test_two_words_traded_are_another_statement(a: str, b: str) -> None:
    assert not restates(a, b) and not restates(b, a)


@pytest.mark.parametrize(("a", "b"), MOVED)
def test_words_that_only_move_still_restate(a: str, b: str) -> None:
    assert restates(a, b) and restates(b, a)


def test_remember_keeps_the_traded_statement(
    memory_and_store: tuple[LongTermMemory, SqliteStore],
) -> None:
    m, store = memory_and_store
    ns = "/users/u1/facts"
    m.remember("u1", ns, None, "Replaced tea with coffee.")
    second = m.remember("u1", ns, None, "Replaced coffee with tea.")
    assert second.created and second.refreshed_duplicate_of is None
    assert sorted(r.content for r in store.page("u1", ns).records) == [
        "Replaced coffee with tea.",
        "Replaced tea with coffee.",
    ]
