"""Audit 43w (session 43): `remember`'s duplicate check on facts an agent writes (online long-term memory)."""

from __future__ import annotations

from memlife.online.memory import LongTermMemory
from memlife.restate import restates
from memlife.stores.sqlite import SqliteStore
from memlife.text import norm_sha256


def test_a_dose_with_a_leading_decimal_point_is_not_the_dose_ten_times_larger(
    memory_and_store: tuple[LongTermMemory, SqliteStore],
) -> None:
    """The agent saves "takes .5 mg of Xanax", later "takes 5 mg of Xanax" (ten times the
    dose). Must hold: the second is stored beside the first, not taken as an exact
    duplicate that refreshes (and verifies) the half-milligram record."""
    m, store = memory_and_store
    ns = "/users/u1/health"
    m.remember("u1", ns, None, "Takes .5 mg of Xanax at night.")
    second = m.remember("u1", ns, None, "Takes 5 mg of Xanax at night.")
    assert second.created and second.refreshed_duplicate_of is None
    assert len(store.page("u1", ns).records) == 2


def test_a_leading_decimal_point_is_part_of_the_statement() -> None:
    """ ".08" and "08" (or "8") are other numbers; ".5" and "0.5" are one. Must hold: the
    statement key and restates() keep ".5" apart from "5" and read it as "0.5"."""
    assert norm_sha256("BAC was .08") != norm_sha256("BAC was 08")
    assert not restates("Takes .5 mg daily.", "Takes 5 mg daily.")
    assert norm_sha256("Takes .5 mg") == norm_sha256("Takes 0.5 mg")


def test_remember_keeps_the_user_added_to_who_went(
    memory_and_store: tuple[LongTermMemory, SqliteStore],
) -> None:
    """The agent saves "Melanie went camping with her kids.", then the user says she went
    too: "Melanie and I went camping with her kids." (cosine 0.91). Must hold: the second
    fact is stored, not a refresh of the first that loses who went."""
    m, store = memory_and_store
    ns = "/users/u1/facts"
    m.remember("u1", ns, None, "Melanie went camping with her kids.")
    second = m.remember("u1", ns, None, "Melanie and I went camping with her kids.")
    assert second.created and second.refreshed_duplicate_of is None
    assert len(store.page("u1", ns).records) == 2
    assert not restates("Bob went to Paris.", "Bob and I went to Paris.")
