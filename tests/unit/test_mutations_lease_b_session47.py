"""Session 47 (audit 47n): mutations of session 47's nested-bind undo in memlife/lease.py (``_outer``,
the loop in ``release``) that no test killed. A real SQLite journal is the lease backend;
nested takes are this thread's, as a hold release erasing under its own lease takes it."""

from __future__ import annotations

from pathlib import Path

from memlife import lease
from memlife.journal import SqliteJournal


def _named(j: SqliteJournal, held: lease.Lease) -> tuple[str, str]:
    """What the lease object and its row name as the run under way."""
    (row,) = j.connection.execute("SELECT run_id FROM leases").fetchall()
    return held.run_id, row[0]


def test_each_nested_level_gives_the_lease_back_to_the_name_it_found(tmp_path: Path) -> None:
    """Three nested takers each bind their run; the middle one binds twice (a run id
    renamed once known). Must hold: as each gives its level back, the lease (object and
    row) names the taker below it again: run-b after the innermost, run-o after the middle,
    so `receipts verify latest` never takes a sealed run for one under way."""
    j = SqliteJournal.at(tmp_path / "journal.db")
    outer = lease.acquire(j, "run-o", "lifecycle")
    try:
        assert lease.acquire(j, "x", "hold") is outer and outer.depth == 2
        outer.bind("run-a")
        outer.bind("run-b")  # the same level binds again: still its own name
        assert lease.acquire(j, "y", "erase") is outer and outer.depth == 3
        outer.bind("run-c")
        assert _named(j, outer) == ("run-c", "run-c")
        outer.release()
        assert _named(j, outer) == ("run-b", "run-b")
        outer.release()
        assert _named(j, outer) == ("run-o", "run-o")
    finally:
        outer.release()
