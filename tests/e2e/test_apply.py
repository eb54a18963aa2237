"""Apply runs: crash safety at every step boundary, idempotent reruns, invariants 1-5 and 8."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from memlife import faults
from memlife.faults import InjectedFault
from memlife.journal import OpKind, OpState, open_journal
from memlife.model import Status
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support import run_secret
from tests.support.lifecycle import (
    CUTOFF,
    check_invariants,
    gate_cases,
    journaled_deletes,
    operation_receipts,
    replacements_per_subject,
    seed,
    snapshot,
)


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    home = tmp_path / "home"
    monkeypatch.setenv("MEMLIFE_HOME", str(home))
    db = home / "memlife.db"
    receipts = home / "receipts"
    seed(db)
    run_secret.give(db)  # the clean run's: replacement ids compare too (audit 50c2)
    return {
        "db": db,
        "receipts": receipts,
        "store": f"sqlite:///{db}",
        "sink": f"file://{receipts}",
        "home": home,
        "cases": gate_cases(db),
    }


def done_ops(receipts: Path) -> Counter[tuple]:
    """What the receipts say was done. Operation ids hold the run key, which names the
    store by its path (two stores never share a run), so runs on two copies compare by
    action, record, replacement and outcome. A multiset: work done twice after a crash
    (two receipts for one change) must not compare equal to work done once."""
    return Counter(
        (o["action"], o["record_id"], o["replacement_id"], o["outcome"])
        for o in operation_receipts(receipts).values()
    )


def apply(env: dict, **kw) -> object:
    kw.setdefault("eval_cases", env["cases"])  # the gate is required where deletion is enforced
    kw.setdefault("now", CUTOFF)
    cfg = RunConfig(dry_run=False, store=env["store"], receipts=env["sink"], **kw)
    return run_local(cfg)


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The reference: one uninterrupted apply run on the same seed."""
    base = tmp_path_factory.mktemp("clean")
    os.environ["MEMLIFE_HOME"] = str(base)
    try:
        db = base / "memlife.db"
        before = seed(db)
        run_secret.give(db)
        summary = run_local(
            RunConfig(
                dry_run=False,
                now=CUTOFF,
                store=f"sqlite:///{db}",
                receipts=f"file://{base / 'receipts'}",
                eval_cases=gate_cases(db),
            )
        )
    finally:
        del os.environ["MEMLIFE_HOME"]
    return {
        "after": snapshot(db),
        "ops": done_ops(base / "receipts"),
        "summary": summary,
        "before": before,
    }


def test_clean_run_changes_the_store_and_keeps_invariants(env: dict, clean_run: dict) -> None:
    before = snapshot(env["db"])
    summary = apply(env)
    after = snapshot(env["db"])
    assert summary.status == "success"
    assert summary.gate is not None and summary.gate["status"] == "pass"
    assert summary.gate["proposed_supersedes"] > 0 and summary.gate["proposed_deletions"] > 0
    life = summary.lifecycle
    assert life["deleted"] > 0 and life["superseded"] > 0 and life["consolidated"] > 0
    assert life["held"] > 0
    check_invariants(before, after, env["receipts"])
    assert max(replacements_per_subject(after).values()) == 1
    # deterministic: same seed and cutoff give the same store and the same operations
    assert after == clean_run["after"]
    assert done_ops(env["receipts"]) == clean_run["ops"]


def test_second_run_changes_nothing(env: dict) -> None:
    apply(env)
    state = snapshot(env["db"])
    receipts_before = set(operation_receipts(env["receipts"]))

    again = run_local(
        RunConfig(
            dry_run=False,
            now=CUTOFF + timedelta(hours=1),
            store=env["store"],
            receipts=env["sink"],
            eval_cases=env["cases"],
        )
    )
    assert again.lifecycle["consolidated"] == 0 and again.lifecycle["superseded"] == 0
    assert again.lifecycle["deleted"] == 0
    assert snapshot(env["db"]) == state
    assert set(operation_receipts(env["receipts"])) == receipts_before


