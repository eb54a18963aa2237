"""restate.restates: a merge or a refresh keeps one text, so the two must say the same
words. The "differ" pairs are the adversarial review's, on LoCoMo-style memories: each was
merged (night) or refreshed (remember) on cosine, polarity and names/numbers alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlife.ledger import AccessLedger
from memlife.online.memory import LongTermMemory
from memlife.restate import restates
from memlife.stores.sqlite import SqliteStore

DIFFER = [
    ("Caroline is allergic to two medications.", "Caroline is allergic to three medications."),
    ("Runs 5 km every morning.", "Runs 5 miles every morning."),
    ("Takes 20 mg of sertraline.", "Takes 20 g of sertraline."),
    ("Moved to Sweden four years ago.", "Moved from Sweden four years ago."),
    ("Went camping with her kids last year.", "Went camping with her kids this year."),
    ("Her brother lives in Boston.", "Her sister lives in Boston."),
    ("Earns more than her brother.", "Earns less than her brother."),
    ("Drinks lattes with oat milk and cinnamon.", "Drinks lattes with oat milk."),
    ("On Monday Caroline gave Melanie a painting.", "On Monday Melanie gave Caroline a painting."),
    ("Gina lost her job at Door Dash this month.", "Gina lost her job at Door Dash."),
    ("Swims in the morning.", "Swims in the evening."),
    # session 24 review: tense, signs and symbols, and which number goes with which noun
    ("I had cancer.", "I have cancer."),
    ("I was married to Tom.", "I am married to Tom."),
    ("I did finish the course.", "I do finish the course."),
    ("The freezer is at -18 degrees.", "The freezer is at 18 degrees."),
    ("My loan rate is 5%.", "My loan rate is 5."),
    ("My rent is $900 a month.", "My rent is \u20ac900 a month."),
    ("I have two dogs and one cat.", "I have one dog and two cats."),
    ("The dog bit the man.", "The man bit the dog."),
]
SAME = [
    ("Prefers a window seat on flights.", "Prefers window seats on flights."),
    ("Drinks only green tea, never coffee.", "drinks only green tea and never coffee"),
    ("I only drink GREEN tea, never coffee", "I only drink green tea, never any coffee."),
    ("She is a nurse.", "She is a nurse!"),
    ("They are nurses.", "they are nurses"),
    ("We are at -18 degrees.", "we are at -18 degrees"),
]
# the same words in another order that changes no role: a restatement
REORDERED = [
    ("I only drink green tea, never coffee", "I drink only green tea, never any coffee."),
    ("Every morning I drink a large black coffee.", "I drink a large black coffee every morning."),
]


@pytest.mark.parametrize(("a", "b"), DIFFER)
def test_statements_that_differ_in_one_word_are_not_restatements(a: str, b: str) -> None:
    assert not restates(a, b) and not restates(b, a)


@pytest.mark.parametrize(("a", "b"), SAME)
def test_the_same_words_are_a_restatement(a: str, b: str) -> None:
    assert restates(a, b) and restates(b, a)


@pytest.mark.parametrize(("a", "b"), REORDERED)
def test_the_same_words_in_an_order_that_changes_no_role_are_a_restatement(a: str, b: str) -> None:
    assert restates(a, b) and restates(b, a)


def test_remember_keeps_a_fact_that_differs_only_in_a_sign_or_in_which_number_is_which(
    home: Path,
) -> None:
    """Both were refreshed into the old text (session 24 review): "-18 degrees" even as an
    exact duplicate (the fold dropped the sign), "one dog and two cats" as a restatement."""
    store = SqliteStore(home / "memlife.db")
    mem = LongTermMemory(store, ledger=AccessLedger(home / "ledger"))
    try:
        ns = "/users/u1/facts"
        for old, new in (("The freezer is at -18 degrees.", "The freezer is at 18 degrees."),
                         ("I have two dogs and one cat.", "I have one dog and two cats.")):  # fmt: skip
            first = mem.remember("u1", ns, None, old)
            second = mem.remember("u1", ns, None, new)
            assert second.created and second.refreshed_duplicate_of is None
            assert store.get(first.record_id).content == old
            assert store.get(second.record_id).content == new
    finally:
        mem.close()
        store.close()


def test_remember_never_confirms_an_old_fact_with_a_new_one(home: Path) -> None:
    """A near duplicate (cosine 0.98) saying another number is a new memory; the old one
    is not marked verified by it."""
    store = SqliteStore(home / "memlife.db")
    mem = LongTermMemory(store, ledger=AccessLedger(home / "ledger"))
    try:
        ns = "/users/u1/facts"
        old = mem.remember("u1", ns, None, "Caroline is allergic to 2 medications.")
        before = store.get(old.record_id)
        new = mem.remember("u1", ns, None, "Caroline is allergic to 3 medications.")
        assert new.created and new.refreshed_duplicate_of is None
        assert store.get(old.record_id) == before  # not refreshed, not verified
        again = mem.remember("u1", ns, None, "caroline is allergic to 3 medications")
        assert not again.created and again.refreshed_duplicate_of == new.record_id
    finally:
        mem.close()
        store.close()
