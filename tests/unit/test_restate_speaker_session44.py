"""Audit 44a (session 44): restatements after session 43's "I" beside "and"/"or" (ef34bcd): the word is
a person only as a list's item; said again as a clause's subject it is the same speaker."""

from __future__ import annotations

import pytest

from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore
from tests.support.restating import both, neither

REPEATED_I = "'and I' keeps 'I' even when it repeats the speaker who opened the text"
OPENER_I = "'I' is filler unless an 'and'/'or' touches it: 'but I', 'so I', 'then I' vanish"
LEAD_NAME = "a leading 'I' is the first kept word: the name after 'I and' counts as a name"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("I went to Paris and I loved it.", "I went to Paris and loved it."),
        ("I moved to Berlin and I started a new job.", "I moved to Berlin and started a new job."),
    ],
)  # fmt: skip
def test_the_speaker_said_twice_is_one_statement(a: str, b: str) -> None:
    """The user repeats "I" as the subject of a second clause. Before ef34bcd both read as
    one statement. Must hold: each restates the other (the same speaker did both)."""
    assert both(a, b)


def test_the_subject_list_with_i_first_restates() -> None:
    """ "I and Bob" for "Bob and I": the subject list's items in another order (as "My
    sister and I" / "I and my sister" already restate). Must hold: one statement."""
    assert both("Bob and I went to Paris.", "I and Bob went to Paris.")


def test_another_subject_in_the_second_clause_stays_apart() -> None:
    """Control (holds before and after the fix): "we ... and I loved it" is not "we ...
    and loved it", nor is "Bob ... and I stayed home" Bob staying home."""
    assert neither("We went to Paris and I loved it.", "We went to Paris and loved it.")
    assert neither("Bob went to Paris and I stayed home.", "Bob went to Paris and stayed home.")
    assert neither("Melanie and I went camping.", "Melanie went camping.")


def test_remember_refreshes_the_speakers_restated_fact(
    memory_and_store: tuple[LongTermMemory, SqliteStore],
) -> None:
    """The user says "I went to Paris and loved it", later "I went to Paris and I loved
    it". Must hold: the second refreshes the first (one record, not two)."""
    m, store = memory_and_store
    ns = "/users/u1/facts"
    m.remember("u1", ns, None, "I went to Paris and loved it.")
    second = m.remember("u1", ns, None, "I went to Paris and I loved it.")
    assert not second.created
    assert len(store.page("u1", ns).records) == 1


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Bob went to Paris but I stayed home.", "Bob went to Paris but stayed home."),
        ("Bob cooked dinner so I washed the dishes.", "Bob cooked dinner so washed the dishes."),
        ("Bob left and then I went home.", "Bob left and then went home."),
    ],
)  # fmt: skip
def test_i_opening_a_later_clause_is_a_person(a: str, b: str) -> None:
    """The adversary drops "I" from the subject of a later clause that "but", "so" or
    "then" opens: the second clause is then Bob's, not the speaker's. Must hold: neither
    restates the other (who stayed home changed)."""
    assert neither(a, b)


def test_remember_keeps_what_the_speaker_did_apart_from_bob(
    memory_and_store: tuple[LongTermMemory, SqliteStore],
) -> None:
    """The user says "Bob went to Paris but stayed home" (sic), then "Bob went to Paris
    but I stayed home". Must hold: the second is stored beside the first, not taken as a
    refresh of it (the speaker's fact would be lost)."""
    m, store = memory_and_store
    ns = "/users/u1/facts"
    m.remember("u1", ns, None, "Bob went to Paris but stayed home.")
    second = m.remember("u1", ns, None, "Bob went to Paris but I stayed home.")
    assert second.created and second.refreshed_duplicate_of is None
    assert len(store.page("u1", ns).records) == 2
