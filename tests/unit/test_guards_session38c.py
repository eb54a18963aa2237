"""Guards left untested by the thirty-fourth audit (session 38): the explicit dates a
query names (memlife/timeref.py), whether one statement restates another
(memlife/restate.py), a dry run's "an apply run would" (memlife/would_change.py) and the
superseded retention counted from the journal (memlife/superseded_since.py).

Each test holds one guard that a mutation showed no test held, or a real bug the audit
found and session 38 fixed (eight tests failed on the code before: a month with a long s
raised out of recall, "February 31, 2023" read as the year, and four ways restates() called
another fact a restatement, so remember() dropped it as a duplicate). Real components: the date reader, the restatement
rule, the online long-term memory over the SQLite store.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from memlife.restate import restates
from memlife.timeref import query_date_ranges

YEAR_2023 = [(date(2023, 1, 1), date(2023, 12, 31))]
JUNE_16 = [(date(2023, 6, 16), date(2023, 6, 16))]


# -- timeref.py: a date is not read out of a longer number ------------------------------------
def test_a_day_month_year_glued_to_more_digits_is_not_that_day() -> None:
    """Attacks the closing ``\\b`` of ``_DAY_MONTH_YEAR`` in memlife/timeref.py: "16 June
    20235" names no year 2023 (the number is 20235); without the boundary the query was
    read as 16 June 2023 and recall preferred what was saved that day."""
    assert query_date_ranges("what happened on 16 June 20235?") == []
    assert query_date_ranges("what happened on 16 June 2023?") == JUNE_16  # the control


def test_an_iso_day_glued_to_more_digits_is_not_that_day() -> None:
    """Attacks ``(?!\\d)`` after the day of ``_ISO_DAY`` in memlife/timeref.py:
    "2023-06-161" is no day (a serial, a version); only its year stands, as with any
    year-first text that is not a date."""
    assert query_date_ranges("build 2023-06-161 failed") == YEAR_2023
    assert query_date_ranges("build 2023-06-16 failed") == JUNE_16  # the control


def test_an_iso_month_before_a_slash_or_digit_is_only_its_year() -> None:
    """Attacks ``(?![\\d/-])`` of ``_ISO_MONTH`` in memlife/timeref.py: "2023-06/16" mixes
    two separators and "2023-061" has a three-digit month: neither is June 2023, only the
    year is read."""
    assert query_date_ranges("on 2023-06/16") == YEAR_2023
    assert query_date_ranges("ticket 2023-061") == YEAR_2023
    assert query_date_ranges("in 2023-06") == [(date(2023, 6, 1), date(2023, 6, 30))]


def test_a_year_first_month_thirteen_is_only_its_year_never_an_error() -> None:
    """Attacks ``1 <= month <= 12`` in the ``_ISO_MONTH`` loop of
    memlife/timeref.py::query_date_ranges: "2023-13" has no month 13; loosened to 13,
    ``date(2023, 13, 1)`` raised ValueError out of recall for a query a user typed."""
    assert query_date_ranges("what did I do in 2023-13?") == YEAR_2023
    assert query_date_ranges("what did I do in 2023-12?") == [
        (date(2023, 12, 1), date(2023, 12, 31))
    ]


def test_a_year_first_month_inside_a_day_already_read_is_not_read_again() -> None:
    """Attacks ``free(m)`` in the ``_ISO_MONTH`` loop of
    memlife/timeref.py::query_date_ranges: in "16 June 2023-07" the year belongs to the day
    read first; reading "2023-07" again added all of July 2023 to the periods recall
    prefers."""
    assert query_date_ranges("on 16 June 2023-07") == JUNE_16


def test_a_month_written_with_a_long_s_never_raises_out_of_the_date_reader() -> None:
    """A real bug in memlife/timeref.py::_month: the patterns are case-insensitive, and
    under Unicode ``re.I`` the long s (U+017F) matches "s", so "ſept 2023" matches
    ``_MONTH_YEAR``; ``_month`` lowercases (U+017F stays itself) and looks up "ſep" in
    ``_ABBR``: KeyError, raised out of ``LongTermMemory.recall`` (test below)."""
    assert query_date_ranges("what happened in \u017fept 2023?") == [
        (date(2023, 9, 1), date(2023, 9, 30))
    ]


def test_recall_of_a_query_naming_a_month_with_a_long_s_returns_hits(home: Path) -> None:
    """The same bug through the online library: recall validates its query (text, valid
    Unicode, size) and then fails with a KeyError, not an InputError, for one character."""
    from memlife.ledger import AccessLedger
    from memlife.online.memory import LongTermMemory
    from memlife.stores.sqlite import SqliteStore

    store = SqliteStore(home / "memlife.db")
    m = LongTermMemory(store, ledger=AccessLedger(home / "ledger"))
    try:
        m.remember("u-1", "/users/u-1/facts", None, "Moved to Berlin in September.")
        assert m.recall("u-1", "where did I move in \u017fept 2023?")
    finally:
        m.close()
        store.close()


def test_an_impossible_day_reads_its_month_in_either_order() -> None:
    """A real (minor) bug in memlife/timeref.py::query_date_ranges: a day the month does not
    have reads as its month when written day first ("31 February 2023", tested) or year
    first ("2023-02-31", tested), but month first ("February 31, 2023") ``_MONTH_DAY_YEAR``
    skips it and ``_MONTH_YEAR`` cannot match across the day, so only the bare year is
    read: recall's date preference widens from a month to a whole year."""
    february = [(date(2023, 2, 1), date(2023, 2, 28))]
    assert query_date_ranges("on 31 February 2023") == february
    assert query_date_ranges("on 2023-02-31") == february
    assert query_date_ranges("on February 31, 2023") == february


