"""Forty-second audit a: a replacement forgotten between a killed night and its rerun.

Session 41 skips the resumed supersedes of a replacement *erased* between a crash and the
rerun (``appliers.base.replacement_removed``). A replacement the user *forgets* online
(``LongTermMemory.forget``: pending_delete, out of recall at once) is still there, not
active: the resumed supersedes fail as REPLACEMENT_MISSING, the sources stay active, and
the next night merges them again into the same replacement id, written over the forgotten
record: it is active again, in recall, its pending deletion gone."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memlife.online.memory import LongTermMemory
from memlife.pipeline import run_local
from memlife.stores.sqlite import SqliteStore
from tests.unit.test_stateful_lifecycle import Lifecycle

pytestmark = pytest.mark.filterwarnings("ignore")


def test_a_replacement_forgotten_between_a_crash_and_its_rerun_stays_forgotten() -> None:
    """A night is killed after its first receipt (a replacement written, its sources' supersedes
    not done); the user forgets that replacement online. The rerun and the next nights run.
    Must hold: the forgotten record never comes back active (recall never serves it again),
    and the nights succeed, as they do for an erased replacement (session 41)."""
    m = Lifecycle()
    try:
        m.seed()
        m.killed_night(point="after_receipt", skip=0, rerun=False)
        repl = next(r for r in m.records() if r.startswith("r-"))
        with SqliteStore(m.db) as store:
            mem = LongTermMemory(store)
            try:
                assert mem.forget([repl], actor=m.known[repl][0]) == [repl]
            finally:
                mem.close()
        statuses, seen = [], []
        for day in range(3):  # the rerun (the same cutoff), then two later nights
            m.now += timedelta(days=1 if day else 0)
            statuses.append(run_local(m.config(dry_run=False)).status)
            seen.append(m.records().get(repl, {}).get("status"))
        assert "active" not in seen, f"the forgotten {repl} is back in recall: {seen}"
        assert statuses == ["success"] * 3, statuses
    finally:
        m.teardown()
