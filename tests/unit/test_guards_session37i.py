"""Guards left untested by the thirtieth audit (session 37): superlinear work on hostile text.

Four regexes ran in quadratic time on text anyone can store (a remembered fact, an imported
record) or a model can answer with. Each test pins the *result* on the hostile input and on
the edge cases a linear rewrite must keep (a statement key must not move: it is stored and
matched against erasure tombstones); none measures time (bench/bounds.py does). Fixed in
session 37.
"""

from __future__ import annotations

import pytest

from memlife.consolidate.coverage import _items
from memlife.consolidate.grounding import _with_units, clauses, comma_parts, specifics
from memlife.text import norm_sha256, symbols_as_words

RUN = 20_000  # long enough to be hostile, short enough for the quadratic code to finish


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("!==>", " unequal  right arrow "),  # "!=" consumed, then "=>": an arrow still
        (">==>", " at least  right arrow "),
        ("<==>", " left right arrow "),
        ("a==>", "a right arrow "),
        ("<==x", " at most =x"),
        ("x >== y", "x  at least = y"),
        ("a-->", "a right arrow "),
        ("<--5", " left arrow  minus 5"),
        ("<---x", " left arrow x"),
        ("->==>", " right arrow  right arrow "),
        ("a=b==c=>d", "a=b==c right arrow d"),
    ],
)
def test_sign_word_arrow_runs_keep_their_reading(text: str, words: str) -> None:
    """Attacks the arrow branches ``-+>`` / ``=+>`` of ``memlife/text.py::_SIGN_WORD``: a run
    of "=" or "-" with no ">" was rescanned from each of its characters (quadratic:
    remember of a 64 KB "a====..." 9.8 s in the memory's lock). A lookbehind that only
    starts a run at its first character must still read an arrow after a consumed "!=" or
    ">=" (a plain ``(?<!=)`` reads "!==>" as "unequal =>"): statement keys may not move."""
    assert symbols_as_words(text) == words


def test_long_sign_runs_fold_as_short_ones() -> None:
    """Attacks ``memlife/text.py::_SIGN_WORD`` on its hostile input itself: a long run of
    "=" or "-" after a letter folds to the same key as a short one; one ending in ">" is
    an arrow."""
    assert norm_sha256("a" + "=" * RUN) == norm_sha256("a")
    assert norm_sha256("a" + "-" * RUN) == norm_sha256("a")
    assert norm_sha256("a" + "=" * RUN + ">") == norm_sha256("a right arrow")
    assert norm_sha256("a" + "-" * RUN + ">") == norm_sha256("a right arrow")


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("x-five kg", {"5 kg"}),  # the word alternative inside a token with no digit
        ("x5y kg", {"x5y kg"}),
        ("v2-beta kg now", {"v2-beta kg"}),
        ("abc def5 kg", {"def5 kg"}),
        ("q" * RUN + " 5 kg", {"5 kg"}),
        ("5" + "q" * RUN + " kg", {"5" + "q" * RUN + " kg"}),
    ],
)
def test_number_unit_reads_tokens_whole(text: str, found: set[str]) -> None:
    """Attacks ``memlife/consolidate/grounding.py::_NUMBER_UNIT``'s ``\\S*\\d\\S*``: it was
    tried from every character of a token with no digit (quadratic: ``specifics`` of a
    40 KB word 12 s, in the nightly grouping and grounding). Trying it only at a token's
    start (``(?<!\\S)``) must keep every reading, the word alternative inside a token too."""
    assert _with_units(text) == found


def test_specifics_of_a_long_word() -> None:
    """Attacks ``_NUMBER_UNIT`` through ``specifics``: a long word with no digit pins no
    number with a unit."""
    assert not {s for s in specifics("x" * RUN + " tea") if any(c.isdigit() for c in s)}


def test_clause_split_after_a_long_space_run() -> None:
    """Attacks ``\\s+but\\s+`` in ``memlife/consolidate/grounding.py::_CLAUSE_SPLIT``: it
    was tried from every character of a run of spaces (quadratic: 7.6 s on 40 KB). The
    clauses either side of a "but" after a long run are still two."""
    text = "tea is hot" + " " * RUN + "but coffee is cold"
    assert clauses(text) == ["tea is hot", "coffee is cold"]
    assert comma_parts(text) == []
    # a "but" a newline opens has no space left before it (the newline split): it stays
    assert clauses("tea is hot\nbut coffee is cold") == ["tea is hot", "but coffee is cold"]
    assert clauses("tea is hot. but coffee is cold") == ["tea is hot", "coffee is cold"]


def test_joiner_after_a_long_space_run() -> None:
    """Attacks ``memlife/consolidate/coverage.py::_JOINER`` (``\\s+(?:and|or|...)\\s+``,
    quadratic on a run of spaces: 42 s on 40 KB). A linear one (``(?<!\\s)`` first) must
    still split after a long run, and never split an "and" whose space the last one took."""
    assert _items("peanuts" + " " * RUN + "and   shellfish") == [
        ("peanuts", False),
        ("shellfish", False),
    ]
    assert _items("tea and and coffee") == [("tea", False), ("and coffee", False)]
