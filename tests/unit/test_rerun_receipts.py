"""Audit 43a (session 43): reruns of a run whose receipt is sealed (session 42's ``completed_status``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from memlife.model import MemoryRecord
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.support.gate import ALLERGY_KEPT, FACTS, store_at, ttl_policy, write_cases
from tests.support.gate import NOW as GATE_NOW
from tests.support.gate import rec as gate_rec
from tests.support.lifecycle import snapshot

NOW = datetime(2026, 11, 1, tzinfo=UTC)
UNSEALED = (
    "a rerun of a partial_failure/blocked run commits, but finish_run writes no receipt after "
    "a completed one: its operations are sealed by none (JOURNAL_OP_NOT_IN_PARQUET)"
)


def rec(rid: str, actor: str, **kw: object) -> MemoryRecord:
    return MemoryRecord.model_validate({
        "id": rid, "actor_id": actor, "namespace": f"/users/{actor}/facts",
        "memory_type": "semantic", "content": f"Fact {rid} about the weekly meeting.",
        "created_at": NOW - timedelta(days=40), "source": "agent_inferred", "confidence": 0.8,
        **kw,
    })  # fmt: skip


def test_a_partial_failures_rerun_leaves_its_run_verifiable(home: Path) -> None:
    """Night 1 is a partial failure: u-2's shard holds a row that does not decode, so u-2's
    expired record is not deleted. The operator repairs the row and reruns the night (same
    cutoff, the same run id): the rerun finishes u-2's shard, as a partial failure's rerun
    should. What it deleted must be sealed by a receipt of the run: `receipts verify` of
    the run passes (invariant 12), as it did after night 1."""
    home.mkdir(parents=True, exist_ok=True)
    gone = NOW - timedelta(days=1)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("a-1", "u-1", expires_at=gone), rec("b-1", "u-2", expires_at=gone),
                        rec("b-2", "u-2")])  # fmt: skip
        store.connection.execute("UPDATE records SET memory_type='bogus' WHERE id='b-2'")
    first = run_local(RunConfig(dry_run=False, now=NOW))
    assert first.status == "partial_failure" and first.failed_shards
    assert invoke("receipts", "verify", first.run_id)[0] == 0
    with SqliteStore(home / "memlife.db") as store:  # the operator repairs the row
        store.connection.execute("UPDATE records SET memory_type='semantic' WHERE id='b-2'")
    again = run_local(RunConfig(dry_run=False, now=NOW))
    assert again.run_id == first.run_id
    assert "b-1" not in snapshot(home / "memlife.db")  # the rerun finished u-2's shard
    code, out, err = invoke("receipts", "verify", first.run_id)
    assert code == 0, out + err


def test_a_blocked_nights_rerun_changes_nothing_its_receipt_does_not_seal(
    home: Path, tmp_path: Path
) -> None:
    """Night 1's gate blocks u-1's deletions (a high-impact case fails): status ``blocked``.
    The adversary then writes another tenant's record already past its ``expires_at``
    and reruns the night (same cutoff, policy and cases: the same run id). Whatever the
    rerun does must be sealed by a receipt of the run: `receipts verify` passes."""
    store = store_at(home)
    store.put_many(FACTS)
    store.close()
    cases = write_cases(tmp_path / "cases.yaml", [ALLERGY_KEPT])
    night = RunConfig(dry_run=False, now=GATE_NOW, policy=ttl_policy(tmp_path, 30),
                      eval_cases=cases, consolidate=False)  # fmt: skip
    first = run_local(night)
    assert first.status == "blocked"
    assert invoke("receipts", "verify", first.run_id)[0] == 0
    with store_at(home) as s:
        s.put_many([gate_rec("o-late", "facts", "Has a dentist visit on Tuesday.", actor="u-2",
                             age=10, expires=GATE_NOW - timedelta(days=1))])  # fmt: skip
    again = run_local(night)
    assert again.run_id == first.run_id
    code, out, err = invoke("receipts", "verify", first.run_id)
    assert code == 0, out + err
