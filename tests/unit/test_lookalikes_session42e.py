"""Forty-second audit e: the lookalike check (``consolidate/lookalikes.py``, session 42).

A summary word no source uses that shares five opening letters with a source word of
another stem is refused. Three ways it goes wrong: a word that is a form of one source
word is refused because *another* source word looks like it (found on LoCoMo's own
session summaries); a British and an American spelling of one word are "another stem";
and every claim word is compared with every source word (quadratic)."""

from __future__ import annotations

import random
import string

import pytest

from memlife.consolidate import lookalikes as lookalikes_mod
from memlife.consolidate.lookalikes import lookalikes
from memlife.embed import MiniLMEmbedder
from tests.unit.test_grounding import code, emb, group, result

__all__ = ["emb"]  # the module-scoped embedder fixture


def test_a_form_of_one_source_word_is_no_lookalike_of_another(emb: MiniLMEmbedder) -> None:
    """LoCoMo's summary "Joanna's experimentation with dairy-free dessert options" beside
    its session's "Joanna is experimenting ..." and "Nate experienced a letdown": alone,
    "experimentation" grounds on "experimenting" (a derivation); with the second record in
    the merge it is refused as a lookalike of "experienced". Must hold: a word that is a form
    of some source word grounds whatever else the sources say."""
    a = "Joanna is experimenting with dairy-free desserts."
    b = "Nate experienced a letdown in a video game tournament."
    summary = (
        "Joanna is doing experimentation with dairy-free desserts; "
        "Nate experienced a letdown in a video game tournament."
    )
    assert lookalikes("Joanna enjoys experimentation.", [a]) == set()
    assert code(result(summary, ids=("s-0", "s-1")), group(a, b), emb) is None


@pytest.mark.parametrize(
    ("source", "summary"),
    [
        ("Caroline lives in a quiet neighbourhood in Leeds.",
         "Caroline lives in a quiet neighborhood in Leeds."),
        ("Jon walks the dog around his neighborhood.",
         "Jon walks the dog around his neighbourhood."),
    ],
)  # fmt: skip
def test_a_spelling_of_the_source_word_is_no_lookalike(
    emb: MiniLMEmbedder, source: str, summary: str
) -> None:
    """A model writing American English restates a British record: "neighborhood" and
    "neighbourhood" share 7 letters of 13 (under 0.6) and their stems part by 5, so the
    faithful merge is refused. Must hold: one word in two spellings grounds, as "gray"
    grounds "grey"."""
    assert code(result(summary), group(source), emb) is None


def _made_up(rnd: random.Random, n: int) -> str:
    return " ".join("".join(rnd.choices(string.ascii_lowercase, k=9)) for _ in range(n))


def test_only_words_sharing_an_opening_are_compared(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long summary against long sources of words rarely seen (codes, names, another
    language in Latin letters): each claim word was compared with each source word, 3.4 s
    per statement for a 4 KB summary against 20 records of 4 KB, 58 s against 20 of 64 KB,
    and check_grounding runs it for the summary and every claim. Must hold: the work grows
    with the words that share an opening, not with their product."""
    calls = 0
    real = lookalikes_mod._shared

    def counting(a: str, b: str) -> int:
        nonlocal calls
        calls += 1
        return real(a, b)

    monkeypatch.setattr(lookalikes_mod, "_shared", counting)
    rnd = random.Random(42)
    sources = [_made_up(rnd, 100) for _ in range(20)]
    claim = _made_up(rnd, 200)
    lookalikes(claim, sources)
    assert calls <= 2 * 200, f"{calls} comparisons for 200 claim words"
