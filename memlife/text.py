"""Content-derived signals computed once at write time, so planning never reads content."""

from __future__ import annotations

import hashlib
import re

_NORMALISE = re.compile(r"[^a-z0-9]+")
_NEGATION = re.compile(
    r"\b(not|never|no|no longer|none|nothing|stopped|quit|without|anymore|unsubscribed)\b|n't\b",
    re.IGNORECASE,
)


def normalise(text: str) -> str:
    """Lower case, punctuation and spacing folded: 'Is vegetarian.' == 'is  vegetarian'."""
    return _NORMALISE.sub(" ", text.lower()).strip()


def norm_sha256(text: str) -> str:
    return hashlib.sha256(normalise(text).encode()).hexdigest()


def negates(text: str) -> bool:
    """A cheap rule hint for contradiction: does the statement negate?"""
    return _NEGATION.search(text) is not None
