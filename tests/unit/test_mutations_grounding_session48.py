"""Session 48 (audit 48m): the words audit 48b's grounding reads (`_WORD`, `number_value`).

A compound number word ("twenty-five") is a specific whose value is tens plus unit: a model
that turns a source's "twenty" into "twenty-five" states a number no source holds, and a
range of two unit words ("two-three") is no sum. A word ends in a letter or digit: a
closing quote is not part of the name it closes.
"""

from __future__ import annotations

from memlife.consolidate.grounding import specifics
from tests.unit.test_grounding import code, emb, group, result  # noqa: F401 - emb: fixture


def test_a_compound_number_word_is_read_as_tens_plus_unit() -> None:
    """ "twenty-five" is 25 (not the 20 its first half names), "Forty-Two" 42 whatever its
    case; "two-three" (a range of unit words) is no number word and adds no 5."""
    assert specifics("I drink twenty-five cups of coffee.") == {"25"}
    assert specifics("Forty-Two is the answer.") == {"42"}
    assert "5" not in specifics("We stay two-three days.")


def test_a_source_s_tens_word_cannot_carry_a_compound_one(emb) -> None:  # noqa: F811
    """The source says "twenty cups"; the model writes "twenty-five cups": refused as a
    number no source states; the source's own "25 cups" grounds it."""
    summary = "I drink twenty-five cups of coffee a week."
    g = group("I drink twenty cups of coffee a week.")
    assert code(result(summary), g, emb) == "UNGROUNDED_CLAIM"
    assert code(result(summary), group("I drink 25 cups of coffee a week."), emb) is None


def test_a_closing_quote_is_not_part_of_the_word_it_closes(emb) -> None:  # noqa: F811
    """The model puts a title from the sources in quotes ("I read 'Dune' twice."): the
    specific is "dune", not "dune'", and the quoted summary still grounds."""
    assert specifics("I read 'Dune' twice.") == {"dune"}
    assert specifics("Loves the book 'Charlotte's Web'.") == {"charlotte's", "web"}
    assert code(result("I read 'Dune' twice."), group("I read Dune twice."), emb) is None
