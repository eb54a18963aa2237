"""A run's folder copied under another day (session 29 compliance review): the copy, its
status set to `failure` with 0 deleted, was listed by `receipts list` (twice without
--since), shown by `receipts show` when dated earlier (a manual run's id was looked for
everywhere), and `receipts verify RUN` said "verified". A run's folder is its cutoff day's,
which its id names: a copy elsewhere is not listed or shown, and verify names it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from memlife.cli import app
from tests.support.records import good

runner = CliRunner()


def _erase_run(home: Path, tmp_path: Path) -> tuple[str, Path]:
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1")) + "\n" + json.dumps(good("m-2", subject="dogs")) + "\n")
    assert runner.invoke(app, ["import", str(src)]).exit_code == 0
    res = runner.invoke(app, ["erase", "--actor", "u-1", "--id", "m-1", "--yes", "--json"])
    assert res.exit_code == 0, res.output
    run_id = json.loads(res.stdout)["run_id"]
    (folder,) = (home / "receipts" / "runs").glob(f"*/*/*/{run_id}")
    return run_id, folder


def _forge(folder: Path, day: str) -> Path:
    copy = folder.parents[3] / day / folder.name
    shutil.copytree(folder, copy)
    receipt = json.loads((copy / "receipt.json").read_text())
    receipt.update(status="failure", erased=[])
    receipt["counts"]["deleted"] = 0
    (copy / "receipt.json").write_text(json.dumps(receipt))
    return copy


def test_a_run_copied_under_another_day_is_not_the_run(home: Path, tmp_path: Path) -> None:
    run_id, folder = _erase_run(home, tmp_path)
    later, earlier = _forge(folder, "2099/01/09"), _forge(folder, "2001/01/01")

    res = runner.invoke(app, ["receipts", "list", "--json"])
    listed = json.loads(res.stdout)
    assert [(r["run_id"], r["status"]) for r in listed] == [(run_id, "success")]
    assert "not listed" in res.stderr and "2099/01/09" in res.stderr
    res = runner.invoke(app, ["receipts", "list", "--since", "2099-01-01", "--json"])
    assert json.loads(res.stdout) == []
    res = runner.invoke(app, ["receipts", "show", run_id, "--json"])
    assert json.loads(res.stdout)["receipt"]["status"] == "success"

    res = runner.invoke(app, ["receipts", "verify", run_id, "--json"])
    out = json.loads(res.stdout)
    assert res.exit_code == 1
    named = {p["key"] for p in out["problems"] if p["code"] == "RUN_FOLDER_MISPLACED"}
    rel = {str(p.relative_to(home / "receipts")) for p in (later, earlier)}
    assert named == rel, out["problems"]
    shutil.rmtree(later)
    shutil.rmtree(earlier)
    res = runner.invoke(app, ["receipts", "verify", run_id, "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["ok"]


def test_a_night_never_seals_a_manifest_planted_under_another_day(
    home: Path, tmp_path: Path
) -> None:
    run_id, folder = _erase_run(home, tmp_path)
    planted = folder.parents[3] / "2026" / "12" / "01" / folder.name
    planted.mkdir(parents=True)
    shutil.copy(folder / "manifest.json", planted / "manifest.json")
    assert runner.invoke(app, ["run", "--engine", "local"]).exit_code == 0
    assert not list(planted.glob("receipt*.json"))
