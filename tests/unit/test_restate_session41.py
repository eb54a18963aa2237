"""Restatements, session 41: a list item of several words, opened by a determiner.

"Jon and his old friend met Gina" is not "Jon and Gina met his old friend": the list that
opens a clause pairs each of its items with the clause's end, and an item opened by "his",
"the", "my"... runs over up to three words ("his old friend"), not only its first.
"""

from __future__ import annotations

import pytest

from tests.support.restating import both as _both
from tests.support.restating import neither as _neither


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Jon and his old friend met Gina.", "Jon and Gina met his old friend."),
        (
            "Jon and his old friend met Gina at the park.",
            "Jon and Gina met his old friend at the park.",
        ),
        ("mom and his old friend met dad", "mom and dad met his old friend"),
        ("Mom and her best friend visited grandma.", "Mom and grandma visited her best friend."),
        ("kids and their old dog fear cats", "kids and cats fear their old dog"),
        ("Jon and his friend met Gina.", "Jon and Gina met his friend."),
        ("Jon and the old man met Gina.", "Jon and Gina met the old man."),
    ],
)
def test_a_list_item_of_several_words_pairs_each_word_with_the_clause_end(a: str, b: str) -> None:
    """Attacks ``memlife/restate.py::_head_list``/``_item_end``: every word of an item a
    determiner opens stands in the head list, so the object traded into it is a trade."""
    assert _neither(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("She and her best friend went hiking.", "Her best friend and she went hiking."),
        ("Jon and his old friend met Gina.", "Jon and his old friend met Gina."),
        ("Jon and his old friend often met Gina.", "Jon and his old friend met Gina often."),
    ],
)
def test_the_same_list_said_again_still_restates(a: str, b: str) -> None:
    """The item's span must not reach the verb or the object: the same statement, its list
    reordered or a trailing word moved, is one statement (a merge keeps either)."""
    assert _both(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Kids who love dogs fear cats.", "Kids who love cats fear dogs."),
        ("Kids who love dogs fear cats.", "Kids who fear cats love dogs."),
        ("People who hate cats love dogs.", "People who love dogs hate cats."),
        ("Friends who visit often help me.", "Friends who help me visit often."),
        ("Dogs that bark rarely bite.", "Dogs that bite rarely bark."),
        ("The man who sold me a car lives nearby.", "The man who lives nearby sold me a car."),
    ],
)
def test_words_traded_between_a_relative_clause_and_its_main_clause(a: str, b: str) -> None:
    """Attacks the relative-clause pairs in ``memlife/restate.py::_shape``: with a subject
    a "who"/"that" clause restricts, which verb each word belongs to is only its order, so
    two words traded across the verbs are another statement (the subset changes)."""
    assert _neither(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Kids who love dogs fear cats.", "kids who love dog fear cat"),
        ("Caroline has friends who support her.", "Caroline has friends who support her!"),
        ("The kids who love dogs fear cats.", "Kids who love the dogs fear the cats."),
    ],
)
def test_a_relative_clause_said_again_still_restates(a: str, b: str) -> None:
    """Only a changed order counts: the same words in the same order are one statement."""
    assert _both(a, b)
