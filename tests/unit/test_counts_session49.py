"""Audit 49vii (session 49): the figures an operator reads after a night (the CLI's table and
`--json`, the sealed receipt, the metrics) against the store, the journal and a clean night.

The outcome identity (README, audit 47q): every processed record is in exactly one outcome
(retained, superseded, deleted, quarantined, reviewed, held, failed); `consolidated` counts
the replacements written, no processed record. `planned` (records per planned action) sums
to `records_found`, as the CLI's table prints it under "total". Real SQLite stores, the local
engine, the real CLI through its typer runner; a store's partial write failure is simulated
at the store boundary, as AgentCore reports it (``BatchResult.failed``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife import faults
from memlife.model import MemoryRecord, MemoryType, RetentionClass
from memlife.pipeline import RunConfig, run_local
from memlife.stores.base import BatchResult, ItemFailure
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke

NOW = datetime(2026, 6, 1, tzinfo=UTC)
OUTCOMES = ("retained", "superseded", "deleted", "quarantined", "reviewed", "held", "failed")


def rec(rid: str, actor: str, text: str, *, age: int = 30, **kw: Any) -> MemoryRecord:
    return MemoryRecord(id=rid, actor_id=actor, namespace=kw.pop("ns", f"/users/{actor}/facts"),
                        content=text, owner=kw.pop("owner", "team-a"),
                        memory_type=kw.pop("memory_type", MemoryType.semantic),
                        created_at=NOW - timedelta(days=age), **kw)  # fmt: skip


def seed(home: Path) -> None:
    """Two tenants, each: an expired record, an expired one under a hold, a duplicate pair
    on a subject a person gave, a record to keep, a procedure with no owner (review)."""
    home.mkdir(parents=True, exist_ok=True)
    records = []
    for a in ("u-1", "u-2"):
        records += [
            rec(f"{a}-exp", a, "Went hiking on the ridge.", expires_at=NOW - timedelta(days=1)),
            rec(f"{a}-held", a, "Signed the contract.", expires_at=NOW - timedelta(days=1),
                retention_class=RetentionClass.legal_hold),
            rec(f"{a}-d1", a, "The user lives in Oslo.", age=40, subject="city"),
            rec(f"{a}-d2", a, "The user lives in Oslo!", age=20, subject="city"),
            rec(f"{a}-keep", a, "Likes jazz.", age=5),
            rec(f"{a}-proc", a, "Reset the router first.", age=400, owner=None,
                ns=f"/users/{a}/procedures", memory_type=MemoryType.procedural),
        ]  # fmt: skip
    with SqliteStore(home / "memlife.db") as store:
        store.put_many(records)


def cases(home: Path, tmp_path: Path) -> str:
    """The starter evaluation set (`memlife eval init`): the gate lets the merges through."""
    path = tmp_path / "cases.yaml"
    code, out, err = invoke("eval", "init", "-o", str(path), "--now", NOW.isoformat())
    assert code == 0, out + err
    return str(path)


def statuses(home: Path) -> dict[str, str]:
    with SqliteStore(home / "memlife.db") as store:
        return {r.id: str(r.status) for r in store.iter_all()}


def lands(life: dict[str, int]) -> None:
    assert life["processed"] == sum(life[k] for k in OUTCOMES), life


def night(*extra: str) -> tuple[int, dict[str, Any]]:
    code, out, err = invoke("run", "--engine", "local", "--now", NOW.isoformat(), "--json", *extra)
    assert code in (0, 3, 5), out + err
    return code, json.loads(out)


def clean_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """What one uninterrupted night plans over the same store (another home)."""
    other = tmp_path / "clean"
    with monkeypatch.context() as env:
        env.setenv("MEMLIFE_HOME", str(other / "home"))
        env.setenv("MEMLIFE_STORE", f"sqlite:///{other / 'home' / 'memlife.db'}")
        env.setenv("MEMLIFE_RECEIPTS", f"file://{other / 'home' / 'receipts'}")
        seed(other / "home")
        summary = run_local(RunConfig(dry_run=False, now=NOW, workers=1,
                                      eval_cases=cases(other / "home", other)))  # fmt: skip
    return dict(summary.counts)


# -- the plan of a rerun -------------------------------------------------------------------


@pytest.mark.parametrize("point", ["after_supersede", "after_commit_groups"])
def test_a_rerun_after_a_crash_mid_merge_plans_what_the_clean_night_plans(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    """The night is killed after it superseded duplicates (`after_supersede`: one group
    done; `after_commit_groups`: every group done) and run again at the same cutoff. Must
    hold: the rerun's sealed receipt plans what one clean night plans (consolidate_candidate
    4), and `planned` sums to `records_found`. The originals the killed attempt superseded
    were taken out of the plan and put back nowhere: consolidate_candidate 2 (or 0), the
    planned actions summing to 10 (or 8) of 12 (audit 48i mended only removed records)."""
    clean = clean_plan(tmp_path, monkeypatch)
    seed(home)
    evalset = cases(home, tmp_path)
    with faults.inject(point), pytest.raises(faults.InjectedFault):
        run_local(RunConfig(dry_run=False, now=NOW, workers=1, eval_cases=evalset))
    summary = run_local(RunConfig(dry_run=False, now=NOW, workers=1, eval_cases=evalset))
    receipt = json.loads(Path(str(summary.receipt)).read_text())
    assert receipt["records_found"] == 12 and receipt["counts"]["superseded"] == 4
    assert sum(receipt["planned"].values()) == receipt["records_found"]
    assert receipt["planned"] == clean == summary.counts


def test_a_rerun_of_a_completed_night_prints_the_plan_its_receipt_holds(
    home: Path, tmp_path: Path
) -> None:
    """The scheduler fires the night twice (one cutoff): the second run commits nothing and
    names the first run's receipt; audit 47q made its outcomes that receipt's. Must hold:
    its planned actions (the CLI table's left column, `counts` in --json) are the receipt's
    `planned` too, and sum to the "total" printed under them. It printed the plan of the
    store the first run left (the merged originals re-planned and taken out):
    consolidate_candidate 0, rows summing to 8 under a total of 12."""
    seed(home)
    evalset = cases(home, tmp_path)
    _, first = night("--eval-cases", evalset)
    _, again = night("--eval-cases", evalset)
    assert again["other_counts"]["rerun_of_completed_run"] == 1
    assert again["receipt"] == first["receipt"]
    receipt = json.loads(Path(again["receipt"]).read_text())
    assert again["lifecycle"] == receipt["counts"]  # audit 47q's fix: the outcomes agree
    assert again["records"] == receipt["records_found"] == 12
    assert again["counts"] == receipt["planned"] == first["counts"]
    assert sum(again["counts"].values()) == again["records"]


def test_control_a_clean_night_plans_and_lands_every_record(home: Path, tmp_path: Path) -> None:
    """Control: one uninterrupted night. The summary, the receipt and the store agree: the
    plan sums to the records found, every record is in one outcome, 4 originals superseded
    by 2 replacements, the two unheld expired records deleted, the held ones kept."""
    seed(home)
    code, result = night("--eval-cases", cases(home, tmp_path))
    receipt = json.loads(Path(result["receipt"]).read_text())
    assert code == 0 and result["status"] == "success"
    assert result["lifecycle"] == receipt["counts"] and result["counts"] == receipt["planned"]
    assert sum(result["counts"].values()) == result["records"] == 12
    lands(result["lifecycle"])
    after = statuses(home)
    assert sum(s == "superseded" for s in after.values()) == result["lifecycle"]["superseded"] == 4
    assert "u-1-exp" not in after and "u-2-exp" not in after and after["u-1-held"] == "active"


# -- a failed replacement write --------------------------------------------------------------


class FailingReplacementWrite(SqliteStore):
    """The store refuses u-1's replacement write (AgentCore reports a partial failure as
    data: THROTTLED is retryable, VALIDATION is not); u-2's goes through."""

    code = "THROTTLED"
    retryable = True

    def put_replacement(self, record: MemoryRecord) -> BatchResult:
        if record.actor_id == "u-1":
            return BatchResult(failed=[ItemFailure(record.id, self.code, retryable=self.retryable)])
        return super().put_replacement(record)


