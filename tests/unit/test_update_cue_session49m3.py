"""Audit 49m3 (session 49, mutation pass): the negated update cue (``group.update_cue``) and
the concessions that deny nothing (``_NOT_A_DENIAL``), pinned where session 49's own tests
left a hand mutation alive. Each case names the mutation it kills."""

from __future__ import annotations

import pytest

from memlife.group import looks_like_update, update_cue


@pytest.mark.parametrize(
    "text",
    [
        "The plan has not changed since March.",  # every verb cue is one a negation denies
        "She has not switched teams.",
        "He never moved out of Leeds.",
        "They have not replaced the old boiler.",
        "She never stopped running.",
        "I dont quit, whatever happens.",  # negations written without an apostrophe
        "He cannot quit the band.",
        "She hasnt given up chess.",
        "He won\u2019t quit the band.",  # a typographic apostrophe, as phones write it
        "She doesn\u02bct give up.",
        "He would never really give up chess.",  # one adverb between
        "She promised not to quit the choir.",
        "They have not yet switched providers.",
    ],
)
def test_a_negated_update_verb_is_no_cue(text: str) -> None:
    assert not update_cue(text)


@pytest.mark.parametrize(
    "text",
    [
        "I am not now a smoker.",  # "now" is no verb: a negation before it leaves it a cue
        "She does not any more.",
        "He never now eats meat.",
        "I wasn't instead going to the gym; I swim.",
    ],
)
def test_a_cue_that_is_no_verb_stays_a_cue_after_a_negation(text: str) -> None:
    assert update_cue(text)


def test_a_negation_far_before_the_verb_does_not_deny_it() -> None:
    # the negation governs "happy", not "quit": she quit (control for the 40-char window)
    assert update_cue("She was not happy at the firm, so last week she quit it.")


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("Kim has a doubt about the move.", "Kim has no doubt the move was right."),
        ("Ana paints every weekend.", "Ana not only paints, she sculpts."),
    ],
)
def test_no_doubt_and_not_only_deny_nothing(older: str, newer: str) -> None:
    assert not looks_like_update(newer, older)


def test_a_concession_elsewhere_leaves_a_real_denial_a_denial() -> None:
    # "no matter what" concedes; "does not eat meat" still turns round "eats meat"
    assert looks_like_update("No matter what, Lee does not eat meat.", "Lee eats meat daily.")
