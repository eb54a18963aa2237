"""Audit 51x5 (session 51: what an offline merge may write): where "only" stands.

`restates` compares content words as a bag, so a moved "only" changed nothing: "Eats only
meat on Sundays." (an all-meat Sunday) restated "Eats meat only on Sundays." (meat once a
week), "Takes only aspirin at night." restated "Takes aspirin only at night." (cosine
0.98-0.99). A night merged each pair with no subject into the newer text (the extractive
consolidator keeps one statement verbatim), and the older fact was superseded, told by no
active record. The fix keeps "only" with the phrase a link or time word opens; "I only
drink tea" / "I drink only tea" still restate.

Real components: the embedded SQLite store, the bundled MiniLM, the extractive
consolidator (no key), one nightly apply run through ``run_local``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife.model import MemoryRecord, Source, Status
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.restating import both, neither

DAY1 = datetime(2026, 4, 6, 7, tzinfo=UTC)
NIGHT = DAY1 + timedelta(days=20)
NS = "/users/u-5/notes"  # no subject, deletion not enforced: no evaluation set needed

MOVED = [
    ("Eats only meat on Sundays.", "Eats meat only on Sundays."),
    ("Takes only aspirin at night.", "Takes aspirin only at night."),
    ("Drinks only coffee on weekends.", "Drinks coffee only on weekends."),
    ("Calls only her mom on Sundays.", "Calls her mom only on Sundays."),
    ("Alice speaks only French at work.", "Alice speaks French only at work."),
    ("Alice works only from home on Fridays.", "Alice works from home only on Fridays."),
]
# "only" in another place that restricts the same thing: they restated before and must still
SAME = [
    ("I only drink green tea.", "I drink only green tea."),
    ("I only drink green tea, never coffee.", "I drink only green tea, never any coffee."),
    ("Eats meat only on Sundays.", "Eats meat on Sundays only."),
    ("Alice speaks French at work only.", "Alice speaks French only at work."),
    ("Eats meat only.", "Eats only meat."),
]


def _night(home: Path, older: str, newer: str) -> dict[str, str]:
    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many([
            MemoryRecord(id=f"m-{i}", actor_id="u-5", namespace=NS, memory_type="semantic", content=text,
                         source=Source.user_stated, created_at=DAY1 + timedelta(days=5 * i))
            for i, text in enumerate((older, newer))
        ])  # fmt: skip
    finally:
        store.close()
    assert run_local(RunConfig(dry_run=False, now=NIGHT)).status == "success"
    store = SqliteStore(home / "memlife.db")
    try:
        return {r.id: r.content for r in store.iter_all() if r.status is Status.active}
    finally:
        store.close()


@pytest.mark.parametrize(("a", "b"), MOVED)
def test_only_moved_onto_another_phrase_is_another_statement(a: str, b: str) -> None:
    assert neither(a, b)


@pytest.mark.parametrize(("a", "b"), SAME)
def test_control_only_restricting_the_same_thing_still_restates(a: str, b: str) -> None:
    assert both(a, b)


def test_a_night_keeps_both_facts_when_only_moves(offline_home: Path) -> None:
    older, newer = MOVED[1]
    active = _night(offline_home, older, newer)
    assert sorted(active.values()) == sorted([older, newer])


def test_control_a_night_still_merges_only_said_before_the_verb(offline_home: Path) -> None:
    older, newer = SAME[0]
    active = _night(offline_home, older, newer)
    assert list(active.values()) == [newer] and next(iter(active)).startswith("r-")
