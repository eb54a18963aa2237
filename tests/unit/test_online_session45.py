"""Session 45 (audit 45c): the online long-term library (remember/recall) as a production agent uses it:
two writers on one store object, restatements that differ only in form, facts nobody can see."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memlife import Memory
from memlife.errors import InputError
from memlife.ledger import AccessLedger
from memlife.model import Status
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore
from memlife.text import norm_sha256
from tests.unit.test_online_adversarial import RacingStore

NS = "/users/u1/facts"


@pytest.fixture()
def racing(tmp_path: Path) -> Iterator[RacingStore]:
    with RacingStore(tmp_path / "m.db") as store:
        yield store


def _active(store: SqliteStore, ns: str = NS) -> list[str]:
    return [r.content for r in store.page("u1", ns, statuses=[Status.active]).records]


def test_two_memories_over_one_store_object_store_one_fact_once(
    racing: RacingStore, tmp_path: Path
) -> None:
    """An application opens one SqliteStore and hands it to two `Memory` objects (two
    request handlers, or a LangGraph store beside the agent's own Memory): both remember the
    same fact at once; A's insert lands after B's index looked and before B's insert. Must
    hold: one active record says it (B refreshes A's), as with two processes."""
    fact = "Has a meeting with the dentist on Friday."
    a = Memory(racing, ledger=tmp_path / "la")
    b = Memory(racing, ledger=tmp_path / "lb")
    b.recall("warm up", actor="u1", namespace=NS)  # B's index is loaded (empty)
    first: list[str] = []
    racing.other = lambda: first.append(a.remember(fact, actor="u1", namespace=NS).id)
    got = b.remember(fact, actor="u1", namespace=NS)
    a.close()
    b.close()
    assert _active(racing) == [fact]
    assert not got.created and got.id == first[0]


def test_a_decimal_is_not_an_exact_duplicate_of_a_range(
    memory_and_store: tuple[LongTermMemory, SqliteStore],
) -> None:
    """The agent saves "Takes 1-5 mg of lorazepam." (a range), later the exact dose "Takes
    1.5 mg of lorazepam."; or "Ran 5-6 km" then the watch's "Ran 5.6 km". Must hold: each
    second fact is stored beside the first, never taken as an exact duplicate (refreshed,
    marked verified, the new number lost). Controls: a case or punctuation change still is."""
    m, store = memory_and_store
    for earlier, same, later in (
        ("Takes 1-5 mg of lorazepam.", "takes 1-5 MG of lorazepam", "Takes 1.5 mg of lorazepam."),
        ("Ran 5-6 km this morning.", "ran 5-6 km  this morning!", "Ran 5.6 km this morning."),
    ):
        m.remember("u1", NS, None, earlier)
        assert not m.remember("u1", NS, None, same).created  # control: one statement
        second = m.remember("u1", NS, None, later)
        assert second.created and second.refreshed_duplicate_of is None, later
    assert norm_sha256("Takes 2.5 mg.") != norm_sha256("Takes 2/5 mg.")
    assert len(_active(store)) == 4


@pytest.mark.parametrize("fact", ["\u200b", "\ufeff\u200d", "\x00", "\u2060 \x00"])
def test_a_fact_nobody_can_see_is_refused_as_blank(
    memory_and_store: tuple[LongTermMemory, SqliteStore], fact: str
) -> None:
    """An agent's tool call hands `remember` a fact of zero-width characters, a BOM or NUL
    bytes only (a bad decode, a stripped template). Must hold: an InputError naming `fact`,
    as for a blank one, and nothing written (subject and owner already read such text as
    blank)."""
    m, store = memory_and_store
    with pytest.raises(InputError, match="fact"):
        m.remember("u1", NS, None, fact)
    assert _active(store) == []


def test_a_fact_and_a_query_of_exactly_the_bound_are_taken(home: Path) -> None:
    """The bound on a fact and on a query (the policy's `content_max_bytes`, here 40) is
    "at most": an agent whose text is exactly that long (a multi-byte letter counting its
    UTF-8 bytes) must have it stored and recalled; one byte more is a clear InputError."""
    fact = "Café on Rue Royale, table by the doors."  # 39 characters, 40 bytes
    assert len(fact.encode()) == 40
    with SqliteStore(home / "m.db") as store:
        m = LongTermMemory(store, ledger=AccessLedger(home / "ledger"), content_max_bytes=40)
        assert m.remember("u1", NS, None, fact).created
        assert [h.record.content for h in m.recall("u1", fact)] == [fact]
        with pytest.raises(InputError, match="query is 41 bytes"):
            m.recall("u1", fact + "!")
        with pytest.raises(InputError, match="fact is 41 bytes"):
            m.remember("u1", NS, None, fact + "!")
        m.close()
