"""Session 48 (audit 48m): the dates audit 48h reads in a question (memlife/timeref.py
``query_date_ranges``: an instant with its zone, a range of days before the month).
Each case is a question as an agent writes it; the ranges are what recall's date bonus
uses."""

from __future__ import annotations

from datetime import date

import pytest

from memlife.timeref import query_date_ranges

D = date(2023, 5, 5)


@pytest.mark.parametrize(
    "text", ["at 2023-06-16T00:30:00+05:00", "at 2023-06-15T22:00:00-05:00"], ids=["east", "west"]
)
def test_a_zoned_instant_spans_its_day_as_written_and_its_day_in_utc(text: str) -> None:
    """Weak test (mutants: the range `(u, u)` or `(min(d, u), d)`). East of UTC the instant
    is the day before in UTC, west of it the day after: both days are in the range, each
    way round."""
    assert query_date_ranges(text) == [(date(2023, 6, 15), date(2023, 6, 16))]


@pytest.mark.parametrize(
    "text",
    ["Note 2 - May 5, 2023", "from 28-3 May 2023", "ref 2011-25 May 2023",
     "from 1-2pm on 5 May 2023"],
    ids=["month-first", "reversed", "inside-a-number", "not-at-the-end"],
)  # fmt: skip
def test_only_a_day_range_right_before_the_month_starts_earlier(text: str) -> None:
    """Weak test (mutants in `_RANGE_FROM` and its use: `day_first` dropped, no `min` with
    the last day, no `(?<!\\d)`, no `$`). A number before a month-first date, a "range"
    whose first day is after its last, the tail of a longer number, and a time range
    further back are no first day: the date reads as the one day it names (its last day
    always in the range, never after the first)."""
    day = 25 if "25 May" in text else 3 if "3 May" in text else 5
    assert query_date_ranges(text)[0] == (D.replace(day=day), D.replace(day=day))
