"""Audit 50m (session 50): mutation pass over audit 50g's ``shown`` (refused arguments).

Each test kills a mutant of memlife/online/inputs.py::shown that the session's tests let
live: its two size limits, taken at their edges, and a float shown as written.
"""

from __future__ import annotations

import pytest

from memlife.online.inputs import SHOWN_MAX_CHARS, cosine_arg, shown


def test_a_text_of_exactly_the_limit_is_shown_as_written() -> None:
    """Kills ``len(value) < SHOWN_MAX_CHARS`` (a 64-character mistyped source hidden)."""
    text = "s" * SHOWN_MAX_CHARS
    assert shown(text) == repr(text)
    assert shown(text + "s") == f"a str of {SHOWN_MAX_CHARS + 1} characters"


def test_a_number_past_the_limit_is_shown_by_its_size() -> None:
    """``10**64`` has 65 digits: shown by its size. Kills ``abs(value) <= 10**64``."""
    assert shown(10**SHOWN_MAX_CHARS - 1) == repr(10**SHOWN_MAX_CHARS - 1)
    assert shown(10**SHOWN_MAX_CHARS).startswith("an int of ")
    assert shown(-(10**SHOWN_MAX_CHARS)).startswith("an int of ")


def test_a_refused_float_is_shown_as_written() -> None:
    """A threshold of 1.5 is refused with its value, not "float". Kills the mutant that
    dropped ``float`` from the values shown as written."""
    from memlife.errors import InputError

    with pytest.raises(InputError, match=r"not 1\.5$"):
        cosine_arg(1.5, "threshold")
    assert shown(float("nan")) == "nan" and shown(True) == "True"
