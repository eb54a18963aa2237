"""A summary may not swap a kin, feeling, colour or compass word (session 41).

"My brother is a doctor" for "My sister is a doctor" is 0.95 from its source, names no
number, date or name, and passed the grounding check (docs/adversarial-review.md, the
session 24 review's "a swap MiniLM reads as a paraphrase"): now each such word must be
one some source uses (memlife/consolidate/swap_words.py), spellings of one value alike.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlife.consolidate.grounding import UNGROUNDED_CLAIM
from memlife.consolidate.swap_words import swap_values, unsupported
from memlife.embed import MiniLMEmbedder
from tests.unit.test_grounding import code, emb, group, result

__all__ = ["emb"]  # the module-scoped embedder fixture


@pytest.mark.parametrize(
    ("source", "summary"),
    [
        ("Gina's mom runs a bakery.", "Gina's dad runs a bakery."),
        ("Melanie loves camping with her kids.", "Melanie hates camping with her kids."),
        ("Melanie enjoys pottery.", "Melanie dislikes pottery."),
        ("Caroline lives on the east side.", "Caroline lives on the west side."),
        ("Caroline lives on the east side.", "Caroline lives on the western side."),
        ("Jon painted his car red.", "Jon painted his car blue."),
        ("My aunt visited in spring.", "My uncle visited in spring."),
        ("Her grandma taught her to knit.", "Her grandpa taught her to knit."),
        ("My sister is a doctor.", "My sister and my brother are doctors."),
    ],
)
def test_a_swapped_kin_feeling_colour_or_compass_word_is_refused(
    emb: MiniLMEmbedder, source: str, summary: str
) -> None:
    """Attacks the ``unsupported`` check in ``check_grounding``: without it each of these
    grounds (cosine 0.88 to 0.95, polarity alike, no specific)."""
    assert code(result(summary), group(source), emb) == UNGROUNDED_CLAIM


@pytest.mark.parametrize(
    ("source", "summary"),
    [
        ("Gina's mom runs a bakery.", "Gina's mother runs a bakery."),
        ("Melanie loves camping with her kids.", "Melanie adores camping with her kids."),
        ("Her grandma taught her to knit.", "Her grandmother taught her to knit."),
        ("Jon's car is gray.", "Jon's car is grey."),
        ("My sister is a doctor.", "My sister works as a doctor."),
    ],
)
def test_another_spelling_of_the_same_value_still_grounds(
    emb: MiniLMEmbedder, source: str, summary: str
) -> None:
    """A paraphrase within one value ("mother" for "mom", "adores" for "loves") is no swap."""
    assert code(result(summary), group(source), emb) is None


def test_a_swap_word_is_grounded_by_any_source_of_the_merge(emb: MiniLMEmbedder) -> None:
    """A merge of two records may use the words of either: "sister" from one, "dad" from
    the other."""
    g = group("My sister is a doctor.", "My dad is a doctor.")
    res = result("My sister and my dad are doctors.", ids=("s-0", "s-1"))
    assert code(res, g, emb) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(
    "my mom mother dad loves hates red gray grey east western sister and the car is a".split()
), min_size=1, max_size=8))  # fmt: skip
def test_a_text_never_lacks_its_own_values(words: list[str]) -> None:
    """Whatever its words, a statement is supported by itself, and a value it uses is found
    in it: ``unsupported(t, [t])`` is empty and ``unsupported(t, [])`` is all its values."""
    text = " ".join(words)
    assert unsupported(text, [text]) == set()
    assert unsupported(text, []) == swap_values(text)


@pytest.mark.parametrize(
    "text", ["Alice has a lovely dog.", "The Western Union office.", "Redo it."]
)
def test_words_are_read_as_written_not_by_stem(text: str) -> None:
    """Snowball stems "lovely" to "love": a stem lookup read "a lovely dog" as a feeling and
    refused a merge that only dropped a fact (`test_coverage_session29`). Words are matched
    as written (and their plural): "western" is a compass word, "lovely" and "redo" none."""
    expected = {"compass:west"} if "Western" in text else set()
    assert swap_values(text) == expected
