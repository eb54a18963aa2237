"""Forty-second audit a: roles traded that ``restates`` still reads as one statement.

Session 41 counts a list item a determiner opens whole ("Jon and his old friend met Gina"
is not "Jon and Gina met his old friend"), and keeps the order of the words after a
relative word that follows one of a clause's first three words ("kids who love dogs fear
cats"). A quantifier or a number opening the item, or a fourth word before the relative
word, leaves the trade unread: the two texts merge and one statement is lost."""

from __future__ import annotations

import pytest

from tests.support.restating import neither


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Jon and two old friends sued Gina.", "Jon and Gina sued two old friends."),
        ("Jon and 2 old friends sued Gina.", "Jon and Gina sued 2 old friends."),
        ("Mom and both her sisters sued dad.", "Mom and dad sued both her sisters."),
        ("Jon and several old friends sued Gina.", "Jon and Gina sued several old friends."),
    ],
)
def test_a_list_item_a_quantifier_opens_counts_whole(a: str, b: str) -> None:
    """The adversary trades the object into the subject list behind a quantifier or a
    number ("two old friends" where session 41 reads "his old friend"): who sued whom
    changes. Must hold: neither text restates the other."""
    assert neither(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("My two little dogs that love cats fear mice.",
         "My two little dogs that love mice fear cats."),
        ("My little brown dogs that love cats fear mice.",
         "My little brown dogs that love mice fear cats."),
    ],
)  # fmt: skip
def test_a_relative_clause_after_four_words_keeps_its_order(a: str, b: str) -> None:
    """The subject takes one more modifier ("my two little dogs that ..."), so the relative
    word follows the clause's fourth word: what the dogs love and what they fear trade
    places unread. Must hold: neither text restates the other."""
    assert neither(a, b)
