"""Session 45 (audit 45a): the polarity-flip update cue of 08879e8 (``group.looks_like_update``, a flip
counts only where the negated clause holds a word the other text uses).

(1) The rule changed what ``infer_subjects`` answers (its probable updates) but the derived
cache (memlife/derived.py) kept its version, so a shard inferred before the change is
answered from the cache with the old rule's updates. (2) The negated clause is read from the
negation on: a shared word just before it ("The wedding is not happening", "is allergic to
nothing") is not read, so a real update is no longer asked.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import memlife
import memlife.derived as derived_mod
import memlife.group as group
import memlife.inferred.cached as cached
from memlife.derived import derived_for
from memlife.embed_cache import EmbeddingCache
from memlife.group import looks_like_update
from memlife.model import MemoryRecord, MemoryType, plan_view
from memlife.policy import load_policy
from memlife.stores.sqlite import SqliteStore
from memlife.text import _UPDATE_CUE, negates, reads_additive
from tests.e2e.test_dry_run_fast_paths import WordHashEmbedder

T0 = datetime(2026, 5, 1, tzinfo=UTC)
SHARD = ("u-1", "/users/u-1/facts")
# the derived cache's version when the code before 08879e8 kept its inference rows
BEFORE_08879E8 = f"derived-11:{memlife.__version__}"


def _any_flip(newer: str, older: str) -> bool:
    """looks_like_update as it was before 08879e8: any polarity flip is a cue."""
    cue = _UPDATE_CUE.search(newer) is not None or negates(newer) != negates(older)
    return cue and not reads_additive(newer) and group.shared_content_word(newer, older)


def test_an_inference_kept_under_the_older_update_rule_is_not_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator upgrades memlife past 08879e8 on a store whose last night inferred
    "reading fantasy novels, not sports" as the update of "reading fantasy novels" (any
    flip was a cue then). The shard is unchanged, so the next night asks the derived
    cache the same question: its answer must be today's rule's (no update), not the kept
    one (a POSSIBLE_UPDATE naming a true fact's replacement, every night)."""
    with SqliteStore(tmp_path / "m.db") as store:
        store.put_many([
            MemoryRecord(id=f"e-{i}", actor_id=SHARD[0], namespace=SHARD[1], content=text,
                         memory_type=MemoryType.semantic, created_at=T0 + timedelta(days=30 * i))
            for i, text in enumerate(("Tim enjoys reading fantasy novels by the fire.",
                                      "Tim enjoys reading fantasy novels by the fire, not sports."))
        ])  # fmt: skip
        views = [plan_view(r) for r in store.get_many(["e-0", "e-1"]).values()]
        embeddings = EmbeddingCache(WordHashEmbedder(), path=tmp_path / "embeddings.db")  # type: ignore[arg-type]
        policy = load_policy()
        with monkeypatch.context() as old_code:  # the night before the upgrade
            old_code.setattr(group, "looks_like_update", _any_flip)
            old_code.setattr(derived_mod, "VERSION", BEFORE_08879E8)
            before = cached.infer_shard(store, SHARD, views, {}, policy, embeddings)
            assert before.updates == {"e-0": "e-1"}
            kept = derived_for(embeddings)
            assert kept is not None
            kept.flush()
        fresh = cached._infer(store, views, {}, policy, embeddings, None, 4096)
        assert fresh.updates == {}  # today's rule: "not sports" denies nothing they share
        after = cached.infer_shard(store, SHARD, views, {}, policy, embeddings)
        assert after.updates == fresh.updates


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("The wedding is on Saturday.", "The wedding is not happening."),
        ("Sam is allergic to peanuts.", "Sam is allergic to nothing."),
        ("My knee hurts.", "My knee isn't hurting anywhere."),
    ],
)
def test_a_denial_whose_shared_word_stands_before_the_negation_is_an_update(
    older: str, newer: str
) -> None:
    """A fact flips and the word the two share opens the denying clause ("The wedding
    ... not happening", "allergic to nothing"): the newer text is a real update (before
    08879e8 it was asked). It must still read as one."""
    assert looks_like_update(newer, older)


@pytest.mark.parametrize(
    ("older", "newer"),
    [  # LoCoMo (CC BY-NC 4.0, evaluation only): the pairs 08879e8 set apart stay apart
        ("Gina supports Jon through setbacks and encourages him not to give up.",
         "Gina sees Jon as someone on a different path but appreciates having him as someone "
         "to root for and support each other."),
        ("Tim is currently reading a fantasy book by Patrick Rothfuss which he finds awesome.",
         "Tim is not part of a sports team but enjoys reading fantasy novels."),
        ("Maria considers the people at the shelter like family to her.",
         "Maria's family has been her rock, giving her words of encouragement and reminding "
         "her she's not alone."),
    ],
)  # fmt: skip
def test_a_negation_about_something_else_is_still_no_update(older: str, newer: str) -> None:
    """Control for the test above: a fix reading the words before a negation must not read
    across "and"/"but" into another clause (Gina "supports ... and encourages him not")."""
    assert not looks_like_update(newer, older)


def test_a_not_to_denies_only_what_follows() -> None:
    """Reading the clause before a negation (above) must not make "encourages him not to
    give in" deny the encouraging (LoCoMo's Gina says it so): the older text is not
    replaced, while a decision turned round still is an update."""
    assert not looks_like_update(
        "Gina encourages Jon not to give in.", "Gina encourages Jon to chase his dreams."
    )
    assert looks_like_update("Sam decided not to move to Paris.", "Sam decided to move to Paris.")


def test_only_the_words_just_before_a_negation_are_what_it_denies() -> None:
    """A real LoCoMo pair (Sam) the whole-clause reading sent to review: "the weight wasn't
    great" denies nothing of the doctor both texts name; the update it would ask is none."""
    newer = "Sam had a tough week and had a check-up with the doctor where the weight wasn't great."
    older = (
        "Sam had a tough week and had a doctor's appointment which served as a wake-up call "
        "to take better care of himself."
    )
    assert not looks_like_update(newer, older)
    assert looks_like_update("My knee isn't hurting anywhere.", "My knee hurts.")