# -- restate.py: a swapped from/to is another fact ------------------------------------------
def test_a_change_from_one_thing_to_another_is_not_its_reverse() -> None:
    """A real bug in memlife/restate.py::restates: the bag of words ignores order, and the
    role guards (names, words after a determiner, numbers, negation and comparison sides,
    clauses) do not see the prepositions "from"/"to": "switched from tea to coffee" is called
    a restatement of "switched from coffee to tea" (the module doc's own "moved to Sweden" /
    "moved from Sweden" says these differ)."""
    assert not restates("Switched from tea to coffee.", "Switched from coffee to tea.")
    assert not restates("Went from vegan to vegetarian.", "Went from vegetarian to vegan.")


def test_remember_saves_the_reverse_of_a_change_as_a_new_fact(home: Path) -> None:
    """The same bug through ``LongTermMemory.remember``: the near-duplicate check (cosine
    0.997 and restates() true) refreshes "I switched from tea to coffee" when the user says
    "I switched from coffee to tea"; the new fact is never stored (memory lost)."""
    from memlife.ledger import AccessLedger
    from memlife.online.memory import LongTermMemory
    from memlife.stores.sqlite import SqliteStore

    store = SqliteStore(home / "memlife.db")
    m = LongTermMemory(store, ledger=AccessLedger(home / "ledger"))
    try:
        first = m.remember("u-1", "/users/u-1/facts", None, "I switched from tea to coffee.")
        assert first.created
        second = m.remember("u-1", "/users/u-1/facts", None, "I switched from coffee to tea.")
        assert second.created, second
    finally:
        m.close()
        store.close()


def test_a_date_overlapping_one_already_read_is_not_read_again() -> None:
    """Attacks ``not any(taken[m.start() : m.end()])`` in
    memlife/timeref.py::query_date_ranges (``free``): a match is skipped when any of its
    characters was read, not only its first. In "17 June 2023-06-16" the year belongs to
    the year-first day read first; "17 June 2023" starts on free text but must not add a
    second day."""
    assert query_date_ranges("on 17 June 2023-06-16") == JUNE_16


