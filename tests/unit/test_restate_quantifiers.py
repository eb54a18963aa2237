"""Session 42, audit h: the session 42's list items a quantifier or number opens, and its
relative word after a clause's fourth word.

A quantifier from the session's list opens an item counted whole, but each word of the
list is held by no test, nor is "some" (filler) before the item. Number words past "six",
a relative "that" after a fifth word and an item of four words after its determiner still
let roles trade; and the pairs after a relative word keep a list's items in order, so a
LoCoMo observation with its two adjectives swapped no longer restates itself."""

from __future__ import annotations

import pytest

from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore
from tests.support.restating import both, neither


@pytest.mark.parametrize(
    "quantifier", ["all", "both", "several", "many", "few", "each", "two", "three", "four",
                   "five", "six"],
)  # fmt: skip
def test_every_quantifier_opens_a_list_item_whole(quantifier: str) -> None:
    """The adversary trades the object into the subject list behind each of the session's
    quantifiers ("Jon and all old friends sued Gina"). Must hold: neither restates the
    other (who sued whom changed)."""
    noun = "friend" if quantifier == "each" else "friends"
    a = f"Jon and {quantifier} old {noun} sued Gina."
    b = f"Jon and Gina sued {quantifier} old {noun}."
    assert neither(a, b)


def test_an_item_after_the_filler_some_counts_whole() -> None:
    """ "some" is filler, so it is read as the word before the item ("old school friends"),
    as "the" is. The adversary trades that three-word item into the object. Must hold:
    neither restates the other."""
    assert neither(
        "Jon and some old school friends sued Gina.", "Jon and Gina sued some old school friends."
    )


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Jon and seven old friends sued Gina.", "Jon and Gina sued seven old friends."),
        ("Jon and twelve old friends sued Gina.", "Jon and Gina sued twelve old friends."),
        ("Jon and one old friend sued Gina.", "Jon and Gina sued one old friend."),
        ("Mom and seven old friends met dad.", "Mom and dad met seven old friends."),
    ],
)
def test_a_list_item_any_number_word_opens_counts_whole(a: str, b: str) -> None:
    """As "two old friends" (session 42), but with a number word the quantifier list
    lacks ("seven", "twelve", "one"). Must hold: neither restates the other."""
    assert neither(a, b)


def test_remember_keeps_a_fact_traded_behind_seven(
    memory_and_store: tuple[LongTermMemory, SqliteStore],
) -> None:
    """The user says "Jon and Gina sued seven old friends", then the opposite. Must hold:
    the second is stored beside the first, not taken as its restatement."""
    m, store = memory_and_store
    ns = "/users/u1/facts"
    m.remember("u1", ns, None, "Jon and Gina sued seven old friends.")
    second = m.remember("u1", ns, None, "Jon and seven old friends sued Gina.")
    assert second.created and second.refreshed_duplicate_of is None
    assert len(store.page("u1", ns).records) == 2


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Melanie's two young kids that love dogs fear cats.",
         "Melanie's two young kids that love cats fear dogs."),
        ("Caroline thinks her new friend that loves dogs fears cats.",
         "Caroline thinks her new friend that loves cats fears dogs."),
    ],
)  # fmt: skip
def test_a_relative_clause_after_five_words_keeps_its_order(a: str, b: str) -> None:
    """One modifier more than session 42's case (a possessive "'s" is a word of its own):
    what the kids love and what they fear trade places. Must hold: neither restates the
    other."""
    assert neither(a, b)


def test_a_list_item_of_four_words_after_its_determiner_counts_whole() -> None:
    """ "his three old school friends": the item's last two words are left out of it, so
    trading it into the object is unread. Must hold: neither restates the other."""
    assert neither(
        "Jon and his three old school friends sued Gina.",
        "Jon and Gina sued his three old school friends.",
    )


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # LoCoMo (conv-43, Tim): restated before session 42, not after
        ("Tim recently attended an event that he found fantastic and special, being with other"
         " fans who share his love for it.",
         "Tim recently attended an event that he found special and fantastic, being with other"
         " fans who share his love for it."),
        ("Caroline told her friend that she loves pottery and painting.",
         "Caroline told her friend that she loves painting and pottery."),
    ],
)  # fmt: skip
def test_a_list_reordered_after_a_relative_word_still_restates(a: str, b: str) -> None:
    """An agent writes an observation again with its list's two items swapped; the
    relative word now follows the clause's fourth word, and every two words after it keep
    their order, the list's items too. Must hold: each restates the other (one record)."""
    assert both(a, b)
