"""Audit 50m (session 50): mutation pass over audit 50l's ``derivation``.

The session's tests take one inflection off a word at a time; they let live the mutants
that cut one ending only, or that forgot "-ly" or a final "y". Each case below is a word
Snowball stems with its inflection, taken with the real stemmer: its derivation is "",
as its bare form's is (a word must not read as another word of its own).
"""

from __future__ import annotations

import pytest
import Stemmer

from memlife.restate_forms import derivation

_ST = Stemmer.Stemmer("english")


@pytest.mark.parametrize(
    ("word", "bare"),
    [
        ("paintings", "painting"),  # "-ing" + "-s": two endings (kills range(1))
        ("quickly", "quick"),  # "-ly" (kills the mutant without "ly")
        ("happy", "happy"),  # a final "y" Snowball turned into "i" (kills the one without "y")
        ("studies", "study"),
        ("running", "run"),
    ],
)
def test_an_inflected_word_has_its_bare_forms_derivation(word: str, bare: str) -> None:
    assert derivation(word, _ST.stemWord(word)) == ""
    assert derivation(bare, _ST.stemWord(bare)) == ""


def test_control_a_derived_word_keeps_its_ending() -> None:
    """The session's finding, held: "experiments" and "classical" are other words."""
    assert derivation("experiments", _ST.stemWord("experiments")) == "ment"
    assert derivation("classical", _ST.stemWord("classical")) == "al"
