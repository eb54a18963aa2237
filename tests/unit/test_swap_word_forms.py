"""Forty-second audit a: faithful merges the swap-word check refuses (session 41).

``consolidate/swap_words.py`` lets a summary use a kin, feeling, colour or compass word
only where a source uses the same value "in any spelling, and its plural". A source's own
word in another written form is not read as that value, so a faithful merge is refused
as UNGROUNDED_CLAIM (it goes to review instead of merging)."""

from __future__ import annotations

import pytest

from memlife.consolidate.swap_words import unsupported
from memlife.embed import MiniLMEmbedder
from tests.unit.test_grounding import code, emb, group, result

__all__ = ["emb"]  # the module-scoped embedder fixture


def test_a_first_person_like_grounds_the_third_person_likes(emb: MiniLMEmbedder) -> None:
    """An agent keeps "I like hiking on weekends." and summarises it in the third person,
    as summaries are written. "like" is left out of the feeling words ("looks like"), so
    the source's own verb grounds no "likes": the faithful merge is refused. Must hold: the
    summary grounds (a feeling of the same sign, the source's own verb)."""
    assert unsupported("Likes hiking on weekends.", ["I like hiking on weekends."]) == set()
    summary = "The user likes hiking on weekends."
    assert code(result(summary), group("I like hiking on weekends."), emb) is None


@pytest.mark.parametrize(
    ("source", "summary"),
    [
        ("Melanie's stepmom lives in Ohio.", "Melanie's step-mom lives in Ohio."),
        ("Jon's stepson plays chess.", "Jon's step-son plays chess."),
        ("Caroline lives in northeast England.", "Caroline lives in north-east England."),
        (
            "Caroline moved to the southwest of France.",
            "Caroline moved to the south west of France.",
        ),
    ],
)
def test_a_compound_written_with_a_hyphen_or_a_space_is_one_value(
    emb: MiniLMEmbedder, source: str, summary: str
) -> None:
    """The summary writes the source's own kin or compass word apart (a hyphen, a space)
    where the source joins it: "step-mom" reads as "mom" (kin:mother), not
    kin:stepmother; "north-east" as north and east, not northeast. Must hold: one word in
    two spellings grounds, as "grey" does "gray"."""
    assert unsupported(summary, [source]) == set()
    assert code(result(summary), group(source), emb) is None


def test_a_plural_in_ies_is_the_words_plural(emb: MiniLMEmbedder) -> None:
    """ "grannies" is the plural of "granny" (kin:grandmother), but plurals are formed by
    adding "s" alone ("grannys"), so a source saying "grannies" grounds no "granny", nor
    "daddies" "daddy". Must hold: a word's plural reads as its value."""
    assert unsupported("Her granny and her daddy live in Leeds.",
                       ["Her grannies and daddies live in Leeds."]) == set()  # fmt: skip
