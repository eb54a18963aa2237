"""Audit 50l (session 50): online `remember` on real memories, its duplicate check.

LoCoMo's 2,541 observations saved through `remember` in session order (one actor per
conversation, a namespace per speaker or one for both) refresh none: no observation is
an exact duplicate of another of its conversation, 61 pairs reach the near-duplicate
cosine (0.9) and `restates` reads none of them as the same words. What the check got
wrong was not on LoCoMo's texts but beside them: `restates` folded words through Snowball,
which folds derivation with inflection, so a fact that differs from a kept one by a word
of the same stem and another meaning ("experiment" / "experience", "classical" /
"classic", "customer" / "custom") refreshed the old record and was never stored.

Real components: the embedded SQLite store, the bundled MiniLM, the access ledger.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlife.online.memory import LongTermMemory
from memlife.restate import restates
from memlife.stores.sqlite import SqliteStore

LOCOMO = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "locomo10.json"

# a kept fact, then another one the agent saves: one word of the same Snowball stem apart
# (cosine 0.934 and 0.901 with MiniLM, at or above the 0.9 near-duplicate line)
DERIVED = [
    ("Nate shared his experience with vegan desserts.",
     "Nate shared his experiment with vegan desserts."),
    ("Calvin listens to classic music.", "Calvin listens to classical music."),
]  # fmt: skip


@pytest.mark.parametrize(("kept", "said"), DERIVED)
def test_a_word_of_the_same_stem_and_another_meaning_is_a_new_fact(
    memory_and_store: tuple[LongTermMemory, SqliteStore], kept: str, said: str
) -> None:
    """Must hold: the second fact is stored beside the first, not taken as a restatement
    that refreshes (and verifies) the first record."""
    m, store = memory_and_store
    ns = "/conversations/c/nate"
    m.remember("c", ns, None, kept, source="agent_inferred", confidence=0.8)
    second = m.remember("c", ns, None, said, source="agent_inferred", confidence=0.8)
    assert second.created and second.refreshed_duplicate_of is None
    assert sorted(r.content for r in store.page("c", ns).records) == sorted([kept, said])


def test_restates_tells_a_derived_word_from_its_stem() -> None:
    """The rule itself: a word Snowball gives the stem of another, with another ending
    than an inflection, is another word."""
    assert not restates("Gina makes custom jewelry.", "Gina makes jewelry for customers.")
    assert not restates(
        "Jolene plays the organ at church.", "Jolene plays the organization at church."
    )
    assert not restates("Melanie enjoys classical music.", "Melanie enjoys classic music.")
    assert not restates("Sam has a new experiment.", "Sam has a new experience.")


def test_control_inflections_still_restate() -> None:
    """Passes before and after: an inflection is the same word ("studies" / "study",
    "running" / "runs", "gaming" / "game", "hikes" / "hiking", "weekly" / "weeks")."""
    assert restates("Caroline studies painting.", "Caroline study painting.")
    assert restates("Jon runs dance classes.", "Jon running dance classes.")
    assert restates("James works at a gaming company.", "James works at a game company.")
    assert restates("Andrew hikes with his dogs.", "Andrew hiking with his dogs.")
    assert restates("Audrey takes her dogs out weekly.", "Audrey takes her dog out weekly.")
    assert restates("Melanie enjoys classical music.", "Melanie enjoys classical musics.")


def _session_time(text: str) -> datetime:
    return datetime.strptime(text, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


@pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo not present (../shared/data)")
def test_control_one_locomo_conversation_saved_as_an_agent_saves_it_keeps_every_fact(
    memory_and_store: tuple[LongTermMemory, SqliteStore],
) -> None:
    """Conversation 0's observations (184) through `remember` in session order, one
    namespace per speaker: none is a duplicate of another, so every one is stored and no
    write refreshes (before and after the fix)."""
    m, store = memory_and_store
    raw = json.loads(LOCOMO.read_text())[0]
    sid, talk = raw["sample_id"], raw["conversation"]
    said = 0
    for key in sorted(raw["observation"], key=lambda k: int(k.split("_")[1])):
        at = _session_time(talk[f"session_{key.split('_')[1]}_date_time"])
        for speaker, items in raw["observation"][key].items():
            ns = f"/conversations/{sid}/{speaker.lower()}"
            for text, _ids in items:
                got = m.remember(
                    sid, ns, None, text, source="agent_inferred", confidence=0.8, at=at
                )
                assert got.created, (text, got.refreshed_duplicate_of)
                said += 1
    stored = [r for ns in store.list_namespaces(sid) for r in store.page(sid, ns).records]
    assert len(stored) == said == 184
