"""Content-derived signals computed once at write time, so planning never reads content."""

from __future__ import annotations

import hashlib
import re

_NORMALISE = re.compile(r"[^a-z0-9]+")
_NEGATION = re.compile(
    r"\b(not|never|no|no longer|none|nothing|stopped|quit|without|anymore|unsubscribed)\b|n't\b",
    re.IGNORECASE,
)


# Work per text is bounded: past this many characters a text is folded no further (its
# tail is hashed exactly) and not searched for negation. Imports and `remember` refuse
# content over the policy's bound (64 KiB) anyway; this keeps an older 10 MB record cheap.
ANALYSIS_WINDOW = 64 * 1024


def normalise(text: str) -> str:
    """Lower case, punctuation and spacing folded: 'Is vegetarian.' == 'is  vegetarian'."""
    if len(text) <= ANALYSIS_WINDOW:
        return _NORMALISE.sub(" ", text.lower()).strip()
    tail = hashlib.sha256(text[ANALYSIS_WINDOW:].encode("utf-8", "surrogatepass")).hexdigest()
    return f"{normalise(text[:ANALYSIS_WINDOW])} #{tail}"


def norm_sha256(text: str) -> str:
    return hashlib.sha256(normalise(text).encode()).hexdigest()


def negates(text: str) -> bool:
    """A cheap rule hint for contradiction: does the statement negate?"""
    return _NEGATION.search(text[:ANALYSIS_WINDOW]) is not None


def query_sha256(query: str) -> str:
    """What the access ledger keeps of a query: its hash, never its text."""
    return hashlib.sha256(query.encode("utf-8")).hexdigest()


# Offline cues for "a newer statement replaces an older one" (group.looks_like_update) and
# for a statement that only adds a fact (grounding rejects reading it as an update).
_UPDATE_CUE = re.compile(
    r"\b(now|no longer|any ?more|gave up|give up|given up|quit|stopped|switched|moved|changed|"
    r"instead|these days|used to|replaced|nowadays|not .{0,20} any ?more)\b",
    re.IGNORECASE,
)
_ADDITIVE_CUE = re.compile(r"\b(also|too|as well|in addition|another|both)\b", re.IGNORECASE)


def reads_additive(text: str) -> bool:
    """ "also", "too", "as well" and no update word: the text adds a fact, it replaces none."""
    return _ADDITIVE_CUE.search(text) is not None and _UPDATE_CUE.search(text) is None
