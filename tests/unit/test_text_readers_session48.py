"""Session 48 (audit 48h): the text readers every memory and question passes through (dates in a
question, who speaks and whom a question names, the statement key), read by a hostile or
merely unusual writer. Each failed before its fix (memlife/timeref.py, memlife/speakers.py)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import numpy as np
import pytest

from memlife.retrieval import DATE_WEIGHT, rank
from memlife.speakers import query_names, speakers
from memlife.timeref import epoch_seconds, query_date_ranges

NS = "/users/u1/facts"


def _bonus(query: str, created: list[datetime]) -> list[float]:
    """The date bonus each record gets for ``query`` (every other term off, one vector)."""
    v = np.tile(np.eye(1, 8, dtype=np.float32), (len(created), 1))
    q = np.eye(1, 8, dtype=np.float32)[0]
    hits = rank(q, v, k=len(created), query_text=query,
                created=np.array([epoch_seconds(c) for c in created]), lexical_weight=0.0,
                speaker_weight=0.0, centroid_weight=0.0, context_weight=0.0)  # fmt: skip
    got = dict(zip(hits.indices.tolist(), (hits.scores - hits.similarities).tolist(), strict=True))
    return [got[i] for i in range(len(created))]


def _turns_share(query: str, turns: list[str]) -> list[int]:
    """Recall's order of two turns alike in every term but who speaks them."""
    vecs = np.tile(np.eye(4, dtype=np.float32)[:1], (len(turns), 1))
    q = np.eye(4, dtype=np.float32)[0]
    kw = {"query_text": query, "texts": turns, "lexical_weight": 0.0, "centroid_weight": 0}
    return rank(q, vecs, k=len(turns), **kw).indices.tolist()


# -- dates: an instant written with its zone -------------------------------------------------
def test_an_instant_written_with_its_zone_gives_the_bonus_to_what_was_saved_then() -> None:
    """An agent in UTC+5 asks about what it noted "at 2023-06-16T00:30:00+05:00", the
    instant it was saved: 2023-06-15T19:30Z, as records keep their times (UTC). Must hold:
    the record saved at that very instant gets the date bonus, as one saved an hour later
    does (control); one saved a day before gets none."""
    saved = datetime(2023, 6, 15, 19, 30, tzinfo=UTC)
    created = [saved, datetime(2023, 6, 16, 1, 0, tzinfo=UTC), datetime(2023, 6, 14, tzinfo=UTC)]
    got = _bonus("What did I note at 2023-06-16T00:30:00+05:00?", created)
    assert got[1:] == pytest.approx([DATE_WEIGHT, 0.0])  # control: holds today
    assert got[0] == pytest.approx(DATE_WEIGHT)


def test_a_range_of_days_is_read_from_its_first_day() -> None:
    """The question asks about "3-5 May 2023" (also "3\u20135 May", "1st to 3rd May").
    Must hold: the range starts at its first day, so what was saved on the 3rd and 4th
    gets the date bonus; the single day "5 May 2023" is read as before (control)."""
    assert query_date_ranges("on 5 May 2023") == [(date(2023, 5, 5), date(2023, 5, 5))]
    for text in ("What did we do on 3-5 May 2023?", "on 3\u20135 May 2023", "1st to 5th May 2023"):
        (lo, hi), *_ = query_date_ranges(text)
        assert (lo.day, hi) == (1 if text.startswith("1st") else 3, date(2023, 5, 5)), text
    created = [datetime(2023, 5, 3, 9, tzinfo=UTC), datetime(2023, 5, 5, 9, tzinfo=UTC)]
    assert _bonus("What did we do on 3-5 May 2023?", created) == pytest.approx([DATE_WEIGHT] * 2)


# -- who speaks: markdown bold around the name and its colon --------------------------------
def test_a_speaker_in_bold_with_the_colon_inside_the_bold_is_read() -> None:
    """A chat export writes each turn as "**Caroline:** I went to the support group.", the
    colon inside the bold (as common as "**Caroline**:", which is read). Must hold: the
    turn speaks as Caroline, and a question naming her finds her turn first."""
    assert speakers("- **Caroline**: hi") == ["caroline"]  # control: holds today
    assert speakers("**Caroline:** I went to the support group.") == ["caroline"]
    turns = [
        "**Melanie:** I went to the support group.",
        "**Caroline:** I went to the support group.",
    ]
    assert _turns_share("When did Caroline go to the support group?", turns) == [1, 0]


# -- whom a question names -----------------------------------------------------------------
def test_a_title_written_without_a_space_still_names_the_person() -> None:
    """The question types "Mr.Smith" with no space after the title's dot (as "Mr. Smith"
    is read: Smith). Must hold: the question names "smith", not an invented "mrsmith", and
    Smith's turn is found first."""
    assert query_names("What did Mr. Smith sell?").sure == ["smith"]  # control
    assert query_names("What did Mr.Smith sell?").sure == ["smith"]
    turns = ["Mr. Jones: I sold the car.", "Mr. Smith: I sold the car."]
    assert _turns_share("What did Mr.Smith sell?", turns) == [1, 0]


def test_a_question_after_leading_space_or_a_line_break_names_no_first_word() -> None:
    """An agent's template hands recall "  Tell me about Caroline." or "\\nDescribe what
    Caroline did" (an f-string's indent, an opening line break). Must hold: the first word
    is no name there either ("Tell", "Describe" would halve Caroline's share, and make
    recall build an index for a question that names nobody)."""
    assert query_names("Tell me about Caroline.").sure == ["caroline"]  # control
    assert query_names("  Tell me about Caroline.").sure == ["caroline"]
    assert query_names("\nDescribe what Caroline did").sure == ["caroline"]
    assert query_names("\n\tRemind me where Caroline went.").sure == ["caroline"]


def test_a_possessive_typed_with_the_modifier_apostrophe_names_the_person() -> None:
    """A phone keyboard types the apostrophe as U+02BC ("Caroline\u02bcs mom", as
    ``text.negates`` already reads "don\u02bct"). Must hold: the question names Caroline,
    as with ' and \u2019, and "O\u02bcBrien" is the speaker "O'Brien"."""
    assert query_names("What did Caroline\u2019s mom say?").sure == ["caroline"]  # control
    assert query_names("What did Caroline\u02bcs mom say?").sure == ["caroline"]
    assert query_names("What did O\u02bcBrien say?").sure == speakers("O'Brien: hi")


# -- the statement key: a fraction, a ratio or a decimal comma is not a range ---------------
