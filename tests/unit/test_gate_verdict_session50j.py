"""Audit 50j (session 50): the gate verdict that approved a night's changes survives a crash.

Audit 50a found that a night SIGKILLed after its commit and before its run receipt (here: in
the review queue, after every change and receipt of the night) is sealed by its rerun with a
``gate`` section the rerun computed on the store the killed attempt had already changed:
proposed supersedes and deletions 0, fewer cases, other ``before`` figures. The verdict under
which the changes were committed was recorded nowhere. The fix keeps it before the commit as
create-only, content-free evidence in the run folder (``gate.json``, keyed by the store's run
secret), the rerun reports it as the night's gate, and ``receipts verify`` checks it.

The child nights are killed at a SQL statement as in tests/unit/test_killed_statement_session50a.py.
"""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import invoke
from tests.unit.test_killed_statement_session50a import HOOK, NIGHT, _env, _run, seeded_night


def _receipt(home: Path, run_id: str) -> tuple[Path, dict[str, Any]]:
    """The run's folder and its (only, completed) receipt."""
    [folder] = [p for p in (home / "receipts/runs").rglob(run_id) if p.is_dir()]
    return folder, json.loads((folder / "receipt.json").read_text())


def _verify(home: Path, run_id: str, *extra: str) -> tuple[int, set[str]]:
    code, out, err = invoke("receipts", "verify", run_id, "--json", *extra, env=_env(home))
    doc = json.loads(out)
    return code, {p["code"] for p in doc["problems"]}


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A 120-record demo store with an evaluation set, and the same night run once whole."""
    base, clean, done = seeded_night(tmp_path_factory)
    summary = json.loads(done.stdout)
    folder, receipt = _receipt(clean, summary["run_id"])
    return {"base": base, "clean": clean, "summary": summary, "receipt": receipt,
            "folder": folder}  # fmt: skip


def _clean_copy(night: dict[str, Any], tmp_path: Path) -> tuple[Path, str]:
    """A copy of the home the night ran on whole, and that night's run id."""
    home = tmp_path / "home"
    shutil.copytree(night["clean"], home)
    return home, night["summary"]["run_id"]


def _gate_figures(gate: dict[str, Any]) -> dict[str, Any]:
    """What the night's gate judged: its proposal, its cases, the store before."""
    return {k: gate.get(k) for k in ("proposed_deletions", "proposed_supersedes",
                                     "staged_replacements", "cases", "before", "status")}  # fmt: skip


def test_the_rerun_reports_the_gate_that_approved_the_killed_attempts_commit(
    night: dict[str, Any], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    shutil.copytree(night["base"], home)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    # killed in the review queue: every change of the night committed and receipted
    killed = _run(home, hook, AUDIT50A_KILL_SQL=r"^INSERT OR IGNORE INTO review_items",
                  AUDIT50A_KILL_SKIP="2")  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    rerun = _run(home)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    summary = json.loads(rerun.stdout)
    assert summary["counts"] == night["summary"]["counts"]
    _, receipt = _receipt(home, summary["run_id"])
    clean_gate = night["receipt"]["gate"]
    assert clean_gate["proposed_supersedes"] > 0  # the night proposed changes: a real verdict
    assert _gate_figures(receipt["gate"]) == _gate_figures(clean_gate)
    assert receipt["gate"] == clean_gate  # the whole verdict, as the night's own receipt says
    # the rerun's own look at the changed store is beside it, labelled
    assert receipt["gate_rerun"]["proposed_supersedes"] == 0
    code, problems = _verify(home, summary["run_id"])
    assert code == 0, problems


def test_a_tampered_kept_verdict_is_reported_by_verify(
    night: dict[str, Any], tmp_path: Path
) -> None:
    home, run_id = _clean_copy(night, tmp_path)
    folder, receipt = _receipt(home, run_id)
    kept = folder / "gate.json"
    doc = json.loads(kept.read_text())
    assert doc["run_id"] == run_id and doc["gate"] == receipt["gate"]
    assert set(doc) == {"run_id", "gate", "mac"}  # content-free: the receipt's gate section
    assert _verify(home, run_id) == (0, set())
    # a looser verdict written over the kept one (an unlocked bucket allows it)
    doc["gate"]["cases"] += 1
    kept.write_text(json.dumps(doc))
    code, problems = _verify(home, run_id, "--evidence-only")
    assert code == 1 and "GATE_VERDICT_DIGEST_MISMATCH" in problems
    code, problems = _verify(home, run_id)
    assert code == 1 and {"GATE_VERDICT_DIGEST_MISMATCH", "GATE_VERDICT_MISMATCH",
                          "GATE_VERDICT_MAC_MISMATCH"} <= problems  # fmt: skip


def test_a_missing_kept_verdict_is_reported_by_verify(
    night: dict[str, Any], tmp_path: Path
) -> None:
    home, run_id = _clean_copy(night, tmp_path)
    folder, receipt = _receipt(home, run_id)
    assert receipt["evidence"]["gate_key"].endswith(f"{run_id}/gate.json")
    (folder / "gate.json").unlink()
    code, problems = _verify(home, run_id, "--evidence-only")
    assert code == 1 and "GATE_VERDICT_MISSING" in problems


def test_control_the_dry_run_keeps_no_verdict(night: dict[str, Any], tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(night["base"], home)
    code, out, err = invoke("run", "--engine", "local", "--dry-run", "--now", NIGHT,
                            "--eval-cases", str(home / "cases.yaml"), "--allow-future-cutoff",
                            "--json", env=_env(home))  # fmt: skip
    assert code == 0, out + err
    summary = json.loads(out)
    assert summary["gate"]["configured"] is True  # the gate ran
    assert not list((home / "receipts").rglob("gate.json"))


def test_a_verdict_planted_in_a_new_run_folder_is_refused(tmp_path: Path) -> None:
    """Run ids are predictable: a bucket writer could put a gate.json in a night's folder
    before the night; a run that has just created its manifest refuses such a folder before
    any change, as it refuses a planted receipt (audit 49g)."""
    from memlife.audit import FileSink, ReceiptWriteError
    from memlife.run_receipts import check_own_folder

    sink = FileSink(tmp_path)
    prefix = "runs/2026/06/01/20260601T000000Z-apply-0000000000"
    manifest = {"run_id": "20260601T000000Z-apply-0000000000"}
    assert sink.put_new(f"{prefix}/manifest.json", json.dumps(manifest).encode())
    check_own_folder(sink, prefix, manifest, created=True)  # control: nothing planted
    assert sink.put_new(f"{prefix}/gate.json", b'{"run_id": "x", "gate": {}, "mac": "x"}')
    with pytest.raises(ReceiptWriteError, match="gate.json"):
        check_own_folder(sink, prefix, manifest, created=True)
