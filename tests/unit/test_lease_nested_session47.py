"""Session 47 (audit 47m): the name a nested taker gives the store's lease (memlife/lease.py `bind`,
`release`: audit 47a's `_outer`) three levels deep, on the embedded store's SQLite lease
row as `receipts verify latest` reads it (`lease.live_run`)."""

from __future__ import annotations

from pathlib import Path

from memlife import lease
from memlife.journal import open_journal
from memlife.stores.sqlite import SqliteStore


def test_each_level_names_its_own_run_again_as_the_levels_inside_it_end(home: Path) -> None:
    """A manual run (`hold release`) takes the lease and names run-a; inside it an erasure
    takes it and names run-b; inside that a third taker names run-c. As each inner taker
    gives its level back, the lease must name the run still under way one level out (a
    finished run named as the one under way is skipped by `verify latest`), never a run
    two levels out while the middle one still works. (Kills `>` turned `>=` in
    `Lease.release`'s loop over `_outer`: the middle level's name went with the inner one.)"""
    with SqliteStore(home / "memlife.db") as store:
        journal = open_journal(store)

        def named() -> str | None:
            return lease.live_run(journal, store)

        outer = lease.for_store(store, "pending-a", "hold release")
        outer.bind("run-a")
        middle = lease.for_store(store, "pending-b", "erase")
        middle.bind("run-b")
        inner = lease.for_store(store, "pending-c", "erase")
        inner.bind("run-c")
        assert named() == "run-c"
        inner.release()
        assert named() == "run-b"  # the middle level is still under way
        middle.release()
        assert named() == "run-a"
        outer.release()
        assert named() is None
