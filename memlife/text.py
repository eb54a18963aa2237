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


# normalise() on UTF-8 bytes: every byte outside [a-z0-9] (multi-byte characters included)
# becomes a space, and split/join folds the runs: the same text, without a regex (import)
_FOLD = bytes(b if 0x61 <= b <= 0x7A or 0x30 <= b <= 0x39 else 0x20 for b in range(256))


def norm_sha256(text: str) -> str:
    if len(text) > ANALYSIS_WINDOW:
        return hashlib.sha256(normalise(text).encode()).hexdigest()
    folded = text.lower().encode("utf-8", "surrogatepass").translate(_FOLD)
    return hashlib.sha256(b" ".join(folded.split())).hexdigest()


# Every match of _NEGATION contains one of these; in ASCII text, case-insensitive matching
# is matching the lowered text (outside ASCII, e.g. U+017F matches "s": the regex decides)
_NEGATION_CUES = ("no", "never", "stopped", "quit", "without", "anymore", "unsubscribed", "n't")


_NEGATION_LOWER = re.compile(_NEGATION.pattern)


def negates(text: str) -> bool:
    """A cheap rule hint for contradiction: does the statement negate?"""
    text = text[:ANALYSIS_WINDOW]
    if not text.isascii():
        return _NEGATION.search(text) is not None
    lowered = text.lower()
    for cue in _NEGATION_CUES:
        if cue in lowered:
            return _NEGATION_LOWER.search(lowered) is not None
    return False


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
