"""Audit 49r2 (session 49's late fixes): `restate_swap` reads a pronoun after a joiner as the
same subject's next clause ("Caroline likes tea and she hates coffee"), so the two runs
could trade places. Where the pronoun is someone else, a new subject for a verb said again
("Ella bebe té y él bebe café"), for a verb left out ("Alice boit du thé et lui du café")
or another pronoun than the first clause's ("Elle aime le thé et il déteste le café"),
trading the runs trades who does what: `restates` still called them one statement, so
`remember` refreshed the old fact and dropped the new one, and a night merged the two.
"""

from __future__ import annotations

import pytest

from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore
from tests.support.restating import both, neither

OTHER_SUBJECT = [
    # she drinks tea and he drinks coffee / she drinks coffee and he drinks tea
    ("Ella bebe té y él bebe café.", "Ella bebe café y él bebe té."),
    # a verb left out: Alice drinks tea and he coffee / Alice drinks coffee and he tea
    ("Alice boit du thé et lui du café.", "Alice boit du café et lui du thé."),
    ("Alice boit du thé le matin et lui du café le soir.",
     "Alice boit du café le soir et lui du thé le matin."),
    ("Ana bebe té y él café.", "Ana bebe café y él té."),
    ("Alice drinks tea and he coffee.", "Alice drinks coffee and he tea."),
    # two pronouns, two people
    ("Elle aime le thé et il déteste le café.", "Elle déteste le café et il aime le thé."),
]  # fmt: skip
# one subject taken up by its pronoun: whole clauses in another order (audit 49x5's SAME)
SAME_SUBJECT = [
    ("Alice aime le thé et elle déteste le café.", "Alice déteste le café et elle aime le thé."),
    ("Caroline likes tea and she hates coffee", "Caroline hates coffee and she likes tea"),
    ("Elle aime le thé et elle déteste le café.", "Elle déteste le café et elle aime le thé."),
    ("Ana bebe té y café.", "Ana bebe café y té."),
]


@pytest.mark.parametrize(("a", "b"), OTHER_SUBJECT)
def test_runs_traded_between_two_subjects_are_two_statements(a: str, b: str) -> None:
    assert neither(a, b)


@pytest.mark.parametrize(("a", "b"), SAME_SUBJECT)
def test_control_one_subjects_clauses_in_another_order_still_restate(a: str, b: str) -> None:
    assert both(a, b)


def test_remember_keeps_who_drinks_what(
    memory_and_store: tuple[LongTermMemory, SqliteStore],
) -> None:
    m, store = memory_and_store
    ns = "/users/u1/prefs"
    old, new = OTHER_SUBJECT[0]
    m.remember("u1", ns, None, old)
    second = m.remember("u1", ns, None, new)
    assert second.created and second.refreshed_duplicate_of is None
    assert sorted(r.content for r in store.page("u1", ns).records) == sorted([old, new])
