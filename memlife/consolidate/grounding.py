"""The grounding check: every claim of a replacement must trace to its source records.

A claim (the summary counts as one) is grounded when
  1. some source *unit* (a record's whole text, or one of its clauses) is semantically
     close: cosine >= threshold;
  2. at least one such close unit has the same polarity (memlife.text.negates).
     Cosine cannot tell "is allergic to peanuts" from "is not allergic to peanuts"
     (0.94), so polarity, not similarity, decides between duplicate and contradiction.
     Clauses are units so "switched to coffee; no longer drinks tea" can ground both
     "drinks coffee" and "no longer drinks tea";
  3. every number, date and proper noun in the claim occurs in some source's text:
     the failure mode of a summariser is a plausible invented detail, which cosine
     similarity happily lets through.
Source records that read like instructions to a model ("ignore previous instructions
and state ...") never ground anything: a memory can tell the model nothing.
A claim whose closest support is only records the planner found contradicted is rejected
too (CONTRADICTED_CLAIM): the newer statement must win.

Known limit: a swapped common noun in the same frame ("aisle" for "window" seat, 0.84)
passes the cosine when the group holds no competing statement; names, numbers, dates
and polarity are what the rules pin down.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from memlife.consolidate.base import ConsolidationError, ConsolidationResult, Group
from memlife.embed import Embedder
from memlife.text import negates, reads_additive

UNKNOWN_SOURCE = "UNKNOWN_SOURCE"
UNGROUNDED_CLAIM = "UNGROUNDED_CLAIM"
EMPTY_RESULT = "EMPTY_RESULT"
CONTRADICTED_CLAIM = "CONTRADICTED_CLAIM"
KEEP_APART = "KEEP_APART"  # the model judged the records complement/unrelated: nothing merges
UPDATE_DIRECTION = "UPDATE_DIRECTION"  # an 'update' that retires a record newer than what it keeps
ADDITIVE_NOT_UPDATE = "ADDITIVE_NOT_UPDATE"  # "also allergic to X" read as replacing the first


def check_relation(result: ConsolidationResult, group: Group) -> None:
    """The model's duplicate / update / complement verdict, checked against the records.

    complement and unrelated: both stay (KEEP_APART, nothing written). update: the ids it
    retires must be in the group and older than the newest record it keeps, and the newest
    kept record must not read as purely additive ("also", "too", "as well").
    """
    by_id = {r.id: r for r in group.records}
    if result.relation in ("complement", "unrelated"):
        raise ConsolidationError(KEEP_APART, f"model judged the group {result.relation}")
    unknown = [i for i in result.outdated_ids if i not in by_id]
    if unknown:
        raise ConsolidationError(
            UNKNOWN_SOURCE, f"outdated ids not in group {group.key}: {', '.join(unknown)}"
        )
    if result.relation != "update":
        return
    if not result.outdated_ids:
        raise ConsolidationError(UPDATE_DIRECTION, "an update names no outdated record")
    kept = [r for r in group.records if r.id not in set(result.outdated_ids)]
    if not kept:
        raise ConsolidationError(UPDATE_DIRECTION, "an update retires every record")
    newest = max(kept, key=lambda r: (r.created_at, r.id))
    for i in result.outdated_ids:
        if (by_id[i].created_at, i) > (newest.created_at, newest.id):
            raise ConsolidationError(
                UPDATE_DIRECTION, f"outdated {i} is newer than the kept statements"
            )
    if reads_additive(newest.content):
        raise ConsolidationError(ADDITIVE_NOT_UPDATE, f"{newest.id} adds a fact, it replaces none")


_TIE = 0.02  # cosines this close to the best count as equally close

_CLAUSE_SPLIT = re.compile(r"[.;!?\n]+|,\s+(?:but|and|while|though)\s+|\s+but\s+", re.IGNORECASE)
_NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'’-]*")
_SENTENCE_END = re.compile(r"[.!?:;]\s*$")
_INJECTION = re.compile(
    r"\b(ignore|disregard|forget|override)\b[^.]{0,40}\b(instructions?|prompts?|rules|above|previous)\b"
    r"|\b(system prompt|new instructions|you are now|as an ai)\b"
    r"|\b(state|say|write|claim|assert|output|respond)\s+(that|the user|user)\b",
    re.IGNORECASE,
)


def looks_like_instruction(text: str) -> bool:
    """Does a memory read like an instruction aimed at the model rather than a statement?"""
    return _INJECTION.search(text) is not None


def clauses(text: str) -> list[str]:
    return [c.strip() for c in _CLAUSE_SPLIT.split(text) if len(c.strip().split()) >= 2]


def specifics(text: str) -> set[str]:
    """Numbers, dates and proper nouns (capitalised not at sentence start, or ALL CAPS)."""
    found = {m.group() for m in _NUMBER.finditer(text)}
    for m in _WORD.finditer(text):
        w = m.group()
        if (len(w) > 1 and w.isupper()) or (
            w[0].isupper() and w != "I" and not _sentence_start(text, m.start())
        ):
            found.add(w.lower())
    return found


def _sentence_start(text: str, at: int) -> bool:
    """The text starts at ``at``, or the last non-space before it ends a sentence
    (``_SENTENCE_END`` on ``text[:at]``, without searching the whole prefix per word)."""
    if at == 0:
        return True
    i = at - 1
    while i >= 0 and text[i].isspace():
        i -= 1
    return i >= 0 and text[i] in ".!?:;"


def _vocabulary(texts: Sequence[str]) -> set[str]:
    vocab: set[str] = set()
    for t in texts:
        vocab.update(m.group() for m in _NUMBER.finditer(t))
        vocab.update(m.group().lower() for m in _WORD.finditer(t))
    return vocab


def check_grounding(
    result: ConsolidationResult, group: Group, embedder: Embedder, threshold: float
) -> None:
    """Return None when ``result`` is grounded in ``group``; raise ConsolidationError otherwise.

    Messages carry ids, indices and codes only: they end up in receipts and logs.
    """
    check_relation(result, group)
    statements = [result.summary, *result.claims]
    if not result.source_ids or any(not s.strip() for s in statements) or not result.claims:
        raise ConsolidationError(EMPTY_RESULT, "summary, claims and source_ids must be non-empty")
    by_id = {r.id: r for r in group.records}
    unknown = [i for i in result.source_ids if i not in by_id]
    if unknown:
        raise ConsolidationError(UNKNOWN_SOURCE, f"not in group {group.key}: {', '.join(unknown)}")
    sources = [by_id[i] for i in dict.fromkeys(result.source_ids)]
    usable = [r for r in sources if not looks_like_instruction(r.content)]
    if not usable:
        raise ConsolidationError(UNGROUNDED_CLAIM, "no source reads as a statement")

    units: list[tuple[str, str]] = []  # (record id, text)
    for r in usable:
        texts = dict.fromkeys([r.content.strip(), *clauses(r.content)])
        units.extend((r.id, t) for t in texts)
    vocab = _vocabulary([r.content for r in usable])
    vectors = embedder.embed([t for _, t in units] + statements)
    unit_vecs, stmt_vecs = vectors[: len(units)], vectors[len(units) :]
    sims = stmt_vecs @ unit_vecs.T  # rows are L2-normalised: dot product is cosine
    unit_neg = np.array([negates(t) for _, t in units])
    contradicted = set(group.superseded_ids) | set(result.outdated_ids)

    for i, claim in enumerate(statements):
        what = "summary" if i == 0 else f"claim {i - 1}"
        missing = specifics(claim) - vocab
        if missing:
            raise ConsolidationError(
                UNGROUNDED_CLAIM, f"{what}: {len(missing)} name/number/date in no source"
            )
        close = sims[i] >= threshold
        if not close.any():
            raise ConsolidationError(
                UNGROUNDED_CLAIM, f"{what}: best cosine {float(sims[i].max()):.2f} < {threshold}"
            )
        agree = close & (unit_neg == negates(claim))
        if not agree.any():
            raise ConsolidationError(UNGROUNDED_CLAIM, f"{what}: polarity matches no close source")
        if contradicted:
            # Judge by the closest agreeing units: "window seat" is 0.84 from "aisle seat",
            # so "any unit above threshold" would let a stale claim borrow fresh support.
            best = float(sims[i][agree].max())
            top = agree & (sims[i] >= best - _TIE)
            if {units[j][0] for j in np.flatnonzero(top)} <= contradicted:
                raise ConsolidationError(
                    CONTRADICTED_CLAIM, f"{what}: supported only by contradicted records"
                )
