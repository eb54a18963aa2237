"""Absolute dates named in a query ("on 16 June, 2023", "in October 2023", "in 2022",
"on 2023-06-16").

Recall uses them to prefer memories created in (or shortly after) the named period:
records carry ``created_at``, and a fact said in a conversation is saved when it is said,
so "What did Maria share on 16 June, 2023?" is about what was remembered that day.
Only explicit calendar dates are read; relative ones ("last week") need a reference
time the query does not carry.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

MONTHS = {
    name: i + 1
    for i, name in enumerate(
        "january february march april may june july august september october november december".split()
    )
}
WEEKDAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday".split())
_ABBR = {name[:3]: n for name, n in MONTHS.items()} | {"sept": 9}
_MON = r"(january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"

# Most specific first: a span matched by a day pattern is not read again as a month or year.
_DAY_MONTH_YEAR = re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MON},?\s+{_YEAR}\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MON}\s+{_DAY},?\s+{_YEAR}\b", re.I)
_MONTH_YEAR = re.compile(rf"\b{_MON},?\s+(?:of\s+)?{_YEAR}\b", re.I)
_YEAR_ONLY = re.compile(rf"\b{_YEAR}\b")
# year first, as agents and models write dates: 2023-06-16, 2023/06/16, 2023-06-16T10:00Z
_ISO_DAY = re.compile(rf"\b{_YEAR}([-/])(\d{{1,2}})\2(\d{{1,2}})(?!\d)")
_ISO_MONTH = re.compile(rf"\b{_YEAR}-(\d{{1,2}})(?![\d/-])")
# an instant with its zone after a year-first day: the day is the instant's in UTC
_ISO_ZONED = re.compile(r"[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)(?!\d)", re.I)
# "3-5 May 2023", "1st to 5th May": the day a range of days before the month starts on
_RANGE_FROM = re.compile(rf"(?<!\d){_DAY}\s*(?:-|\u2013|to)\s*$", re.I)


def _month(name: str) -> int:
    key = name.casefold().rstrip(".")  # re.I matched "ſept" as "sept": casefold agrees
    return MONTHS.get(key) or _ABBR[key[:4] if key.startswith("sept") else key[:3]]


def _month_end(year: int, month: int) -> date:
    first_next = date(year + (month == 12), month % 12 + 1, 1)
    return first_next - timedelta(days=1)


def _whole_month(year: int, month: int) -> tuple[date, date]:
    return date(year, month, 1), _month_end(year, month)


def query_date_ranges(text: str) -> list[tuple[date, date]]:
    """Each explicit date in ``text`` as an inclusive (first day, last day) range.

    A day gives a one-day range, a month its whole month, a bare year the year. Invalid
    dates ("31 February 2023") are skipped, never guessed.
    """
    out: list[tuple[date, date]] = []
    # characters already read as part of a date: a mask, so each match costs its own
    # length (a list of spans made a query of many dates quadratic)
    taken = bytearray(len(text))

    def free(m: re.Match[str]) -> bool:
        return not any(taken[m.start() : m.end()])

    def take(m: re.Match[str]) -> None:
        taken[m.start() : m.end()] = b"\x01" * (m.end() - m.start())

    for m in _ISO_DAY.finditer(text):
        year, month = int(m[1]), int(m[3])
        try:
            d = date(year, month, int(m[4]))
        except ValueError:
            if 1 <= month <= 12:  # no such day: its month, as "31 February 2023" reads
                out.append(_whole_month(year, month))
                take(m)
            continue  # no such month: its year stands, read below
        zoned = _ISO_ZONED.match(text, m.end())
        try:  # "2023-06-16T00:30+05:00" is 15 June in UTC, as records' times are kept
            utc = datetime.fromisoformat(text[m.start() : zoned.end()]) if zoned else None
        except ValueError:  # "2023/06/16T..." or "2023-6-16T...": the day as written
            utc = None
        u = utc.astimezone(UTC).date() if utc else d
        out.append((min(d, u), max(d, u)))
        take(m)
    for pat, day_first in ((_DAY_MONTH_YEAR, True), (_MONTH_DAY_YEAR, False)):
        for m in pat.finditer(text):
            if not free(m):
                continue
            day, mon = (m[1], m[2]) if day_first else (m[2], m[1])
            try:
                d = date(int(m[3]), _month(mon), int(day))
            except ValueError:
                try:  # no such day: its month, in either order ("February 31, 2023")
                    out.append(_whole_month(int(m[3]), _month(mon)))
                    take(m)
                except ValueError:
                    pass  # no such year either: read below, or not at all
                continue
            lo = d
            if day_first and (r := _RANGE_FROM.search(text[max(0, m.start() - 12) : m.start()])):
                lo = d.replace(day=min(int(r[1]), d.day) or d.day)
            out.append((lo, d))
            take(m)
    for m in _MONTH_YEAR.finditer(text):
        if free(m):
            year, month = int(m[2]), _month(m[1])
            out.append(_whole_month(year, month))
            take(m)
    for m in _ISO_MONTH.finditer(text):
        if free(m) and 1 <= (month := int(m[2])) <= 12:
            year = int(m[1])
            out.append(_whole_month(year, month))
            take(m)
    for m in _YEAR_ONLY.finditer(text):
        if free(m):
            year = int(m[1])
            out.append((date(year, 1, 1), date(year, 12, 31)))
            take(m)
    return out


def epoch_seconds(when: datetime) -> float:
    """POSIX seconds of ``when`` (naive datetimes are taken as UTC, as records store them)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def day_start(d: date) -> float:
    return datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp()
