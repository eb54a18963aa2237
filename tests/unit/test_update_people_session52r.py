"""Audit 52r (session 52's fixes attacked): the two-people update rule (audit 52a).

`group.about_other_people` drops a probable update whose texts both open with names of the
shard and share none. A name is any word the shard writes capitalised mid-sentence, so the
rule reads the people, places or products a user's own facts *name* as the people those facts
are *about*. An agent's notes about its one user ("Bob is the user's manager." then "Alice is
now the user's manager.", "Python is my favourite language." then "Rust is my favourite
language now.") are one person's update of a role whose holder changed: before audit 52a they
were a probable update (POSSIBLE_UPDATE, or the model's group); since, beside any other note
naming Alice and Bob (or Python and Rust) mid-sentence, they were never paired, and the stale
fact stayed active with nothing to review.
"""

from __future__ import annotations

from pathlib import Path

from tests.unit.test_locomo_nights_session44 import NIGHT1, night, open_items, seed
from tests.unit.test_update_people_session52a import _updates

XFAIL = "audit52r: a user's own update opening with the names it changes was never paired"

BOSS = [
    ("b-0", "The user reports to Alice; before the reorganisation it was Bob."),
    ("b-1", "Bob is the user's manager."),
    ("b-2", "Alice is now the user's manager."),
]
LANGUAGE = [
    ("l-0", "Writes Python at work and Rust on weekends."),
    ("l-1", "Python is my favourite programming language."),
    ("l-2", "Rust is my favourite programming language now."),
]


def test_a_users_manager_who_changed_is_still_a_probable_update() -> None:
    """Alice "is now the user's manager" updates Bob "is the user's manager": the fact is the
    user's, the names are whom the role names."""
    assert _updates(BOSS) == {"b-1": "b-2"}


def test_a_first_person_favourite_that_changed_is_still_a_probable_update() -> None:
    assert _updates(LANGUAGE) == {"l-1": "l-2"}


def test_control_without_the_naming_note_the_pairs_were_always_asked() -> None:
    """Control: the same two facts without a third note naming Alice and Bob (or Python and
    Rust) mid-sentence pair as they did before audit 52a (no names known to the shard)."""
    assert _updates(BOSS[1:]) == {"b-1": "b-2"}
    assert _updates(LANGUAGE[1:]) == {"l-1": "l-2"}


def test_control_two_third_persons_facts_stay_apart() -> None:
    """Control: 52a's case is kept: third-person facts of two named people (no user, no first
    person) are never one's update of the other's."""
    rows = [
        ("g-0", "The book club meets with Jolene and Deborah on Fridays."),
        ("g-1", "Jolene spends time playing video games with her partner to relax."),
        ("g-2", "Deborah used to play video games, finding it a good way to relax."),
    ]
    assert _updates(rows) == {}


def _said(rid: str, text: str, at: str) -> dict[str, object]:
    return {"id": rid, "actor_id": "u-1", "namespace": "/users/u-1/facts",
            "memory_type": "semantic", "content": text, "created_at": at,
            "source": "user_stated", "confidence": 0.9}  # fmt: skip


def test_the_night_asks_whether_the_new_manager_replaces_the_old(home: Path) -> None:
    """Through the real CLI night on the SQLite store (offline): the stale manager is offered
    for review beside its update, as before audit 52a."""
    seed(home, [_said(rid, text, f"2023-0{n + 1}-01T10:00:00Z")
                for n, (rid, text) in enumerate(BOSS)])  # fmt: skip
    night(NIGHT1)
    asked = sorted((i["record_id"], i["pair_id"], i["reason"]) for i in open_items())
    assert ("b-1", "b-2", "POSSIBLE_UPDATE") in asked, asked
