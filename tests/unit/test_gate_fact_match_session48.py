"""Session 48 (audit 48ii): a ``{fact: ...}`` / ``{claim: ...}`` target is a fact, not a run of letters.

Real components: the SQLite store, real MiniLM, the gate's own before/after evaluation.
"""

from __future__ import annotations

from pathlib import Path

from memlife.evalset import parse_cases
from memlife.gate import evaluate, evaluate_changes
from memlife.policy import load_policy
from tests.support.gate import ACTOR, rec, store_at


def test_a_night_deleting_the_only_record_of_a_must_fact_is_blocked(home: Path) -> None:
    """The set pins a fact by its words ({fact: "cat"}); the night deletes the only record
    that states it. Another retrieved record holds the letters inside a word ("Works in
    education."). The fact is gone: the gate must block, not count "edu-cat-ion" as the cat."""
    cat = rec("m-cat", "facts", "Has a cat named Tom.", subject="pet")
    job = rec("m-job", "facts", "Works in education.", subject="job")
    cases = parse_cases([{"id": "cat-kept", "query": "Does the user have a cat?",
                          "actor_id": ACTOR, "must_retrieve": [{"fact": "cat"}],
                          "k": 5, "threshold": -1.0}])  # fmt: skip
    with store_at(home) as store:
        store.put_many([cat, job])
        assert evaluate(store, cases)["failed_cases"] == []  # the fact is there tonight
        verdict = evaluate_changes(store, cases, load_policy().gate, deletions=["m-cat"])
    assert verdict["blocked"] is True, verdict
    assert verdict["regressed_cases"] == ["cat-kept"]
