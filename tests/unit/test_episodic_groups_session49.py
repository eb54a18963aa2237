"""Audit 49x5 (session 49: what an offline merge may write): distinct events of one subject.

The planner merges only an episodic statement said more than once ("distinct events are
not contradictions; only repeated ones consolidate"), but it put every repeated statement
of a subject in ONE group. Staging then clustered that group's statements by cosine
(``near_duplicate_cosine`` 0.88), and MiniLM reads "Went to the gym on Monday." and "...
on Tuesday." as one statement (0.955), "Took 2 aspirin" and "Took 4 aspirin" too (0.97):
both Monday visits were superseded by a replacement that says "Went to the gym on
Tuesday.", and nothing active said Monday any more.

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

DAY1 = datetime(2026, 4, 6, 7, tzinfo=UTC)
NIGHT = DAY1 + timedelta(days=20)
NS = "/users/u-3/journal"  # deletion not enforced: no evaluation set needed to consolidate

EVENTS = [
    ("Went to the gym on Monday.", "Went to the gym on Tuesday."),
    ("Took 2 aspirin for a headache.", "Took 4 aspirin for a headache."),
]


def _seed(home: Path, said: list[tuple[str, int]]) -> None:
    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many([
            MemoryRecord(
                id=f"e-{i}", actor_id="u-3", namespace=NS, memory_type="episodic",
                subject="health", content=text, source=Source.user_stated,
                created_at=DAY1 + timedelta(days=day),
            )
            for i, (text, day) in enumerate(said)
        ])  # fmt: skip
    finally:
        store.close()


def _active(home: Path) -> list[MemoryRecord]:
    store = SqliteStore(home / "memlife.db")
    try:
        return [r for r in store.iter_all() if r.status is Status.active]
    finally:
        store.close()


@pytest.mark.parametrize(("first", "second"), EVENTS)
def test_two_repeated_events_of_one_subject_each_keep_their_own_record(
    offline_home: Path, first: str, second: str
) -> None:
    """Each event said twice: each pair merges into its own replacement, and every event
    is still told by an active record after the night."""
    _seed(offline_home, [(first, 0), (second, 1), (first, 7), (second, 8)])
    summary = run_local(RunConfig(dry_run=False, now=NIGHT))
    assert summary.status == "success"
    active = _active(offline_home)
    assert sorted(r.content for r in active) == sorted([first, second])
    for r in active:  # each replacement supersedes its own event's repeats only
        assert r.id.startswith("r-") and len(r.provenance.supersedes) == 2


@pytest.mark.parametrize(("first", "second"), EVENTS)
def test_control_an_event_said_once_stays_beside_the_merged_repeats(
    offline_home: Path, first: str, second: str
) -> None:
    """Only the second event repeats: it merges, the first (said once) is in no group and
    stays. This passed before the fix: the planner left a single event out of the group."""
    _seed(offline_home, [(first, 0), (second, 1), (second, 8)])
    summary = run_local(RunConfig(dry_run=False, now=NIGHT))
    assert summary.status == "success"
    active = {r.id: r.content for r in _active(offline_home)}
    assert sorted(active.values()) == sorted([first, second]) and "e-0" in active
