"""Audit 52f: a deferral receipt whose write failed was silently dropped by its run.

An erasure of a legal-hold record is deferred: its operation is FAILED (LEGAL_HOLD) in the
journal and its evidence is a receipt under ``deferrals/``. When that write failed (a
receipt outage), ``_defer`` only counted ``receipt_failed``, which the manual run's receipt
leaves out (it takes outcome counts from the journal, and the journal owes no receipt for a
FAILED operation). So the run sealed ``success``, `memlife erase` exited 0, and nothing told
the operator that the run's deferral evidence was missing or that rerunning the same request
at the same ``--now`` would write it. Only a later `receipts verify` of that run showed it
(DEFERRAL_RECEIPT_MISSING).

The receipt outage is a FileSink whose create fails for ``deferrals/`` keys, as
test_rerun_requester_session47.py does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlife.audit import FileSink, ReceiptWriteError
from memlife.erase import erase
from memlife.run_receipts import run_receipts
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.support.gate import NOW
from tests.support.records import good


def _held(home: Path, tmp_path: Path) -> None:
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1", retention_class="legal_hold")) + "\n")
    assert invoke("import", str(src))[0] == 0


def _outage(monkeypatch: pytest.MonkeyPatch) -> None:
    real = FileSink.put_new

    def put_new(self: FileSink, key: str, body: bytes, content_type: str = "") -> bool:
        if key.startswith("deferrals/"):
            raise ReceiptWriteError(key)
        return real(self, key, body, content_type or "application/json")

    monkeypatch.setattr(FileSink, "put_new", put_new)


def _receipts(home: Path, run_id: str) -> list[dict]:
    """The run's receipts in order (receipt.json, receipt.2.json, ...)."""
    (folder,) = [p for p in (home / "receipts" / "runs").rglob(run_id) if p.is_dir()]
    prefix = folder.relative_to(home / "receipts").as_posix()
    return [json.loads(b) for _, b in run_receipts(FileSink(home / "receipts"), prefix)]


def test_a_deferral_receipt_that_was_not_written_is_not_a_success(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _held(home, tmp_path)
    _outage(monkeypatch)
    with SqliteStore(home / "memlife.db") as store:
        out = erase(store, "u-1", ids=["m-1"], now=NOW)
    assert not list((home / "receipts").rglob("deferrals/*.json"))  # the outage happened
    (receipt,) = _receipts(home, out["run_id"])
    assert out["status"] == "partial_failure", out["status"]
    assert receipt["status"] == "partial_failure"
    assert [f["record_id"] for f in receipt["failures"]] == ["m-1"]


def test_the_cli_exits_3_when_the_deferral_receipt_was_not_written(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _held(home, tmp_path)
    _outage(monkeypatch)
    code, out, err = invoke("erase", "--actor", "u-1", "--id", "m-1", "--yes")
    assert code == 3, out + err


def test_control_the_rerun_at_the_same_now_finishes_it_and_verifies(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rerun the first run asks for (the same request at the same instant) writes the
    deferral receipt, seals success, and the run verifies."""
    _held(home, tmp_path)
    real = FileSink.put_new
    _outage(monkeypatch)
    with SqliteStore(home / "memlife.db") as store:
        first = erase(store, "u-1", ids=["m-1"], now=NOW)
    monkeypatch.setattr(FileSink, "put_new", real)
    with SqliteStore(home / "memlife.db") as store:
        again = erase(store, "u-1", ids=["m-1"], now=NOW)
    assert again["run_id"] == first["run_id"] and again["status"] == "success"
    assert len(list((home / "receipts").rglob("deferrals/*.json"))) == 1
    assert _receipts(home, first["run_id"])[-1]["status"] == "success"
    code, out, err = invoke("receipts", "verify", first["run_id"])
    assert code == 0, out + err


def test_control_a_deferral_written_is_a_success(home: Path, tmp_path: Path) -> None:
    _held(home, tmp_path)
    with SqliteStore(home / "memlife.db") as store:
        out = erase(store, "u-1", ids=["m-1"], now=NOW)
    assert out["status"] == "success" and out["counts"]["deferred"] == 1
    assert "deferral_receipt_failed" not in out["counts"]