def test_a_rerun_of_a_completed_run_adds_no_evidence(env: dict) -> None:
    """The same night run again (same cutoff: the same run) after it completed: its receipt
    already seals every operation, so nothing is sealed again. It used to write another
    operations.N.parquet that no receipt named, and read every operation receipt back."""
    first = apply(env)
    files = {p: p.read_bytes() for p in env["receipts"].rglob("*") if p.is_file()}
    assert any(p.name == "operations.parquet" for p in files)
    queue = review_items(env["db"])
    assert first.other["review_opened"] > 0
    again = apply(env)
    after = {p: p.read_bytes() for p in env["receipts"].rglob("*") if p.is_file()}
    assert after == files  # nothing added, nothing changed
    assert again.receipt == first.receipt and again.status == first.status == "success"
    # the rerun opens no review item about the run's own replacements, which the first
    # attempt never saw (the next night plans them): the queue is as the first attempt left it
    assert again.other.get("review_opened", 0) == 0
    assert review_items(env["db"]) == queue
    # deferred, not dropped: the next night plans the replacements and opens those items
    store = SqliteStore(env["db"])
    try:
        written = {o.record_id for o in open_journal(store).by_run(first.run_id)
                   if o.kind is OpKind.write_replacement}  # fmt: skip
    finally:
        store.close()
    next_night = apply(env, now=CUTOFF + timedelta(days=1))
    assert next_night.run_id != first.run_id and next_night.other["review_opened"] > 0
    assert {i.record_id for i in review_items(env["db"])} - {i.record_id for i in queue} <= written
    assert {i.record_id for i in review_items(env["db"])} & written


def review_items(db: Path) -> list:
    from memlife.review_queue import ReviewQueue

    store = SqliteStore(db)
    try:
        return ReviewQueue.for_store(store).list()
    finally:
        store.close()


def test_a_tampered_completed_receipt_is_not_rewritten_by_a_rerun(env: dict) -> None:
    """An adversary edits the completed receipt's sealed operation count: the rerun no
    longer takes it as covering its operations and seals again, but never writes over or
    beside a completed receipt; the edit stays for verify to find (the digest)."""
    first = apply(env)
    path = Path(first.receipt.removeprefix("file://"))
    doc = json.loads(path.read_text())
    doc["evidence"]["operations"]["count"] += 1
    path.write_text(json.dumps(doc))
    tampered = path.read_bytes()
    again = apply(env)
    assert again.receipt == first.receipt and path.read_bytes() == tampered
    assert sorted(p.name for p in path.parent.glob("receipt*.json")) == ["receipt.json"]


RUN_STAGES = ("after_stage", "after_gate", "after_commit_groups")  # once per run: no skip
BOUNDARIES = [
    (p, s)
    for p in faults.POINTS
    if p not in faults.IMPORT_POINTS  # the importer's crash tests: test_parallel_import
    for s in (0, 3)
    if p not in RUN_STAGES or s == 0
]


@pytest.mark.parametrize("point,skip", BOUNDARIES)
def test_crash_at_every_step_boundary_then_rerun(
    env: dict, clean_run: dict, point: str, skip: int
) -> None:
    before = snapshot(env["db"])
    with faults.inject(point, skip=skip), pytest.raises(InjectedFault):
        apply(env)
    mid = snapshot(env["db"])
    if point in ("after_stage", "after_gate"):  # staged and evaluated, nothing written
        assert mid == before
    # invariants hold even mid-crash; a vanished record must at least be journaled
    check_invariants(before, mid, env["receipts"], in_flight=journaled_deletes(env["db"]))
    summary = apply(env)  # the same run again: same policy, cutoff and scope
    after = snapshot(env["db"])
    check_invariants(before, after, env["receipts"])
    assert after == clean_run["after"], "crash + rerun must converge to the clean result"
    assert done_ops(env["receipts"]) == clean_run["ops"]
    assert max(replacements_per_subject(after).values()) == 1
    assert summary.lifecycle["failed"] == 0, "a crash is not an operation failure"
    # the rerun's counts are the clean run's: what the killed attempt did is counted once,
    # not re-planned (adversarial review: processed 2275 for a 2,000-record night)
    if summary.receipt is not None:
        assert summary.lifecycle == clean_run["summary"].lifecycle
        life = summary.lifecycle
        outcomes = ("retained", "held", "reviewed", "deleted", "superseded")
        assert life["processed"] == sum(life[k] for k in outcomes)
    # the receipt counts everything the run did, the killed attempt's changes included
    receipt = json.loads(Path(summary.receipt).read_text())
    changes = ("consolidated", "superseded", "deleted", "quarantined", "failed")
    assert {k: receipt["counts"][k] for k in changes} == {
        k: clean_run["summary"].lifecycle[k] for k in changes
    }
    from memlife.apply.counts import journal_counts, lifecycle_from_journal

    ops = open_journal(SqliteStore(env["db"])).by_run(summary.run_id)
    assert lifecycle_from_journal(journal_counts(ops)) == {k: receipt["counts"][k] for k in changes}
    journal = open_journal(SqliteStore(env["db"]))
    assert all(o.state is OpState.RECEIPTED for o in journal.due(CUTOFF)) is True
    assert journal.due(CUTOFF) == []


