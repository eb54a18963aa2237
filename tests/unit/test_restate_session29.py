"""Session 29: a text holding a list's one-word item ("tea and cake") was not compared
clause by clause, so objects traded between its clauses passed as one statement
("likes tea and cake, but hates coffee" / "likes coffee and cake, but hates tea"):
`remember` refreshed the old fact and the night kept one. A list's item now belongs to a
clause (the first word after its "and" too: "friends, family, and mentors are her
rocks"), so the clauses are compared and the list keeps any order. On LoCoMo's
observations (a script over ../shared/data): nouns swapped between clauses of such texts
caught 287 of 295 (113 before); list items reordered (84) never newly refused."""

from __future__ import annotations

import pytest

from memlife.restate import restates

SWAPPED = [
    ("likes tea and cake, but hates coffee", "likes coffee and cake, but hates tea"),
    ("Mel likes hiking and swimming but hates running", "Mel likes running and swimming but hates hiking"),
    ("Bought apples, pears and milk, then cooked pasta", "Bought pasta, pears and milk, then cooked apples"),
    ("Caroline's friends, family, and mentors support her, and her job drains her",
     "Caroline's friends, family, and job support her, and her mentors drain her"),
    # LoCoMo observations, a noun moved between clauses
    ("Audrey emphasizes the importance of patience, love, and regular training in building trust",
     "Audrey emphasizes the importance of trust, love, and regular training in building patience"),
    ("Nate enjoys playing video games, watching movies, and reading books when he is bored",
     "Nate enjoys playing video games, watching books, and reading movies when he is bored"),
]  # fmt: skip
RESTATED = [
    ("likes tea and cake, but hates coffee", "likes cake and tea, but hates coffee"),
    ("likes tea, coffee and cake", "likes cake, tea and coffee"),
    ("Caroline's friends, family, and mentors are her rocks",
     "Caroline's mentors, friends and family are her rocks"),
    ("Tea, coffee and cake are her favourites", "Cake, tea and coffee are her favourites"),
    ("hates coffee, but likes tea and cake", "likes cake and tea, but hates coffee"),
    ("Evan enjoys skiing, snowboarding, and skating in winter",
     "Evan enjoys snowboarding, skating, and skiing in winter"),
]  # fmt: skip


@pytest.mark.parametrize(("a", "b"), SWAPPED)
def test_objects_traded_between_clauses_of_a_text_with_a_list_are_two_statements(
    a: str, b: str
) -> None:
    assert not restates(a, b) and not restates(b, a)


@pytest.mark.parametrize(("a", "b"), RESTATED)
def test_a_list_in_another_order_still_restates(a: str, b: str) -> None:
    assert restates(a, b) and restates(b, a)
