"""A summary may not swap a word for a lookalike of another stem (session 42).

"Alice sees a psychologist" for "Alice sees a psychiatrist" is a paraphrase to MiniLM and
passed the grounding check (docs/adversarial-review.md, "a swap MiniLM reads as a
paraphrase"). A word no source uses that shares its opening letters with a source word
but not its stem is refused (memlife/consolidate/lookalikes.py); forms of one word pass.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlife.consolidate import ConsolidationError
from memlife.consolidate.grounding import UNGROUNDED_CLAIM, check_grounding
from memlife.consolidate.lookalikes import lookalikes
from memlife.embed import MiniLMEmbedder
from tests.unit.test_grounding import code, emb, group, result

__all__ = ["emb"]  # the module-scoped embedder fixture


@pytest.mark.parametrize(
    ("source", "summary"),
    [
        ("Alice sees a psychiatrist every week.", "Alice sees a psychologist every week."),
        ("Jon is learning a new instrument.", "Jon is learning with a new instructor."),
        ("Gina has an interest in fashion.", "Gina has an interview in fashion."),
    ],
)
def test_a_lookalike_of_another_stem_is_refused(
    emb: MiniLMEmbedder, source: str, summary: str
) -> None:
    """The adversary's summary trades one word for one spelt like it (cosine 0.8 to 0.95,
    polarity alike, no number, date or name): it would supersede the source's fact."""
    assert code(result(summary), group(source), emb) == UNGROUNDED_CLAIM


@pytest.mark.parametrize(
    ("source", "summary"),
    [
        ("Nate won a tournament last week.", "Nate won a tourney last week."),
        ("Dave found restoring the car satisfying.", "Dave found satisfaction restoring the car."),
        ("I understand the plan now.", "I understood the plan now."),
        ("Her grandma taught her to knit.", "Her grandmother taught her to knit."),
    ],
)
def test_forms_of_one_word_still_ground(emb: MiniLMEmbedder, source: str, summary: str) -> None:
    """Stems that part within two letters, irregular forms and spellings of one kin word
    are no swap: the merge grounds."""
    assert code(result(summary), group(source), emb) is None


@pytest.mark.parametrize(
    ("source", "summary"),
    [
        ("Jon likes painting landscapes.", "Jon is a painter of landscapes."),
        ("Evan keeps believing in Sam.", "Evan has belief in Sam."),
        ("Maria loves photography.", "Maria loves being a photographer."),
        ("She researched adoption agencies.", "She researched adoptive agencies."),
        ("Caroline went to a support group.", "Caroline went to a supportive group."),
    ],
)
def test_derivations_are_no_lookalike(source: str, summary: str) -> None:
    """One stem opening the other, or the two parting within two letters ("believ" /
    "belief"), is one word's family. (What such a merge leaves out is the coverage
    check's: "painter" does not say "likes".)"""
    assert lookalikes(summary, [source]) == set()


def test_the_refusal_names_no_word(emb: MiniLMEmbedder) -> None:
    """The message ends up in receipts and logs: it counts, it never quotes either word."""
    g = group("Alice sees a psychiatrist every week.")
    with pytest.raises(ConsolidationError) as err:
        check_grounding(result("Alice sees a psychologist every week."), g, emb, 0.55)
    assert "psycholog" not in str(err.value) and "psychiatr" not in str(err.value)
    assert "lookalike" in str(err.value)


def test_a_lookalike_is_grounded_by_any_source_that_uses_it(emb: MiniLMEmbedder) -> None:
    """Both words said by the merge's sources: no swap, whichever the summary keeps."""
    g = group("Alice sees a psychiatrist.", "Alice's friend is a psychologist.")
    res = result("Alice sees a psychiatrist; her friend is a psychologist.", ids=("s-0", "s-1"))
    assert code(res, g, emb) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(
    "alice psychiatrist psychologist instrument instructor interest interview painter "
    "painting sees plays the a has".split()
), min_size=1, max_size=8))  # fmt: skip
def test_a_text_never_lacks_its_own_words(words: list[str]) -> None:
    """Whatever its words, a statement supports itself, and against no source it has none
    to look like."""
    text = " ".join(words)
    assert lookalikes(text, [text]) == set()
    assert lookalikes(text, []) == set()
