"""CloudTrail accesses name AgentCore's memoryRecordId; the nightly scoring credits our ids."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from memlife.ledger import AccessLedger
from memlife.model import MemoryRecord
from memlife.pipeline import RunConfig, run_local
from tests.fakes.agentcore import agentcore_store
from tests.support.lifecycle import CUTOFF


def test_native_id_accesses_raise_the_score(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path))
    ns = "/users/a/episodes"
    base = MemoryRecord(
        id="e-1",
        actor_id="a",
        namespace=ns,
        memory_type="episodic",
        owner="t",
        content="Asked for a refund.",
        source="agent_inferred",
        created_at=CUTOFF - timedelta(days=300),
    )
    with agentcore_store() as (store, _fake):
        store.put_many([base, base.model_copy(update={"id": "e-2"})])
        store.page("a", ns)  # learn where each record lives
        native = store.native_ids(["e-1", "e-2"])
        assert set(native) == {"e-1", "e-2"} and native["e-1"] != "e-1"
        ledger = AccessLedger(tmp_path / "ledger")
        for i in range(8):  # as CloudTrail ingest records them: by memoryRecordId
            ledger.append("a", ns, native["e-1"], at=CUTOFF - timedelta(hours=i + 1))
        ledger.flush()
        summary = run_local(RunConfig(now=CUTOFF, consolidate=False, store=store.url, workers=1))
    rows = {r["id"]: r for r in map(json.loads, Path(summary.report).read_text().splitlines())}
    assert rows["e-1"]["score"] > rows["e-2"]["score"] + 0.2
    assert "LOW_SCORE" in rows["e-2"]["reasons"] and "LOW_SCORE" not in rows["e-1"]["reasons"]


def test_the_pin_check_reads_no_record_planning_already_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of session 19: the check for replacements a held source pins read every
    planned delete again, one GetMemoryRecord each, every night and in dry runs. Records
    listed by planning carry their links; the held source's replacement is still held."""
    from memlife.model import Provenance, RetentionClass, Status

    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path))
    ns = "/users/a/facts"
    old = CUTOFF - timedelta(days=300)
    base = dict(actor_id="a", namespace=ns, memory_type="semantic", owner="t", created_at=old)
    records = [
        MemoryRecord(id="A", content="Prefers tea.", status=Status.superseded,
                     retention_class=RetentionClass.legal_hold,
                     provenance=Provenance(replaced_by="R"), **base),
        MemoryRecord(id="R", content="Prefers tea!", expires_at=CUTOFF - timedelta(days=1),
                     provenance=Provenance(supersedes=["A"]), **base),
    ] + [
        MemoryRecord(id=f"x-{i}", content=f"Fact {i}.", expires_at=CUTOFF - timedelta(days=1),
                     **base)
        for i in range(20)
    ]  # fmt: skip
    with agentcore_store() as (store, fake):
        store.put_many(records)
        fake.requests.clear()
        summary = run_local(RunConfig(dry_run=True, now=CUTOFF, consolidate=False,
                                      store=store.url, workers=1))  # fmt: skip
        # the listing lacks expiresAt, so the store gets each record once; nothing more
        assert len(fake.ops("GetMemoryRecord")) <= len(records)
    rows = {r["id"]: r for r in map(json.loads, Path(summary.report).read_text().splitlines())}
    assert rows["R"]["action"] == "hold" and "HELD_SOURCE" in rows["R"]["reasons"]
    assert rows["x-0"]["action"] == "delete_expired"
