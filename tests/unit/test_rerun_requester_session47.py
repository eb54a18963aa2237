"""Session 47 (audit 47s): receipts verify (audit 47i) against legitimate evidence.

A deferral receipt's `reviewer_identity` must be the sealed manifest's `requested_by`
(audit 47i). The same erasure request at the same instant is the same run (a rerun after a
crash or a receipt outage, `quarantine.manual_run`); the manifest is create-only and keeps
the first operator, while the rerun's deferral receipt named whoever ran it again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlife.audit import FileSink, ReceiptWriteError
from memlife.erase import erase
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.support.gate import NOW
from tests.support.records import good


def test_a_rerun_by_another_operator_verifies(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """alice asks to erase a held record; the deferral receipt's write fails (a receipt
    outage). bob, on call, reruns the same request at the same instant: the same run,
    whose manifest says alice asked. Nothing was edited, so verify must pass."""
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1", retention_class="legal_hold")) + "\n")
    assert invoke("import", str(src))[0] == 0
    real = FileSink.put_new

    def outage(self: FileSink, key: str, body: bytes, content_type: str = "") -> bool:
        if key.startswith("deferrals/"):
            raise ReceiptWriteError(key)
        return real(self, key, body, content_type or "application/json")

    monkeypatch.setenv("MEMLIFE_OPERATOR", "alice@legal")
    monkeypatch.setattr(FileSink, "put_new", outage)
    with SqliteStore(home / "memlife.db") as store:
        first = erase(store, "u-1", ids=["m-1"], now=NOW)
    monkeypatch.setattr(FileSink, "put_new", real)
    monkeypatch.setenv("MEMLIFE_OPERATOR", "bob@oncall")
    with SqliteStore(home / "memlife.db") as store:
        again = erase(store, "u-1", ids=["m-1"], now=NOW)

    assert again["run_id"] == first["run_id"] and again["counts"]["deferred"] == 1
    (deferral,) = (home / "receipts" / "deferrals").glob("*.json")  # written by the rerun
    assert json.loads(deferral.read_text())["run_id"] == first["run_id"]
    code, out, _ = invoke("receipts", "verify", first["run_id"], "--json")
    assert code == 0, out
