"""The coverage check, attacked: a merge that drops what a superseded record said.

Every case here passed grounding before coverage existed (each claim of the summary comes
from a source), and the replacement would have retired the dropped fact unsaid.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlife.consolidate import ConsolidationError, ConsolidationResult, Group, check_grounding
from memlife.consolidate.coverage import DROPPED_FACT, content_words
from memlife.embed import MiniLMEmbedder, default_embedder
from tests.unit.test_grounding import THRESHOLD, group  # records one a day, as grounding's


@pytest.fixture(scope="module")
def emb() -> MiniLMEmbedder:
    return default_embedder()


def check(summary: str, g: Group, emb: MiniLMEmbedder, **extra: object) -> str | None:
    res = ConsolidationResult(summary=summary, claims=[summary], confidence=0.9,
                              source_ids=[r.id for r in g.records], **extra)  # fmt: skip
    try:
        check_grounding(res, g, emb, THRESHOLD)
    except ConsolidationError as exc:
        # receipts and logs carry the message: ids and counts, never a word of a memory
        told = content_words(str(exc)) - content_words(" ".join(r.id for r in g.records))
        assert not told & content_words(" ".join(r.content for r in g.records)), str(exc)
        return exc.code
    return None


@pytest.mark.parametrize(
    ("sources", "summary"),
    [
        # one member's list item ("and to shellfish": the session 24 review's case)
        (("I am allergic to peanuts.", "I am allergic to peanuts and to shellfish."),
         "I am allergic to peanuts."),
        # another person's fact folded into one ("two people merged")
        (("Tom works as a nurse.", "Sam works as a nurse."), "Tom works as a nurse."),
        # the year one member gives
        (("Alice visited Paris in 2019.", "Alice visited Paris."), "Alice visited Paris."),
        # a clause that denies: the summary keeps the half that affirms
        (("Switched to black coffee every morning; no longer drinks tea.",
          "Drinks black coffee every morning."), "Drinks black coffee every morning."),
        # a detail after a comma
        (("Alice drinks green tea every morning, before her shift at the hospital.",
          "Alice drinks green tea every morning."), "Alice drinks green tea every morning."),
        # a dose
        (("Takes 5 mg of melatonin at night.", "Takes melatonin at night."),
         "Takes melatonin at night."),
    ],
)  # fmt: skip
def test_a_duplicate_that_leaves_out_a_members_fact_is_refused(emb, sources, summary) -> None:
    assert check(summary, group(*sources), emb) == DROPPED_FACT


@pytest.mark.parametrize(
    ("sources", "summary"),
    [
        (("Alice phones her mum each Sunday.", "Every Sunday, Alice calls her mother."),
         "Every Sunday, Alice calls her mother."),
        (("Alice has a peanut allergy.", "Alice is allergic to peanuts."),
         "Alice is allergic to peanuts."),
        (("I am allergic to peanuts.", "I am allergic to peanuts and to shellfish."),
         "I am allergic to peanuts and to shellfish."),
        (("Alice started working at the bakery in March.",
          "Since March, Alice has worked at the bakery."),
         "Since March, Alice has worked at the bakery."),
        (("Lives in Lisbon.", "Likes jazz while working."),
         "Lives in Lisbon and likes jazz while working."),
        (("Recently, Alice adopted a cat named Miso.", "Alice adopted a cat named Miso."),
         "Alice adopted a cat named Miso."),
    ],
)  # fmt: skip
def test_a_merge_that_keeps_every_fact_is_accepted(emb, sources, summary) -> None:
    assert check(summary, group(*sources), emb) is None


def test_what_an_update_retires_need_not_be_said(emb) -> None:
    g = group("Drinks only green tea, never coffee.",
              "Switched to black coffee every morning; no longer drinks tea.")  # fmt: skip
    summary = "Switched to black coffee every morning; no longer drinks tea."
    assert check(summary, g, emb) == DROPPED_FACT  # as a duplicate the tea is dropped unsaid
    assert check(summary, g, emb, relation="update", outdated_ids=["s-0"]) is None
    # the planner's contradicted records and an older version of the newest are retired too
    assert check(summary, group(*(r.content for r in g.records), superseded=(0,)), emb) is None
    versions = group("I am allergic to 2 medications.", "I am allergic to 3 medications.")
    assert check("I am allergic to 3 medications.", versions, emb) is None


def test_a_kept_member_cannot_be_retired_by_an_update_that_drops_it(emb) -> None:
    g = group("I live in Paris.", "I work as a nurse.", "I moved to Berlin last month.")
    res = {"relation": "update", "outdated_ids": ["s-0"]}
    assert check("I moved to Berlin last month.", g, emb, **res) == DROPPED_FACT
    assert check("I moved to Berlin last month and work as a nurse.", g, emb, **res) is None


ITEMS = ["peanuts", "shellfish", "penicillin", "latex", "pollen", "cats", "eggs", "wasps"]


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.sampled_from(ITEMS), min_size=2, max_size=4, unique=True),
    st.data(),
)
def test_any_item_left_out_of_a_listed_allergy_is_refused(emb, items, data) -> None:
    """Members list allergies; the summary lists a subset. Refused exactly when an item
    some member names is missing from it."""
    said = data.draw(st.lists(st.sampled_from(items), min_size=1, unique=True))
    cut = data.draw(st.integers(1, len(items) - 1))

    def listing(xs: list[str]) -> str:
        return "I am allergic to " + (" and ".join(xs) if len(xs) < 3
                                      else ", ".join(xs[:-1]) + " and " + xs[-1]) + "."  # fmt: skip

    g = group(listing(items[:cut]), listing(items))
    got = check(listing(said), g, emb)
    assert (got == DROPPED_FACT) == (set(said) != set(items)), (items, said, got)


def test_a_habit_may_change_tense_but_not_drop_a_detail(emb) -> None:
    """One event told again and again (a recurring group) becomes a habit in the present
    tense; the habit must still say where and when."""
    run = "Went for a run along the river before work."
    g = dataclasses.replace(group(run, run, run), recurring=True)
    assert check("Goes for a run along the river before work.", g, emb) is None
    assert check("Goes for a run along the river.", g, emb) == DROPPED_FACT
    assert check("Goes for a walk along the river before work.", g, emb) == DROPPED_FACT
    g = dataclasses.replace(g, recurring=False)  # as duplicates: not a restatement
    assert check("Goes for a run along the river before work.", g, emb) == DROPPED_FACT
