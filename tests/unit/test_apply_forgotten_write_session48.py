"""Session 48 (audit 48iii): a night killed right after a replacement's write (``after_replacement_write``:
written, its journal still PLANNED); the user puts that replacement out of recall online
(forget: ``pending_delete``; quarantine) before the rerun. The rerun replays the write."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlife import Memory
from memlife.model import Status
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore
from tests.support.lifecycle import snapshot
from tests.unit.test_guards_session38e import night
from tests.unit.test_withdrawn_replacement import killed_after_write


def forget(home: Path, rid: str) -> None:
    with Memory(f"sqlite:///{home / 'memlife.db'}") as memory:
        assert memory.forget([rid], actor="u-1") == [rid]


def quarantine(home: Path, rid: str) -> None:
    with SqliteStore(home / "memlife.db") as store:
        mem = LongTermMemory(store)
        try:
            assert mem.set_status([rid], "quarantined", actor="u-1") == [rid]
        finally:
            mem.close()


@pytest.mark.parametrize("out_of_recall", [forget, quarantine])
def test_a_replacement_put_out_of_recall_after_a_killed_write_stays_out(
    home: Path, out_of_recall
) -> None:  # noqa: ANN001
    """The adversary: the night dies right after writing the replacement (active, in
    recall, its journal not yet APPLIED); the user forgets (or quarantines) it online; the
    same night runs again. What must hold: the record the user put out of recall is not
    active again after the rerun (status.py already lets the sources follow a replacement
    forgotten or quarantined since the plan; the resumed write must not undo that)."""
    cases, rid, sources, _ = killed_after_write(home)
    out_of_recall(home, rid)
    summary = night(cases)
    assert summary.status == "success", summary.lifecycle
    after = snapshot(home / "memlife.db")
    assert after[rid]["status"] != Status.active.value, "put out of recall, yet active again"