def test_a_naive_creation_time_is_utc_whatever_the_machine_zone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Attacks ``when.replace(tzinfo=UTC)`` in memlife/timeref.py::epoch_seconds: records
    store naive times as UTC; read in the machine's zone (``astimezone``) a memory saved at
    midnight UTC on 16 June would fall outside "on 16 June" on a machine west of UTC."""
    import time
    from datetime import UTC, datetime

    from memlife.timeref import day_start, epoch_seconds

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        naive = datetime(2023, 6, 16)
        assert epoch_seconds(naive) == day_start(date(2023, 6, 16))
        assert epoch_seconds(naive) == epoch_seconds(naive.replace(tzinfo=UTC))
    finally:
        monkeypatch.undo()
        time.tzset()


# -- restate.py: guards a mutation showed no test held ---------------------------------------
def test_a_bare_do_is_not_restated_by_its_negation() -> None:
    """Attacks the absence of "not" from ``_FILLER`` in memlife/restate.py: a negation that
    ends its clause reaches no word, so only the word "not" itself tells "She does." from
    "She does not."; as filler the second was a restatement of the first."""
    assert not restates("She does.", "She does not.")
    assert restates("She does.", "she does")  # the control


def test_although_ends_a_negations_reach() -> None:
    """Attacks "although" in ``_CLAUSE_ENDS`` of memlife/restate.py: the negation of "does not
    drink coffee" stops at "although"; reaching past it, the tea and the coffee both stood
    under the negation and the swapped statement was a restatement."""
    assert not restates(
        "Does not drink coffee although drinks tea", "Does not drink tea although drinks coffee"
    )


def test_a_number_word_keeps_the_word_after_it() -> None:
    """Attacks ``or w in NUMBER_WORDS`` in memlife/restate.py::_shape (and the
    ``numbers_a == numbers_b`` comparison in restates): "five sheep and goats" is not
    "sheep and five goats"; with only digits paired (or numbers not compared) they were one
    statement. The digits control already held."""
    assert not restates("Has five sheep and goats.", "Has sheep and five goats.")
    assert not restates("Has 5 sheep and goats.", "Has sheep and 5 goats.")


def test_a_decimal_point_does_not_end_a_clause() -> None:
    """Attacks ``(?<!\\d)[.,]|[.,](?!\\d)`` in ``_TOKEN`` of memlife/restate.py: the "." of
    "2.5" is the number's, not a clause end; as a clause end, "2.5 for tea, 3 for cake"
    split into clauses whose words matched the swapped prices' clauses."""
    assert not restates("Paid 2.5 for tea, 3 for cake", "Paid 3 for tea, 2.5 for cake")
    assert restates("Weighs 70.5 kg and runs", "Runs and weighs 70.5 kg")


def test_one_clause_is_compared_as_a_bag_not_as_a_clause() -> None:
    """Attacks ``len(parts) < 2`` in memlife/restate.py::_clauses: a text of one clause is
    not cut into clauses (None), and the bag of words decides; compared as one clause, the
    leading pronoun was set aside in one text only and "Today she runs." no longer restated
    "She runs today." (a missed merge of the same fact)."""
    assert restates("Today she runs.", "She runs today.")


def test_a_tense_swapped_between_two_clauses_is_another_fact() -> None:
    """A real bug in memlife/restate.py::_same_clauses: ``bare`` sets aside the be/have/do
    a later clause opens with ("... and is excited"), and with it the tense the module doc
    says is a fact; "Gina was happy and is sad." then restates "Gina is happy and was
    sad." (the same words, the same clause bags once "is"/"was" are dropped)."""
    assert not restates("Gina was happy and is sad.", "Gina is happy and was sad.")
    assert not restates("Gina was at home and is at work.", "Gina is at home and was at work.")


def test_a_filler_after_a_determiner_does_not_hide_who_did_what() -> None:
    """A real bug in memlife/restate.py::_shape (``after``): the word after "the" is left out
    when it is filler ("the very man"), so the two texts' role lists differ in length and
    ``same_roles`` passes them ("an article dropped"): "The dog bit the man." restates
    "The very man bit the dog." ("very" is filler in the bag of words too)."""
    assert not restates("The dog bit the man.", "The very man bit the dog.")


def test_a_number_word_whose_stem_differs_keeps_the_word_after_it() -> None:
    """A real bug in memlife/restate.py::_shape (``numbers``): the test
    ``w in NUMBER_WORDS`` reads the Snowball stem, and "twenty", "twelve", "thirty"...
    "hundred", "couple" stem to "twenti", "twelv", "hundr": never numbers, so "Bought
    twelve eggs and apples." restates "Bought eggs and twelve apples." while "five" (its own
    stem) is held (test above)."""
    assert not restates("Bought twelve eggs and apples.", "Bought eggs and twelve apples.")
    assert not restates("Has twenty cousins and nephews.", "Has cousins and twenty nephews.")
