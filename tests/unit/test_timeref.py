"""Explicit dates in queries, as the recall ranking reads them."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from memlife.timeref import epoch_seconds, query_date_ranges


def test_day_month_and_year_forms() -> None:
    day = (date(2023, 6, 16), date(2023, 6, 16))
    assert query_date_ranges("What did Maria share on 16 June, 2023?") == [day]
    assert query_date_ranges("on June 16, 2023") == [day]
    assert query_date_ranges("on 16th June 2023") == [day]
    assert query_date_ranges("Dec. 5, 2023") == [(date(2023, 12, 5), date(2023, 12, 5))]
    assert query_date_ranges("in October 2023") == [(date(2023, 10, 1), date(2023, 10, 31))]
    assert query_date_ranges("in Sept 2023") == [(date(2023, 9, 1), date(2023, 9, 30))]
    assert query_date_ranges("in February 2024") == [(date(2024, 2, 1), date(2024, 2, 29))]
    assert query_date_ranges("What did Evan do in 2022?") == [
        (date(2022, 1, 1), date(2022, 12, 31))
    ]


def test_no_date_no_range_and_invalid_dates_are_skipped() -> None:
    assert query_date_ranges("When did Caroline go to the support group?") == []
    assert query_date_ranges("May I have 12 apples?") == []  # 'May' alone is not a date
    assert query_date_ranges("on 31 February 2023") == [(date(2023, 2, 1), date(2023, 2, 28))]
    assert query_date_ranges("room 3000 at 1999 Main St") == [
        (date(1999, 1, 1), date(1999, 12, 31))
    ]


def test_several_dates_each_read_once() -> None:
    got = query_date_ranges("between 1 August 2023 and November 2023, or in 2022")
    assert got == [
        (date(2023, 8, 1), date(2023, 8, 1)),
        (date(2023, 11, 1), date(2023, 11, 30)),
        (date(2022, 1, 1), date(2022, 12, 31)),
    ]


@settings(max_examples=60, deadline=None)
@given(
    st.dates(min_value=date(1950, 1, 1), max_value=date(2099, 12, 31)),
    st.sampled_from(["{d} {B}, {Y}", "{B} {d}, {Y}", "{d}th of {B} {Y}", "{b} {d} {Y}"]),
)
def test_any_written_day_is_read_back(d: date, form: str) -> None:
    text = "what happened on " + form.format(
        d=d.day, B=d.strftime("%B"), b=d.strftime("%b"), Y=d.year
    )
    assert query_date_ranges(text) == [(d, d)]


def test_year_first_dates_as_agents_write_them() -> None:
    """ "on 2023-06-16" was read as all of 2023: every record of that year got the bonus."""
    day = [(date(2023, 6, 16), date(2023, 6, 16))]
    assert query_date_ranges("What did I note on 2023-06-16?") == day
    assert query_date_ranges("on 2023/06/16") == day
    assert query_date_ranges("since 2023-06-16T10:00:00Z") == day
    assert query_date_ranges("in 2023-06") == [(date(2023, 6, 1), date(2023, 6, 30))]
    assert query_date_ranges("2023-02-31") == [(date(2023, 2, 1), date(2023, 2, 28))]
    # no such month, a season or a phone number: the year alone, never a month
    for text in ("2023-13-40", "the 2023-24 season", "call 2023-555-1234", "in 2023/06"):
        assert query_date_ranges(text) == [(date(2023, 1, 1), date(2023, 12, 31))], text
    # day-first numbers are ambiguous (16.06 / 06.16): only their year is read
    assert query_date_ranges("16.06.2023") == [(date(2023, 1, 1), date(2023, 12, 31))]


@settings(max_examples=60, deadline=None)
@given(
    st.dates(min_value=date(1950, 1, 1), max_value=date(2099, 12, 31)),
    st.sampled_from(["%Y-%m-%d", "%Y/%m/%d", "%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%d %H:%M"]),
)
def test_any_year_first_day_is_read_back(d: date, form: str) -> None:
    text = f"what happened on {datetime(d.year, d.month, d.day, 9, 30).strftime(form)}?"
    assert query_date_ranges(text) == [(d, d)]


def test_epoch_seconds_takes_naive_as_utc() -> None:
    naive = datetime(2023, 6, 16, 12, 0)
    assert epoch_seconds(naive) == epoch_seconds(naive.replace(tzinfo=UTC)) == 1686916800.0
    assert epoch_seconds(naive + timedelta(days=1)) - epoch_seconds(naive) == 86400
