"""Session 27: `restates` scoped only the negations not, no, never, n't, cannot, without,
neither and nor, and read only than, over, instead of and prefer ... to as comparisons. A
negation written otherwise ("none", "nobody", "nothing", "nowhere", "no one", "rarely",
"except", "quit", an apostrophe-less "dont" / "doesnt" / "cant") or a comparison written
"vs" / "versus" / "compared to" / "as opposed to" was a plain word, so two statements that
swap the words on its two sides were one statement: `remember` refreshed the old fact and
the night merged the two. The swapped pairs failed before; a negation written without an
apostrophe now also restates its written-out form (a missed merge before)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlife.online.memory import LongTermMemory
from memlife.restate import restates
from memlife.stores.sqlite import SqliteStore

SWAPPED = [
    # negations outside the old list
    ("Has friends at school, none at work", "Has friends at work, none at school"),
    ("Friends know about it, nobody at work", "Nobody knows about it, friends at work"),
    ("Drinks coffee, nothing with milk", "Drinks milk, nothing with coffee"),
    ("Travels at home, nowhere abroad", "Travels abroad, nowhere at home"),
    ("Noone at home smokes, everyone at work does", "Noone at work smokes, everyone at home does"),
    ("Eats fish, rarely meat.", "Eats meat, rarely fish."),
    ("Seldom drinks wine, often beer", "Seldom drinks beer, often wine"),
    ("Hardly sleeps on weekdays, plenty on weekends", "Hardly sleeps on weekends, plenty on weekdays"),
    ("Eats everything except fish and pork, likes chicken",
     "Eats everything except chicken and pork, likes fish"),
    ("Quit smoking and started running", "Quit running and started smoking"),
    ("Stopped drinking coffee, drinks tea", "Stopped drinking tea, drinks coffee"),
    # negations without an apostrophe, or with another one
    ("Likes cats but doesnt like dogs", "Likes dogs but doesnt like cats"),
    ("I dont eat meat and drink wine", "I dont drink wine and eat meat"),
    ("Has cats but hasnt got dogs", "Has dogs but hasnt got cats"),
    ("Can swim but cant dive", "Can dive but cant swim"),
    ("Will fly economy, wont fly business again", "Will fly business, wont fly economy again"),
    ("Was at home, wasnt at work", "Was at work, wasnt at home"),
    ("Likes cats but doesn\u02bct like dogs", "Likes dogs but doesn\u02bct like cats"),
    ("Likes cats but doesn`t like dogs", "Likes dogs but doesn`t like cats"),
    # comparisons
    ("Prefers tea vs coffee", "Prefers coffee vs tea"),
    ("Prefers tea vs. coffee", "Prefers coffee vs. tea"),
    ("Prefers tea versus coffee", "Prefers coffee versus tea"),
    ("Likes tea as opposed to coffee", "Likes coffee as opposed to tea"),
    ("Likes tea compared with coffee", "Likes coffee compared with tea"),
]  # fmt: skip
RESTATED = [  # the same negation or comparison, spelled otherwise or with lists reordered
    ("I dont eat meat", "I don't eat meat"),
    ("I dont eat meat.", "I do not eat meat"),
    ("Doesnt drink coffee", "doesn\u2019t drink coffee"),
    ("I cant swim.", "I cannot swim"),
    ("Wont fly Ryanair again.", "won't fly Ryanair again"),
    ("Isnt vegan", "is not vegan"),
    ("Didn\u02bct finish the course", "did not finish the course"),
    ("Noone at work knows", "no one at work knows"),
    ("Has friends at school, none at work.", "has friends at school , none at work"),
    ("Likes milk and sugar, nothing else", "likes sugar and milk, nothing else"),
    ("Nobody at work knows.", "nobody at work knows"),
    ("Likes all fruit except apples", "likes all fruit, except apples"),
    ("Prefers tea vs. coffee", "Prefers tea vs coffee"),
    ("Prefers tea vs coffee and juice", "prefers tea vs juice and coffee"),
    ("Prefers tea versus coffee.", "prefers TEA versus coffee"),
    ("Quit smoking last year.", "quit smoking last year"),
    ("Rarely eats meat", "rarely eats meat!"),
    ("Likes tea as opposed to coffee.", "likes tea, as opposed to coffee"),
]


@pytest.mark.parametrize(("a", "b"), SWAPPED)
def test_words_swapped_across_a_negation_or_comparison_of_any_spelling_are_another_statement(
    a: str, b: str
) -> None:
    assert not restates(a, b) and not restates(b, a)


@pytest.mark.parametrize(("a", "b"), RESTATED)
def test_the_same_words_on_the_same_sides_of_any_spelling_still_restate(a: str, b: str) -> None:
    assert restates(a, b) and restates(b, a)


def test_a_negation_is_not_a_word_it_merely_contains() -> None:
    """ "Went", "want" and "print" end like an apostrophe-less "n't" and are not negations;
    "none" and "nothing" are not "no": the word is kept, so a negation never vanishes."""
    assert restates("Went home and ate pasta", "Ate pasta and went home")
    assert restates("Want tea and cake", "want cake and tea")
    assert not restates("Has none", "Has no")
    assert not restates("Knows nobody", "Knows nothing")
    assert not restates("Eats meat", "Doesnt eat meat")
    assert not restates("Prefers tea vs coffee", "Prefers tea and coffee")


_NOUNS = ["peanuts", "shellfish", "tea", "coffee", "cats", "dogs", "jazz", "opera", "milk",
          "sugar", "trains", "planes", "pasta", "rust", "mornings", "evenings"]  # fmt: skip
_FRAMES = ["Likes {}, none of {}", "Knows {}, nobody from {}", "Eats {}, nothing with {}",
           "Likes {} but doesnt like {}", "Has {}, hasnt {}", "Can cook {}, cant cook {}",
           "Eats {}, rarely {}", "Likes {} vs {}", "Prefers {} versus {}",
           "Eats all {} except {}", "Quit {} and started {}", "Likes {} as opposed to {}",
           "Likes {} compared with {}", "Prefers {} vs. {}"]  # fmt: skip


def _variant(text: str, case: int, space: str, end: str) -> str:
    text = (text.lower(), text.upper(), text.capitalize(), text)[case]
    return text.replace(" ", space).replace(",", " ,") + end


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(_FRAMES),
    st.lists(st.sampled_from(_NOUNS), min_size=2, max_size=2, unique=True),
    st.integers(0, 3),
    st.sampled_from([" ", "  ", " \t"]),
    st.sampled_from(["", ".", "!", " ."]),
)
def test_swapping_the_sides_of_any_negation_or_comparison_is_never_a_restatement(
    frame: str, nouns: list[str], case: int, space: str, end: str
) -> None:
    x, y = nouns
    text = frame.format(x, y)
    assert not restates(text, frame.format(y, x))
    assert not restates(frame.format(y, x), text)
    again = _variant(text, case, space, end)
    assert restates(text, again) and restates(again, text)


# -- remember: the fact with its sides swapped is kept, a restatement still refreshes ---------
def test_remember_keeps_a_fact_swapped_across_none_dont_or_vs(
    memory_and_store: tuple[LongTermMemory, SqliteStore],
) -> None:
    m, store = memory_and_store
    for i, (old, new) in enumerate([SWAPPED[0], SWAPPED[12], SWAPPED[19]]):
        ns = f"/users/u1/sides{i}"
        m.remember("u1", ns, None, old)
        second = m.remember("u1", ns, None, new)
        assert second.created and second.refreshed_duplicate_of is None, (old, new)
        assert sorted(r.content for r in store.page("u1", ns).records) == sorted([old, new])
    ns = "/users/u1/sides-again"
    first = m.remember("u1", ns, None, "I dont eat meat.")
    again = m.remember("u1", ns, None, "I don't eat meat")
    assert not again.created and again.refreshed_duplicate_of == first.record_id