def test_sigkill_mid_run_then_rerun(env: dict, clean_run: dict) -> None:
    before = snapshot(env["db"])
    cmd = [
        sys.executable,
        "-m",
        "memlife.cli",
        "run",
        "--engine",
        "local",
        "--now",
        CUTOFF.isoformat(),
        "--store",
        env["store"],
        "--receipts",
        env["sink"],
        "--eval-cases",
        env["cases"],
        "--json",
    ]
    lease = {**os.environ, "MEMLIFE_LEASE_TTL_SECONDS": "3"}  # the killed run's lease expires
    proc = subprocess.run(
        cmd,
        env={**lease, "MEMLIFE_FAULT": "after_delete:2", "MEMLIFE_FAULT_MODE": "kill"},
        capture_output=True,
        timeout=300,
        cwd=Path(__file__).parents[2],
    )
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    check_invariants(
        before, snapshot(env["db"]), env["receipts"], in_flight=journaled_deletes(env["db"])
    )
    time.sleep(3.5)  # a killed holder stops beating; once its lease expires the rerun takes it over
    proc = subprocess.run(
        cmd, env=lease, capture_output=True, timeout=300, cwd=Path(__file__).parents[2]
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    result = json.loads(proc.stdout)
    assert result["status"] == "success"
    after = snapshot(env["db"])
    check_invariants(before, after, env["receipts"])
    assert after == clean_run["after"]
    assert done_ops(env["receipts"]) == clean_run["ops"]


def test_dry_run_changes_nothing(env: dict) -> None:
    before = snapshot(env["db"])
    run_local(RunConfig(dry_run=True, now=CUTOFF, store=env["store"], receipts=env["sink"]))
    assert snapshot(env["db"]) == before
    assert operation_receipts(env["receipts"]) == {}


def test_rollout_policy_proposes_deletions_outside_enforced_namespaces(env: dict) -> None:
    summary = apply(env, policy="policies/rollout-example.yaml")
    after = snapshot(env["db"])
    receipt = json.loads(Path(summary.receipt).read_text())
    not_enforced = {i["id"] for i in receipt["ids_not_deleted"] if i["reason"] == "NOT_ENFORCED"}
    assert not_enforced, "the rollout example must leave some proposed deletions"
    assert not_enforced <= set(after), "a deletion outside the enforced namespaces happened"
    deleted = {
        o["record_id"]
        for o in operation_receipts(env["receipts"]).values()
        if o["action"] == "delete"
    }
    assert deleted and all(
        "/episodes" in snapshot_ns
        for snapshot_ns in (
            o["scope"]["namespace"]
            for o in operation_receipts(env["receipts"]).values()
            if o["action"] == "delete"
        )
    )


def test_superseded_records_point_to_newer_statement_content(env: dict) -> None:
    before = snapshot(env["db"])
    apply(env)
    after = snapshot(env["db"])
    superseded = [r for r in after.values() if r["status"] == Status.superseded.value]
    assert superseded
    for rec in superseded:
        repl = after[rec["provenance"]["replaced_by"]]
        assert rec["id"] in repl["provenance"]["supersedes"]
        # the extractive consolidator never writes new text: the replacement is a source verbatim
        sources = {before[i]["content"] for i in repl["provenance"]["supersedes"]}
        assert repl["content"] in sources


def test_a_run_that_consolidates_is_not_a_rerun_of_one_that_did_not(env: dict) -> None:
    """Adversarial review: the run key left out `--no-consolidate`, so a run with it and then
    one without (same cutoff) shared a run id: the second consolidated, and its receipt was
    never written (the first run's stood: consolidated 0), and `receipts verify` failed.
    The consolidator is part of the key: two runs, each sealed with what it did."""
    from memlife.audit import open_sink
    from memlife.review import verify_run

    plain = apply(env, consolidate=False)
    full = apply(env)
    assert plain.run_id != full.run_id
    assert full.lifecycle["superseded"] > 0
    sink = open_sink(env["sink"])
    receipt = json.loads(Path(full.receipt).read_text())
    assert receipt["run_id"] == full.run_id and receipt["counts"] == full.lifecycle
    manifest = json.loads(Path(full.manifest).read_text())
    assert manifest["consolidator"] == "extractive"
    assert json.loads(Path(plain.manifest).read_text())["consolidator"] == "none"
    store = SqliteStore(env["db"])
    try:
        for run in (plain, full):
            v = verify_run(sink, store, open_journal(store), run.run_id)
            assert v.ok, v.problems
    finally:
        store.close()


def test_a_killed_night_that_is_never_rerun_is_sealed_by_the_next(env: dict) -> None:
    """Adversarial review: a night killed after its changes and not rerun with the same
    settings (the schedule's next night has another cutoff) was never sealed: no receipt,
    no Parquet, `receipts list` said incomplete for good and `verify` failed on every one of
    its operations. The next apply run, under the store's lease, seals it as it stands: a
    failure receipt (ABANDONED) with its operations and counts, which `verify` accepts.
    Another store's run in the same bucket is left alone; nothing is sealed twice."""
    from memlife.audit import dumps, open_sink
    from memlife.review import latest_receipt, verify_run

    cmd = [sys.executable, "-m", "memlife.cli", "run", "--engine", "local", "--now",
           CUTOFF.isoformat(), "--store", env["store"], "--receipts", env["sink"],
           "--eval-cases", env["cases"], "--json"]  # fmt: skip
    lease = {**os.environ, "MEMLIFE_LEASE_TTL_SECONDS": "3"}
    proc = subprocess.run(
        cmd, env={**lease, "MEMLIFE_FAULT": "after_commit_groups", "MEMLIFE_FAULT_MODE": "kill"},
        capture_output=True, timeout=300, cwd=Path(__file__).parents[2],
    )  # fmt: skip
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    sink = open_sink(env["sink"])
    (killed,) = [k.rsplit("/", 1)[0] for k in sink.list("runs/") if k.endswith("manifest.json")]
    assert latest_receipt(sink, killed) is None
    other = f"runs/{CUTOFF:%Y/%m/%d}/elsewhere-run"  # another store's run, still going
    sink.put_new(f"{other}/manifest.json", dumps({"run_id": "elsewhere-run", "mode": "apply",
                                                  "store": "sqlite:////other/store.db"}))  # fmt: skip
    time.sleep(3.5)  # the killed run's lease expires
    night2 = run_local(RunConfig(dry_run=False, now=CUTOFF + timedelta(days=1),
                                 store=env["store"], receipts=env["sink"],
                                 eval_cases=env["cases"]))  # fmt: skip
    assert night2.other["abandoned_runs_sealed"] == 1
    receipt = latest_receipt(sink, killed)
    assert receipt is not None
    assert (receipt["status"], receipt["error"], receipt["sealed_by"]) == (
        "failure", "ABANDONED", night2.run_id,
    )  # fmt: skip
    assert receipt["counts"]["superseded"] > 0 and receipt["counts"]["consolidated"] > 0
    assert latest_receipt(sink, other) is None
    store = SqliteStore(env["db"])
    try:
        v = verify_run(sink, store, open_journal(store), killed.rsplit("/", 1)[1])
        assert v.ok, v.problems
    finally:
        store.close()
    night3 = run_local(RunConfig(dry_run=False, now=CUTOFF + timedelta(days=2),
                                 store=env["store"], receipts=env["sink"],
                                 eval_cases=env["cases"]))  # fmt: skip
    assert "abandoned_runs_sealed" not in night3.other


def test_the_nightly_run_folds_the_local_ledgers_closed_days(env: dict) -> None:
    """The local access ledger (no MEMLIFE_STATE) is compacted by the nightly apply run, as
    the S3 one is: the days before the cutoff's, each into one part; a dry run folds none."""
    from memlife.ledger import AccessLedger

    led = AccessLedger(env["home"] / "ledger")
    for minute in range(5):
        led.append("u-1", "/users/u-1/facts", "m-1", at=CUTOFF - timedelta(days=2, minutes=minute))
        led.flush()
    dry = run_local(RunConfig(dry_run=True, now=CUTOFF, store=env["store"], receipts=env["sink"]))
    assert "ledger_parts_compacted" not in dry.other and len(led.files()) == 5
    summary = apply(env)
    assert summary.other["ledger_parts_compacted"] == 5 and len(led.files()) == 1


def test_abandoned_runs_are_matched_by_store_identity_not_url_spelling(
    env: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of the sealing: the manifest's store URL was compared as text, so a dead run
    of this store spelled `sqlite:///rel.db` was never sealed by a run spelling the absolute
    path, and two stores sharing a relative URL matched. Manifests name the store's
    identity; one from before (the URL only) is sealed only with operations in this
    store's journal."""
    from memlife.audit import dumps, open_sink
    from memlife.review import latest_receipt
    from memlife.run_abandoned import seal_abandoned
    from memlife.stores import store_identity

    monkeypatch.chdir(env["db"].parent)
    relative = "sqlite:///memlife.db"
    assert store_identity(relative) == store_identity(env["store"])
    sink = open_sink(env["sink"])
    day = f"runs/{CUTOFF:%Y/%m/%d}"
    manifests = {
        "mine": {
            "mode": "apply",
            "store": env["store"],
            "store_identity": store_identity(relative),
        },
        "theirs": {"mode": "apply", "store": relative, "store_identity": "sqlite:/elsewhere.db"},
        "legacy": {"mode": "apply", "store": relative},  # no identity, no operations here
    }
    for run_id, m in manifests.items():
        sink.put_new(f"{day}/{run_id}/manifest.json", dumps({"run_id": run_id, **m}))
    store = SqliteStore(env["db"])
    try:
        sealed = seal_abandoned(sink, open_journal(store), store_url=relative, run_id="now",
                                cutoff=CUTOFF)  # fmt: skip
    finally:
        store.close()
    assert sealed == ["mine"]
    assert latest_receipt(sink, f"{day}/theirs") is None
    assert latest_receipt(sink, f"{day}/legacy") is None


def test_a_failure_receipt_is_sealed_with_what_the_run_did(env: dict) -> None:
    """Adversarial review (Prefect): a run that failed after changes wrote a failure receipt
    with no operations and no seal; a scheduled run's next attempt has another cutoff, so
    no rerun ever completed it, and `verify` failed on each of its operations for good.
    The failure receipt is sealed with the journal's operations and counts."""
    from memlife.audit import open_sink
    from memlife.review import latest_receipt, verify_run

    with faults.inject("after_delete", skip=2), pytest.raises(InjectedFault):
        apply(env)
    sink = open_sink(env["sink"])
    (prefix,) = [k.rsplit("/", 1)[0] for k in sink.list("runs/") if k.endswith("manifest.json")]
    receipt = latest_receipt(sink, prefix)
    assert receipt is not None and receipt["status"] == "failure"
    assert receipt["error"] == "InjectedFault" and receipt["counts"]["deleted"] > 0
    assert "evidence" in receipt and "digest" in receipt
    store = SqliteStore(env["db"])
    try:
        v = verify_run(sink, store, open_journal(store), prefix.rsplit("/", 1)[1])
        assert v.ok and v.operations > 0, v.problems
    finally:
        store.close()
