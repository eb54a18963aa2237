"""The coverage check: a merge keeps every fact of the records it supersedes.

Grounding asks whether each claim of the replacement comes from a source; it cannot see
what the replacement leaves out. A "duplicate" whose summary drops one member's part
("allergic to peanuts" for "allergic to peanuts and to shellfish"), its year or the other
person it names would retire that fact on no one's word.

So every record a duplicate or update supersedes without retiring it (not one named
outdated, not one the planner found contradicted, not an older version of the newest
with other numbers, not one that reads as an instruction) must be said again by the
summary, the text the replacement carries:
  1. each of its names, numbers and dates is one of the summary's (``specifics``);
  2. each of its parts (clauses, and the pieces a comma or a bare "and" joins) is in the
     summary word for word (stems; two stems sharing their first ``_SHARED_PREFIX``
     letters count as one: "allergic", "allergy"), or is restated by a part of it: cosine
     at least ``RESTATED_COSINE`` with the same polarity. Grounding's threshold (0.55)
     would let "allergic to pollen" stand for "allergic to peanuts" (0.71); paraphrases
     a model writes sit above 0.85 ("phones her mum each Sunday" / "every Sunday, calls
     her mother" 0.88, "moved to Berlin" / "now lives in Berlin" 0.86), swapped objects
     below (peanuts/pollen 0.71, Paris/Rome 0.77, window/aisle seat 0.82, Tom/Sam 0.65).
     A recurring group (one event told many times, summarised as a habit) is held to
     ``HABIT_COSINE``: its tenses change ("went" / "goes for a run along the river before
     work", 0.82; "had" / "has pancakes with her kids ... on Sundays", 0.91), while a habit
     that drops a detail ("goes for a run along the river", 0.70) or swaps one ("a walk",
     0.76) falls below.

Known limit: a swap MiniLM reads as a paraphrase passes: "brother" for "sister" (0.95),
"hates" for "loves" (0.88). The prompt asks for the memories' own wording.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

import numpy as np

from memlife.consolidate.base import ConsolidationError, ConsolidationResult, Group
from memlife.embed import Embedder
from memlife.lexical import tokenize
from memlife.text import NUMBER_VALUES, negates, symbols_as_words

DROPPED_FACT = "DROPPED_FACT"  # a superseded record's fact that the summary no longer says

_SHARED_PREFIX = 5  # letters two stems share to count as one word ("allerg-")
RESTATED_COSINE = 0.85  # a part said again in other words (see the module's note)
HABIT_COSINE = 0.8  # the same, where one event told many times becomes a habit
_AND = re.compile(r"\s+and\s+", re.IGNORECASE)


def content_words(text: str, free: Collection[str] = ()) -> set[str]:
    """``text``'s stems, a number word as its value, without the ``free`` stems."""
    return {NUMBER_VALUES.get(w, w) for w in tokenize(symbols_as_words(text))} - set(free)


def check_coverage(
    result: ConsolidationResult,
    group: Group,
    embedder: Embedder,
    *,
    exempt: Collection[str],
    free: Collection[str],
    parts: Callable[[str], list[str]],
    specifics: Callable[[str], set[str]],
    said: set[str],
) -> None:
    """Raise DROPPED_FACT when a kept member of a duplicate/update says something the
    summary does not. ``exempt``: ids retired with reason; ``free``: stems no statement
    needs to keep (time and linking words); ``parts``/``specifics``: grounding's readings
    of a text, so both checks cut and pin a statement alike; ``said``: the specifics the
    summary holds in any of the forms grounding matches them by."""
    if result.relation not in ("duplicate", "update"):
        return
    kept = [r for r in group.records if r.id not in exempt]
    words = content_words(result.summary)
    prefixes = {w[:_SHARED_PREFIX] for w in words if len(w) >= _SHARED_PREFIX}

    def verbatim(piece: str) -> bool:
        return all(
            w in words or (len(w) >= _SHARED_PREFIX and w[:_SHARED_PREFIX] in prefixes)
            for w in content_words(piece, free)
        )

    pending: list[tuple[str, str]] = []  # (record id, part) left to the cosine
    for r in kept:
        if specifics(r.content) - said:
            raise ConsolidationError(DROPPED_FACT, f"{r.id}: a name/number/date not in the summary")
        pending += [(r.id, p) for p in _pieces(r.content, parts) if not verbatim(p)]
    if not pending:
        return
    # one event told again and again becomes a habit in other tenses ("went for a run" ->
    # "goes for a run", 0.82)
    bar = HABIT_COSINE if group.recurring else RESTATED_COSINE
    units = list(dict.fromkeys([result.summary, *_pieces(result.summary, parts)]))
    vectors = embedder.embed(units + [p for _, p in pending])
    sims = vectors[len(units) :] @ vectors[: len(units)].T
    unit_neg = np.array([negates(u) for u in units])
    for (rid, piece), row in zip(pending, sims, strict=True):
        if not ((row >= bar) & (unit_neg == negates(piece))).any():
            raise ConsolidationError(DROPPED_FACT, f"{rid}: a part of it not in the summary")


def _pieces(text: str, parts: Callable[[str], list[str]]) -> list[str]:
    """The whole text, its parts, and each of those cut at a bare "and"."""
    out = [text.strip(), *parts(text)]
    out += [p.strip() for whole in list(out) for p in _AND.split(whole) if p.strip() != whole]
    return list(dict.fromkeys(p for p in out if p))
