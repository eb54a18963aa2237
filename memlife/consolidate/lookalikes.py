"""Lookalike swaps: a word no source uses, spelt like a source word it is not.

"Alice sees a psychologist" for "Alice sees a psychiatrist" reads as the same sentence to
MiniLM (cosine 0.9) and names no number, date or name the specifics check would catch.
Words that share their first letters but not their stem are usually other things of one
kind (psychologist / psychiatrist, instrument / instructor, interest / interview): the
swap a summariser makes when it misreads. A claim may use such a word only where some
source does, or where it is a form of a source word sharing its opening: one stem opening
the other ("painter" beside "painting"), stems that part within two letters ("belief" /
"believing", "satisfaction" / "satisfying"), words sharing most of their letters
("understood" / "understand"), or one letter more or less ("neighbourhood" /
"neighborhood"). Beside a source word it is not a form of, only a form by its letters
(most shared, or one letter apart) passes: "experimentation" beside "experimenting" and
"experienced", not "psychologist" beside "psychosis" and "psychiatrist".
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable

from memlife.lexical import tokenize

_MIN_SHARED = 5  # "psych": shorter shared openings are prefixes ("con", "pro")
_MAX_SHARED_SHARE = 0.6  # above it the two are forms of one word ("understoo|d" / "|and")
# and each stem goes on 3 letters or more past what they share: "satisfact" / "satisfi",
# "believ" / "belief" and "tourney" / "tournament" are one word's forms or near enough
_MIN_APART = 3
_WORD = re.compile(r"[a-z]+")


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) >= _MIN_SHARED}


def _stem(word: str) -> str:
    stems = tokenize(word)
    return stems[0] if stems else word


def _shared(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _one_apart(a: str, b: str) -> bool:
    """One letter more in ``a`` or ``b`` ("neighbourhood" / "neighborhood")."""
    long, short = (a, b) if len(a) >= len(b) else (b, a)
    if len(long) != len(short) + 1:
        return False
    i = _shared(long, short)
    return long[i + 1 :] == short[i:]


def _form(word: str, stem: str, other: str, other_stem: str) -> bool:
    """``word`` and ``other`` (sharing an opening) are forms or spellings of one word."""
    return (
        _shared(word, other) / max(len(word), len(other)) > _MAX_SHARED_SHARE
        or min(len(stem), len(other_stem)) - _shared(stem, other_stem) < _MIN_APART
        or _one_apart(word, other)
    )


def lookalikes(claim: str, sources: Iterable[str], *, skip: Container[str] = ()) -> set[str]:
    """The claim's words no source uses that look like source words (the same first five
    letters) and are a form of none of them. ``skip``: words judged elsewhere (swap_words'
    list: "grandma" is "grandmother")."""
    theirs = {w for w in set().union(*map(_words, sources)) if w not in skip}
    # indexed by opening: only words that share one are compared (linear, not quadratic)
    near: dict[str, list[tuple[str, str]]] = {}
    for w in theirs:
        near.setdefault(w[:_MIN_SHARED], []).append((w, _stem(w)))
    found: set[str] = set()
    for word in _words(claim) - theirs:
        alike = near.get(word[:_MIN_SHARED])
        if word in skip or not alike:
            continue
        stem = _stem(word)
        forms = [_form(word, stem, other, other_stem) for other, other_stem in alike]
        if all(forms):
            continue
        # beside a lookalike, a form by its stems alone is not enough ("psychologist" is a
        # stem's reach from "psychosis" and a swap for "psychiatrist"): it must share most
        # of its letters with a source word, or be one letter from it
        if not any(f and _close(word, other) for f, (other, _) in zip(forms, alike, strict=True)):
            found.add(word)
    return found


def _close(word: str, other: str) -> bool:
    """Forms of one word by their letters: most of them shared, or one letter apart."""
    shared = _shared(word, other) / max(len(word), len(other)) > _MAX_SHARED_SHARE
    return shared or _one_apart(word, other)
