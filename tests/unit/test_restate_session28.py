"""Session 28: `restates` compared each statement's words as one bag, so two statements
whose clauses trade their objects ("likes tea, hates coffee" / "likes coffee, hates tea")
were one statement: `remember` refreshed the old fact, and the night merged the two and
kept one. Each clause's last two words now stay together. Whole clauses in another order,
and lists of one-word items in another order, still restate. The swapped pairs failed
before."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlife.online.memory import LongTermMemory
from memlife.restate import restates
from memlife.stores.sqlite import SqliteStore

SWAPPED = [
    ("Likes tea, hates coffee", "Likes coffee, hates tea"),
    ("Likes tea and hates coffee", "Likes coffee and hates tea"),
    ("Likes green tea and black coffee", "Likes black tea and green coffee"),
    ("Plays guitar, sings jazz", "Plays jazz, sings guitar"),
    ("Teaches math at school; tutors chemistry at home",
     "Teaches chemistry at school; tutors math at home"),
    ("Alice likes coffee and Bob likes tea", "Alice likes tea and Bob likes coffee"),
    ("Runs 5 km on Mondays, swims 2 km on Fridays", "Runs 5 km on Fridays, swims 2 km on Mondays"),
    ("Visited Paris in May or Rome in June", "Visited Paris in June or Rome in May"),
    ("Cats are fine, dogs arent", "Dogs are fine, cats arent"),  # a negation after its subject
    # across after, because, when, who... (the session's review)
    ("Caroline moved to Boston after she left Sweden", "Caroline left Boston after she moved to Sweden"),
    ("Joanna paints portraits because she loves faces", "Joanna paints faces because she loves portraits"),
]  # fmt: skip
RESTATED = [  # the same clauses in another order, lists in another order, one clause
    ("Caroline hates coffee and likes tea", "Caroline likes tea and hates coffee"),
    ("My sister likes tea and hates coffee", "my sister hates coffee, and likes tea"),
    ("Likes tea and coffee", "likes coffee and tea"),
    ("Likes tea, coffee and juice", "likes juice, tea and coffee"),
    ("She moved abroad last year, and works nights",
     "She works nights, and moved abroad last year"),
    ("Went hiking, read a book", "read a book, went hiking"),
    ("Likes tea, hates coffee.", "likes tea , hates coffee"),
    ("Earns 1,000 dollars a week", "earns 1,000 dollars a week."),
    # a later clause's subject as a pronoun, or its be/have said again (the session's review)
    ("Caroline likes tea and she hates coffee", "Caroline hates coffee and she likes tea"),
    ("Gina is proud of Jon and is excited about his dance studio",
     "Gina is excited about his dance studio and is proud of Jon"),
]  # fmt: skip


@pytest.mark.parametrize(("a", "b"), SWAPPED)
def test_words_traded_between_clauses_are_another_statement(a: str, b: str) -> None:
    assert not restates(a, b) and not restates(b, a)


@pytest.mark.parametrize(("a", "b"), RESTATED)
def test_clauses_or_list_items_in_another_order_still_restate(a: str, b: str) -> None:
    assert restates(a, b) and restates(b, a)


_VERBS = ["likes", "hates", "plays", "cooks", "paints", "sells", "collects", "studies"]
_NOUNS = ["tea", "coffee", "jazz", "opera", "pasta", "rust", "chess", "tennis", "maps"]
_JOINS = [", ", " and ", "; ", ", and ", " or ", " but "]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(_VERBS), min_size=2, max_size=3, unique=True),
    st.lists(st.sampled_from(_NOUNS), min_size=3, max_size=3, unique=True),
    st.sampled_from(_JOINS),
    st.randoms(use_true_random=False),
)
def test_any_trade_of_objects_between_verbs_is_caught_and_any_clause_order_is_kept(
    verbs: list[str], nouns: list[str], join: str, rnd: object
) -> None:
    """An adversary's family: clauses "<verb> <noun>" joined one way. Moving the clauses
    around says the same; giving a verb another clause's object never does."""
    import random

    assert isinstance(rnd, random.Random)
    clauses = [f"{v} {n}" for v, n in zip(verbs, nouns, strict=False)]
    text = join.join(clauses)
    shuffled = clauses[:]
    rnd.shuffle(shuffled)
    assert restates(text, join.join(shuffled))
    objects = nouns[: len(verbs)]
    traded = objects[1:] + objects[:1]  # every verb gets another clause's object
    other = join.join(f"{v} {n}" for v, n in zip(verbs, traded, strict=True))
    assert not restates(text, other) and not restates(other, text)


# -- remember and the night: the traded fact is kept beside the first -----------------------
def test_remember_keeps_a_fact_whose_clauses_trade_objects(
    memory_and_store: tuple[LongTermMemory, SqliteStore],
) -> None:
    m, store = memory_and_store
    ns = "/users/u1/prefs"
    m.remember("u1", ns, None, SWAPPED[0][0])
    second = m.remember("u1", ns, None, SWAPPED[0][1])
    assert second.created and second.refreshed_duplicate_of is None
    assert sorted(r.content for r in store.page("u1", ns).records) == sorted(SWAPPED[0])
    first = m.remember("u1", "/users/u1/again", None, "Likes tea, hates coffee")
    again = m.remember("u1", "/users/u1/again", None, "hates coffee, and likes tea")
    assert not again.created and again.refreshed_duplicate_of == first.record_id
