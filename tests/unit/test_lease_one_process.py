"""Audit 44b (session 44): two nightly flow runs at once on one store, in one process (the Prefect test
harness; the embedded SQLite store). Invariant 9: one lifecycle writer per store at a
time, a second gets a clear refusal."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from memlife.lease import LeaseHeld
from tests.support.lifecycle import CUTOFF, seed


class Paused:
    """The first run's store: its first page read waits until the test lets it go (the
    run holds its lease by then); everything else is the real store's."""

    def __init__(self, inner: Any, inside: threading.Event, go: threading.Event):
        self._inner, self._inside, self._go = inner, inside, go

    def page_views(self, *args: Any, **kwargs: Any) -> Any:
        self._inside.set()
        self._go.wait(120)
        return self._inner.page_views(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _leases(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT run_id, purpose FROM leases").fetchall()


def test_a_second_flow_run_of_the_same_process_is_refused_while_the_first_holds_the_lease(
    offline_home: Path, prefect_harness: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adversary: two apply flow runs of the nightly flow on one store at once in one
    process (an app or a served flow calling ``nightly`` from two threads; the same
    parameters, so the same run id). The first holds the lease and is planning. Must hold:
    the second is refused (LeaseHeld) before it writes anything, and the first keeps its
    lease row until it ends. Today the second re-takes the row (same process owner), runs
    the whole night beside the first, and its release deletes the first's lease: the store
    then has no lease while the first still writes, and any other worker may take it."""
    import memlife.pipeline as pipeline
    from flows.nightly import nightly

    db = offline_home / "memlife.db"
    seed(db, records=60)
    real, opened = pipeline.open_store, []
    inside, go = threading.Event(), threading.Event()

    def open_store(url: str | None) -> Any:
        opened.append(real(url))
        return Paused(opened[-1], inside, go) if len(opened) == 1 else opened[-1]

    monkeypatch.setattr(pipeline, "open_store", open_store)
    config = {"dry_run": False, "now": CUTOFF.isoformat()}
    first: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: first.update(nightly(config)))
    runner.start()
    try:
        assert inside.wait(120), "the first run never reached its planning"
        held = _leases(db)
        assert held and held[0][1] == "nightly"
        with pytest.raises(LeaseHeld):
            nightly(config)
        assert _leases(db) == held  # the first run's lease is still there, still its own
    finally:
        go.set()
        runner.join(120)
    assert first.get("status") == "success"


def test_another_thread_is_refused_and_this_thread_nests(tmp_path: Path) -> None:
    """Two connections to one store in one process: a second thread's take is refused
    (the first's row stays its own after), this thread's nests on the lease it holds and
    gives it back only at the outer release."""
    from memlife.lease import for_store
    from memlife.stores.sqlite import SqliteStore

    db = tmp_path / "m.db"
    one, two, three = SqliteStore(db), SqliteStore(db), SqliteStore(db)
    try:
        outer = for_store(one, "run-1", "nightly")
        refused: list[BaseException] = []

        def other() -> None:
            try:
                for_store(two, "run-2", "nightly").release()
            except LeaseHeld as exc:
                refused.append(exc)

        t = threading.Thread(target=other)
        t.start()
        t.join(60)
        assert len(refused) == 1 and _leases(db) == [("run-1", "nightly")]
        inner = for_store(three, "erase", "manual:erase")  # this thread, another connection
        assert inner is outer
        inner.release()
        assert _leases(db) == [("run-1", "nightly")]
        outer.release()
        assert _leases(db) == []
    finally:
        for s in (one, two, three):
            s.close()
