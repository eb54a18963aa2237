"""Forty-second audit e: the swap-word readings session 42 added (``swap_words.py``).

``_APART`` joins "step", "grand", "north", "south" with the next word wherever the pair
spells a compound, also across a phrase ("the next step mom suggested"); ``_SOURCE_ONLY``
reads every "like" of a source as a feeling, also "looks like"."""

from __future__ import annotations

import pytest

from memlife.consolidate.swap_words import unsupported
from memlife.embed import MiniLMEmbedder
from tests.unit.test_grounding import code, emb, group, result

__all__ = ["emb"]  # the module-scoped embedder fixture


def test_a_step_then_a_kin_word_is_not_always_a_compound(emb: MiniLMEmbedder) -> None:
    """The record says "The next step mom suggested was therapy."; the summary restates it
    "Mom suggested therapy as the next step." The source's "step mom" is joined into
    "stepmom" (kin:stepmother), so its "mom" grounds nothing and the faithful merge is
    refused (before session 42 it grounded). Must hold: the summary grounds."""
    source, summary = (
        "The next step mom suggested was therapy.",
        "Mom suggested therapy as the next step.",
    )
    assert unsupported(summary, [source]) == set()
    assert code(result(summary), group(source), emb) is None


@pytest.mark.parametrize(
    ("source", "summary"),
    [
        ("Jon looks like his dad.", "Jon looks like his dad and loves him."),
        ("Maria feels like her dog understands her.",
         "Maria loves her dog and feels like it understands her."),
    ],
)  # fmt: skip
def test_a_source_saying_looks_like_grounds_no_feeling(
    emb: MiniLMEmbedder, source: str, summary: str
) -> None:
    """The adversary's summary keeps the record's words and adds a feeling it never states
    ("loves"). Before session 42 the feeling was refused (no source uses one); now any
    "like" of a source grounds feeling:+, so the invented fact grounds and would supersede
    the record. Must hold: refused, UNGROUNDED_CLAIM (a source's "I like" still grounds
    "likes": test_swap_word_forms.py)."""
    assert unsupported(summary, [source]) == {"feeling:+"}
    assert code(result(summary), group(source), emb) == "UNGROUNDED_CLAIM"