@pytest.mark.parametrize("retryable", [True, False], ids=["retryable", "terminal"])
def test_a_failed_replacement_write_counts_each_member_once(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, retryable: bool
) -> None:
    """u-1's merge of its two duplicates fails at the replacement's write; u-2's goes
    through. Must hold: each of u-1's two members is counted once, as failed (both stay
    active, their change not made), so the outcomes sum to the 12 records processed, in the
    summary and in the sealed receipt, and `receipts verify` agrees with the receipt. The
    replacement that was never written is no processed record, yet `failed` counted it: a
    terminal failure said failed 3 (the write and both members: the outcomes summed to 13),
    a retryable one failed 1 (the write: both members, their supersedes left waiting, were
    in no outcome, 11 of 12)."""
    seed(home)
    evalset = cases(home, tmp_path)
    monkeypatch.setattr(FailingReplacementWrite, "code", "THROTTLED" if retryable else "VALIDATION")
    monkeypatch.setattr(FailingReplacementWrite, "retryable", retryable)
    monkeypatch.setattr("memlife.pipeline.open_store",
                        lambda url=None: FailingReplacementWrite(home / "memlife.db"))  # fmt: skip
    summary = run_local(RunConfig(dry_run=False, now=NOW, workers=1, eval_cases=evalset))
    after = statuses(home)
    assert after["u-1-d1"] == after["u-1-d2"] == "active"  # the members stay as they were
    assert summary.status == "partial_failure"
    receipt = json.loads(Path(str(summary.receipt)).read_text())
    assert receipt["counts"] == summary.lifecycle
    assert summary.lifecycle["failed"] == 2 and summary.lifecycle["consolidated"] == 1
    lands(summary.lifecycle)
    code, out, err = invoke("receipts", "verify", summary.run_id, "--json")
    assert code == 0, out + err


def test_control_a_member_refused_at_its_supersede_is_one_failed_record(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control: the replacement is written but one member's supersede is refused (the
    record changed since it was read: CHANGED, retryable). One record failed, one
    superseded, one replacement written: the outcomes sum to the records processed, and
    `receipts verify` agrees (this already held)."""
    from memlife.apply.appliers import supersede

    seed(home)
    evalset = cases(home, tmp_path)
    real = supersede.Supersede.apply

    def refuse_one(self: Any, ex: Any, ops: list[Any], tally: Any) -> dict[str, Any]:
        out = real(self, ex, [o for o in ops if o.record_id != "u-1-d1"], tally)
        out.update({o.operation_id: ItemFailure(o.record_id, "CHANGED", retryable=True)
                    for o in ops if o.record_id == "u-1-d1"})  # fmt: skip
        return out

    monkeypatch.setattr(supersede.Supersede, "apply", refuse_one)
    summary = run_local(RunConfig(dry_run=False, now=NOW, workers=1, eval_cases=evalset))
    assert summary.status == "partial_failure"
    assert summary.lifecycle["failed"] == 1 and summary.lifecycle["superseded"] == 3
    lands(summary.lifecycle)
    code, out, err = invoke("receipts", "verify", summary.run_id, "--json")
    assert code == 0, out + err
