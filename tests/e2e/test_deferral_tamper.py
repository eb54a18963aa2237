"""Deferral receipts are checked (session 29 compliance review): an erasure a legal hold
deferred leaves `deferrals/{operation}.json`; removing it, or rewriting it to another record
or to "deleted", left `receipts verify` saying "verified"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlife.cli import app
from tests.support.records import good

runner = CliRunner()


@pytest.fixture()
def deferred(home: Path, tmp_path: Path) -> tuple[str, Path]:
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1", retention_class="legal_hold")) + "\n")
    assert runner.invoke(app, ["import", str(src)]).exit_code == 0
    res = runner.invoke(app, ["erase", "--actor", "u-1", "--id", "m-1", "--yes", "--json"])
    assert res.exit_code == 0, res.output
    (receipt,) = (home / "receipts" / "deferrals").glob("*.json")
    return json.loads(res.stdout)["run_id"], receipt


def _problems(run_id: str, *flags: str) -> set[tuple[str, str | None]]:
    res = runner.invoke(app, ["receipts", "verify", run_id, "--json", *flags])
    return {(p["code"], p.get("field")) for p in json.loads(res.stdout)["problems"]}


def test_history_says_deferred_not_failed(deferred: tuple[str, Path]) -> None:
    res = runner.invoke(app, ["receipts", "history", "m-1"], env={"COLUMNS": "250"})
    assert res.exit_code == 0 and "deferred (legal hold)" in res.stdout, res.output


@pytest.mark.parametrize("only", [(), ("--evidence-only",)])
def test_a_deferral_receipt_removed_rewritten_or_planted_is_named(
    deferred: tuple[str, Path], only: tuple[str, ...]
) -> None:
    run_id, receipt = deferred
    assert _problems(run_id, *only) == set()
    original = receipt.read_text()
    doc = json.loads(original)
    for change, expected in (({"record_id": "m-other"}, ("DEFERRAL_FIELD_MISMATCH", "record_id")),
                             ({"outcome": "deleted"}, ("DEFERRAL_FIELD_MISMATCH", "outcome"))):  # fmt: skip
        receipt.write_text(json.dumps(doc | change))
        assert expected in _problems(run_id, *only)
    receipt.unlink()
    assert ("DEFERRAL_RECEIPT_MISSING", None) in _problems(run_id, *only)
    receipt.write_text(original)
    planted = receipt.with_name("op-" + "e" * 32 + ".json")
    planted.write_text(json.dumps(doc | {"operation_id": planted.stem, "record_id": "m-9"}))
    assert ("DEFERRAL_NOT_IN_RUN", None) in _problems(run_id, *only)
