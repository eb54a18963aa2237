"""Mutation pass over audit 51x5's `restate_only.only_scopes` (audit 51m2).

Each pair is judged by `memlife.restate.restates` both ways, as an offline night does.
Each test passes on the current code and fails under a hand mutant the session's tests let
live: the scope scan crossing a clause mark (or clauses not counted), filler words taken
as the phrase "only" restricts, the clause's first word never reached by the backward
scan.
"""

from __future__ import annotations

import pytest

from tests.support.restating import both, neither


def test_only_ending_a_clause_restricts_that_clause_not_the_next() -> None:
    """Kills the scan crossing a clause mark (`where[j] == where[i]` dropped, or the clause
    count never advanced): "meat only, on Sundays" (on Sundays, nothing but meat) is not
    "meat on Sundays only" (meat once a week)."""
    assert neither("Eats meat only, on Sundays.", "Eats meat on Sundays only.")


@pytest.mark.parametrize(("a", "b"), [
    ("Eats meat at the club only.", "Eats meat only at the club."),
    ("Works out at the gym only.", "Works out only at the gym."),
])  # fmt: skip
def test_a_filler_word_between_does_not_hide_the_phrase_only_restricts(a: str, b: str) -> None:
    """Kills taking filler words in the scan: "at the gym only" restricts "at the gym", as
    "only at the gym" does: one statement, still merged."""
    assert both(a, b)


def test_only_after_a_phrase_that_opens_the_sentence_restricts_it() -> None:
    """Kills `0 < j` for `0 <= j`: the backward scan reaches the clause's first word ("At"
    at index 0), so "At night only, ..." and "Only at night, ..." say the same."""
    assert both("At night only, takes aspirin.", "Only at night, takes aspirin.")
