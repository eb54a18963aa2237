"""Audit 44i (session 44): every record a night processes lands in one outcome (memlife/run_finish.py).

A deletion the gate withholds (no evaluation set: judgements in enforced namespaces
wait, GATE_NOT_CONFIGURED) keeps its record: it is retained, as a proposed one is.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from memlife.model import MemoryRecord, MemoryType, Provenance, Status
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore

NOW = datetime(2026, 11, 1, 12, tzinfo=UTC)
OUTCOMES = ("retained", "consolidated", "superseded", "deleted", "quarantined", "reviewed",
            "held", "failed")  # fmt: skip


def test_a_deletion_the_gate_withholds_is_retained(home: Path) -> None:
    """The operator runs an apply night with no evaluation set over an enforced namespace
    holding a record superseded 200 days ago (past its retention: a judgement deletion)
    and its replacement: the deletion waits for a gate (withheld, the record stays), and
    the record must still be counted in an outcome: retained."""
    home.mkdir(parents=True, exist_ok=True)
    then = NOW - timedelta(days=200)
    common = dict(actor_id="u-1", namespace="/users/u-1/facts", memory_type=MemoryType.semantic,
                  created_at=then - timedelta(days=10))  # fmt: skip
    old = MemoryRecord(id="old", content="The user lives in Oslo.", status=Status.superseded,
                       provenance=Provenance(replaced_by="new"), status_changed_at=then,
                       **common)  # fmt: skip
    new = MemoryRecord(id="new", content="The user lives in Bergen.",
                       provenance=Provenance(supersedes=["old"]), **common)  # fmt: skip
    with SqliteStore(home / "memlife.db") as s:
        s.put_many([old, new])
    summary = run_local(RunConfig(dry_run=False, now=NOW, workers=1))
    assert summary.other.get("gate_withheld_deletions") == 1, summary.other
    with SqliteStore(home / "memlife.db") as s:
        assert s.get("old") is not None  # withheld: it stays
    life = summary.lifecycle
    assert life["processed"] == 2 and life["deleted"] == 0, life
    assert life["processed"] == sum(life[k] for k in OUTCOMES), life
