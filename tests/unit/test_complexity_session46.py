"""Session 46 (audit 46h): inputs an agent can store that make the night's subject inference super-linear.

Each test counts work (restatement checks, characters handed to a regex or to the word
reader), never time: the CPU figures are in the audit's report.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import numpy as np
import pytest

import memlife.group as group
import memlife.restate as restate
from memlife.group import InferenceItem, infer_subjects
from memlife.text import negates, norm_sha256


def _items(texts: list[str]) -> list[InferenceItem]:
    return [
        InferenceItem(f"m-{i}", t, float(i), norm_sha256(t), negates(t))
        for i, t in enumerate(texts)
    ]


def test_near_duplicates_that_do_not_restate_cost_a_bounded_number_of_checks_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An agent saves, without a subject, many near duplicates that each say other words
    ("a small cup of green tea with honey", "... of black tea with lemon"): MiniLM puts
    8% of such pairs past the merge cosine, so each new statement is a leader that every
    later one is checked against (1,000 records: 40,253 restates() calls, 11.5 s CPU;
    5,000: about 1,000,000 calls, minutes, every night the shard changes). Here every pair
    is at cosine 1 (the worst case); what must hold: each record costs a bounded number of
    restatement checks, as the planner's own clustering bounds its leaders (MAX_LEADERS)."""
    sizes = "small large huge tiny warm hot full half".split()
    kinds = "green black jasmine mint oolong white herbal chai".split()
    extras = "honey lemon milk sugar cream".split()
    texts = [
        f"every morning I drink a {a} cup of {b} tea with {c}"
        for a, b, c in itertools.product(sizes, kinds, extras)
    ][:160]
    vectors = np.ones((len(texts), 8), np.float32) / np.sqrt(8)
    calls = 0
    real = restate.restates

    def counted(a: str, b: str) -> bool:
        nonlocal calls
        calls += 1
        return real(a, b)

    monkeypatch.setattr(restate, "restates", counted)
    found = infer_subjects(_items(texts), vectors)
    assert found.statements == {}  # no two say the same words: nothing merged
    assert calls <= 8 * len(texts), f"{calls} restatement checks for {len(texts)} records"


class _Scanned:
    """A compiled pattern that counts the characters its engine may walk: the span from
    ``pos`` to the match's end (or ``endpos``) for a search; the whole span for a match of
    ``_CLAUSE_START``, whose leading ``(?s:.*)`` runs to the end before backing off."""

    def __init__(self, pattern: re.Pattern[str], tally: list[int]) -> None:
        self.pattern, self.tally = pattern, tally

    def search(self, s: str, pos: int = 0, endpos: int | None = None) -> Any:
        end = len(s) if endpos is None else endpos
        m = self.pattern.search(s, pos, end)
        self.tally[0] += (m.end() if m else end) - pos
        return m

    def match(self, s: str, pos: int = 0, endpos: int | None = None) -> Any:
        end = len(s) if endpos is None else endpos
        self.tally[0] += end - pos
        return self.pattern.match(s, pos, end)


def test_the_words_a_text_negates_are_read_in_linear_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """A memory of many negations with no clause mark ("I do not like tea I do not like
    tea ...", 64 kB under the default content bound) takes 30 s of CPU in the night's
    update check (looks_like_update, when it pairs with a record that negates nothing),
    "not not not ..." 100 s: each negation's clause start is found by a match over all
    the text before it, and the rest of the clause is re-read to its end. What must hold:
    the characters handed to the clause patterns and to the word reader grow linearly
    with the text, and the words found are the same."""
    text = "I do not like tea " * 400
    want = group._negated_words(text)
    assert want == {"tea"}
    tally = [0]
    monkeypatch.setattr(group, "_CLAUSE_START", _Scanned(group._CLAUSE_START, tally))
    monkeypatch.setattr(group, "_CLAUSE_END", _Scanned(group._CLAUSE_END, tally))
    real = group._content_words

    def counted(s: str) -> set[str]:
        tally[0] += len(s)
        return real(s)

    monkeypatch.setattr(group, "_content_words", counted)
    assert group._negated_words(text) == want
    assert tally[0] <= 50 * len(text), f"{tally[0]} characters read for {len(text)}"
