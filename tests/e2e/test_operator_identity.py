"""Who asked (session 29 compliance review): `hold release` (which erases at once) and
`erase` wrote receipts whose `reviewer_identity` was null, so "who lifted the legal hold,
on whose authority" had no answer in the evidence. Every manual run names its operator."""

from __future__ import annotations

import getpass
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlife.cli import app
from tests.support.records import good

runner = CliRunner()


def _receipts_of(home: Path, run_id: str) -> list[dict]:
    docs = [json.loads(p.read_text()) for p in (home / "receipts").rglob("operations/*.json")]
    return [d for d in docs if d["run_id"] == run_id]


@pytest.mark.parametrize("operator", [None, "ana (ticket LEGAL-42)"])
def test_a_hold_release_and_an_erase_name_who_asked(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, operator: str | None
) -> None:
    if operator:
        monkeypatch.setenv("MEMLIFE_OPERATOR", operator)
    expected = operator or f"{getpass.getuser()}@"
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1", retention_class="legal_hold")) + "\n"
                   + json.dumps(good("m-2", subject="dogs")) + "\n")  # fmt: skip
    assert runner.invoke(app, ["import", str(src)]).exit_code == 0
    res = runner.invoke(app, ["erase", "--actor", "u-1", "--id", "m-2", "--yes", "--json"])
    erase_run = json.loads(res.stdout)["run_id"]
    res = runner.invoke(app, ["hold", "release", "--id", "m-1", "--json"])
    assert res.exit_code == 0, res.output
    release_run = json.loads(res.stdout)["run_id"]
    for run_id in (erase_run, release_run):
        docs = _receipts_of(home, run_id)
        assert docs and all(d["reviewer_identity"] and d["reviewer_identity"].startswith(expected)
                            for d in docs), docs  # fmt: skip
        (manifest,) = (home / "receipts").rglob(f"runs/*/*/*/{run_id}/manifest.json")
        assert json.loads(manifest.read_text())["requested_by"].startswith(expected)
