"""The nightly scoring reads access recency and frequency from the access ledger."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from memlife.ledger import AccessLedger
from memlife.model import MemoryRecord
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.lifecycle import CUTOFF


def _rows(summary) -> dict[str, dict]:
    return {r["id"]: r for r in map(json.loads, Path(summary.report).read_text().splitlines())}


def test_ledger_accesses_raise_the_score(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path))
    store = SqliteStore(tmp_path / "memlife.db")
    old = MemoryRecord(
        id="e-1",
        actor_id="a",
        namespace="/users/a/episodes",
        memory_type="episodic",
        content="Asked for a refund.",
        owner="t",
        source="agent_inferred",
        created_at=CUTOFF - timedelta(days=300),
    )
    store.put_many([old, old.model_copy(update={"id": "e-2"})])
    store.close()
    before = _rows(run_local(RunConfig(now=CUTOFF, consolidate=False)))
    assert "LOW_SCORE" in before["e-1"]["reasons"]
    ledger = AccessLedger(tmp_path / "ledger")
    for i in range(8):
        ledger.append("a", "/users/a/episodes", "e-1", rank=1, at=CUTOFF - timedelta(hours=i + 1))
    ledger.append(
        "a", "/users/a/episodes", "e-2", at=CUTOFF + timedelta(days=1)
    )  # after the cutoff
    ledger.flush()
    after = _rows(run_local(RunConfig(now=CUTOFF + timedelta(seconds=1), consolidate=False)))
    assert after["e-1"]["score"] > before["e-1"]["score"] + 0.2
    assert "LOW_SCORE" not in after["e-1"]["reasons"]
    assert after["e-2"]["score"] == pytest.approx(
        before["e-2"]["score"], abs=1e-6
    )  # future access ignored
