"""Audit 43a (session 43): restatements after session 42's list items (``restate.py``, 2b64c98): an item a
number word opens runs to the clause's limit, past the verb it cannot tell from a noun."""

from __future__ import annotations

import pytest

from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore
from tests.support.restating import both, neither

SPILLED = "an item a number opens takes the verb and object: the subject's pair with them is lost"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # restated since 2b64c98 ("seven" opens an item that now runs to "for")
        ("Mom and seven coworkers took dad out for dinner.",
         "Dad and seven coworkers took mom out for dinner."),
        ("Mom and seven coworkers took dad out for dinner with grandma.",
         "Dad and seven coworkers took mom out for dinner with grandma."),
        # a quantifier's three words took the verb already (session 42, first half)
        ("Mom and two coworkers drove dad home.", "Dad and two coworkers drove mom home."),
    ],
)  # fmt: skip
def test_who_took_whom_is_kept_behind_a_number(a: str, b: str) -> None:
    """The adversary trades the subject and the object of a clause whose subject list
    ends in an item a number word opens, and whose object a particle or a link follows
    ("took dad out for dinner"). The item runs over "took" and "dad", so no pair keeps
    mom before dad. Must hold: neither restates the other (who took whom changed)."""
    assert neither(a, b)


def test_the_subject_lists_order_still_restates() -> None:
    """Control (holds before and after the fix): the subject list's items in another
    order say the same thing."""
    assert both(
        "Mom and seven coworkers took dad out for dinner.",
        "Seven coworkers and mom took dad out for dinner.",
    )


def test_remember_keeps_who_took_whom(
    memory_and_store: tuple[LongTermMemory, SqliteStore],
) -> None:
    """The user says "Mom and seven coworkers took dad out for dinner", then the reverse.
    Must hold: the second fact is stored beside the first, not refreshed into it."""
    m, store = memory_and_store
    ns = "/users/u1/facts"
    m.remember("u1", ns, None, "Mom and seven coworkers took dad out for dinner.")
    second = m.remember("u1", ns, None, "Dad and seven coworkers took mom out for dinner.")
    assert second.created and second.refreshed_duplicate_of is None
    assert len(store.page("u1", ns).records) == 2
