"""Session 48 (audit 48m): a gate fact target matches whole words (memlife/gate.py ``_text_hit``,
``_unspaced``, audit 48ii), each edge on its own, and none in a script written without
spaces. Real components: the SQLite store, real MiniLM, the gate's own evaluation."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlife.evalset import parse_cases
from memlife.gate import evaluate
from tests.support.gate import ACTOR, rec, store_at


@pytest.mark.parametrize(
    ("fact", "content", "hit"),
    [("cat", "Keeps a bobcat in the yard.", False), ("ham", "Lives in Hamburg.", False),
     ("猫", "我家有一只猫叫汤姆。", True), ("แมว", "ฉันมีแมวสองตัว", True)],
    ids=["word-end-only", "word-start-only", "chinese", "thai"],
)  # fmt: skip
def test_a_fact_target_matches_at_word_edges_only_where_words_have_edges(
    home: Path, fact: str, content: str, hit: bool
) -> None:
    """Weak test (mutants: either edge check dropped alone; an edge check in Chinese or
    Thai). The only record holds the fact's letters at the end of a word ("bobcat") or at
    its start ("Hamburg"): no hit, the case fails. In Chinese or Thai, written without
    spaces, the fact sits inside a run of its script: a hit."""
    cases = parse_cases([{"id": "c", "query": "What about the cat?", "actor_id": ACTOR,
                          "must_retrieve": [{"fact": fact}], "k": 5, "threshold": -1.0}])  # fmt: skip
    with store_at(home) as store:
        store.put_many([rec("m-1", "facts", content, subject="pet")])
        failed = evaluate(store, cases)["failed_cases"]
    assert (failed == []) is hit, failed
