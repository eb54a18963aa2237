"""Lookalike swaps: a word no source uses, spelt like a source word it is not.

"Alice sees a psychologist" for "Alice sees a psychiatrist" reads as the same sentence to
MiniLM (cosine 0.9) and names no number, date or name the specifics check would catch.
Words that share their first letters but not their stem are usually other things of one
kind (psychologist / psychiatrist, instrument / instructor, internship / international):
the swap a summariser makes when it misreads. A claim may use such a word only where
some source does. Derivations pass: one stem opening the other ("painter" beside
"painting", "photographer" beside "photography"; stems that part within two letters, "belief" beside
"believing"), and so do words sharing most of their letters ("understood" beside
"understand": an irregular form, not another thing).
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable

from memlife.lexical import tokenize

_MIN_SHARED = 5  # "psych": shorter shared openings are prefixes ("con", "inter" is 5)
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


def lookalikes(claim: str, sources: Iterable[str], *, skip: Container[str] = ()) -> set[str]:
    """The claim's words no source uses that look like a source word of another stem.
    ``skip``: words judged elsewhere (swap_words' list: "grandma" is "grandmother")."""
    theirs = {w for w in set().union(*map(_words, sources)) if w not in skip}
    their_stems = {w: _stem(w) for w in theirs}
    found: set[str] = set()
    for word in _words(claim) - theirs:
        if word in skip:
            continue
        stem = _stem(word)
        if stem in their_stems.values():
            continue
        for other, other_stem in their_stems.items():
            n = _shared(word, other)
            if (
                n >= _MIN_SHARED
                and n / max(len(word), len(other)) <= _MAX_SHARED_SHARE
                and min(len(stem), len(other_stem)) - _shared(stem, other_stem) >= _MIN_APART
            ):
                found.add(word)
                break
    return found
