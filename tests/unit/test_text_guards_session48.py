"""Session 48 (audit 48h): guards of the text readers (dates in a question, speakers and names, the
negation window) that no test held: each test here fails on a mutation named in its
docstring and passes on the code as it is."""

from __future__ import annotations

from datetime import date

from memlife.group import looks_like_update
from memlife.speakers import query_names, speakers
from memlife.text import ANALYSIS_WINDOW, negates
from memlife.timeref import query_date_ranges

YEAR_2023 = [(date(2023, 1, 1), date(2023, 12, 31))]


def test_a_month_zero_in_a_year_first_date_leaves_its_year_and_raises_nothing() -> None:
    """A question names "2023-00-15" or "2023-00" (a template's unset month). Must hold:
    the year is read, no month 0 is built (``date(2023, 0, 1)`` would raise out of recall).
    Kills `1 <= month` dropped in either year-first branch of ``query_date_ranges``."""
    assert query_date_ranges("what did I note on 2023-00-15?") == YEAR_2023
    assert query_date_ranges("what did I note in 2023-00?") == YEAR_2023


def test_a_month_of_a_year_is_read_with_of_between_them() -> None:
    """ "in June of 2023" names June, not the whole year. Kills `(?:of\\s+)?` dropped from
    ``_MONTH_YEAR``."""
    assert query_date_ranges("What did Jon do in June of 2023?") == [
        (date(2023, 6, 1), date(2023, 6, 30))
    ]


def test_a_word_after_a_colon_semicolon_paren_or_bracket_opens_a_sentence() -> None:
    """A question's capitalised word after ": ", "; ", "(" or "[" opens a clause, not a
    name ("Question: Where ...", "(Remind me)"). Kills ":" or ";" dropped from the sentence
    ends of ``_OPENER``, and "(" or "[" dropped from its opening marks."""
    assert query_names("Question: Remind me where Jon went.").sure == ["jon"]
    assert query_names("Ask Jon; Remind me where he went.").sure == ["jon"]
    assert query_names("Where did Jon go (Remind me)?").sure == ["jon"]
    assert query_names("Where did Jon go [Remind me]?").sure == ["jon"]


def test_a_title_in_any_case_is_no_name_and_no_sentence_end() -> None:
    """ "MR. SMITH" and "dr. Lee": the title is no name and its dot ends no sentence, in
    any case. Kills ``re.I`` dropped from ``_TITLE_DOT``."""
    assert query_names("What did MR. SMITH sell to dr. Lee?").sure == ["smith", "lee"]


def test_a_speaker_of_four_words_after_a_long_time_stamp_and_a_possessive_key() -> None:
    """A chat export's "[May 5, 2023 10:30] Maria del Carmen Lopez: hi" (a time of 18
    characters, four words of a name) and a key-value line "Caroline's Favourite Food:
    pizza" (its possessive off, as a question's is). Kills the speaker line's `{0,3}` made
    `{0,2}`, its time bound of 32 made 12, and ``_POSSESSIVE`` not applied in ``speakers``."""
    assert speakers("[May 5, 2023 10:30] Caroline: hi") == ["caroline"]
    assert speakers("Maria Luisa Carmen Lopez: hola") == ["maria", "luisa", "carmen", "lopez"]
    assert speakers("Caroline's Favourite Food: pizza") == ["caroline", "favourite", "food"]
    assert "caroline" in query_names("What is Caroline's Favourite Food?").sure


def test_a_negation_past_the_analysis_window_is_not_read() -> None:
    """A pasted page longer than the analysis window whose only "not" lies past it, in
    ASCII and in other text. Must hold: the statement is not read as negating (the window
    bounds the work, as the fold's). Kills the `text[:ANALYSIS_WINDOW]` cut dropped from
    ``negates``."""
    assert negates("I do not eat meat.")  # control
    assert not negates("x" * ANALYSIS_WINDOW + " I do not eat meat.")
    assert not negates("é" * ANALYSIS_WINDOW + " I do not eat meat.")


def test_ain_t_typed_without_its_apostrophe_negates() -> None:
    """ "I aint going back" (no apostrophe, as phones type it) negates, as "ain't" does.
    Kills "aint" dropped from ``_NEGATION_CUES`` (the regex never looks without a cue)."""
    assert negates("I ain't going back.") and negates("I aint going back.")


def test_a_four_letter_word_ending_in_s_keeps_its_s() -> None:
    """ "news" is not the plural of "new": a newer "Reads the news now." shares no content
    word with "Bought a new car.", so it is no probable update of it (a review item would
    call it one). Kills the plural cut's `len(w) > 4` made `> 3` in ``_content_words``."""
    assert looks_like_update("Reads the papers now.", "Bought some papers.")  # control
    assert not looks_like_update("Reads the news now.", "Bought a new car.")
