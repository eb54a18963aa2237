"""Namespace validation (memlife/namespaces.py): what is refused, and why."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memlife.namespaces import namespace_problem


def _control(namespace: str) -> bool:
    """The rule as written: a C0 control character or DEL, anywhere."""
    return any(ord(c) < 32 or ord(c) == 127 for c in namespace)


@pytest.mark.parametrize(
    ("namespace", "problem"),
    [
        ("/users/u-1/facts", None),
        ("", "must not be blank"),
        ("  ", "must not be blank"),
        ("/a\x00b", "contains a control character"),
        ("/a\tb", "contains a control character"),
        ("/a\x7f", "contains a control character"),
        ("/a\x80\u2028\u00e9", None),  # C1, line separator, letters: not C0 or DEL
        ("/users//x", "has an empty segment ('//' or a trailing '/')"),
        ("/users/x/", "has an empty segment ('//' or a trailing '/')"),
        ("/users/../x", "has a '..' segment"),
        ("/a/./b", "has a '.' segment"),
    ],
)
def test_each_problem_is_named(namespace: str, problem: str | None) -> None:
    assert namespace_problem(namespace) == problem


@given(st.text(alphabet=st.characters(max_codepoint=0x2100), max_size=12))
def test_a_control_character_anywhere_is_refused(tail: str) -> None:
    namespace = "/ns/" + tail
    refused = namespace_problem(namespace) == "contains a control character"
    assert refused == (_control(namespace) and bool(namespace.strip()))
