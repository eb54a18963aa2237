"""Receipts give no content back (session 29 compliance review): operation receipts,
deferral receipts, the run's Parquet and the operations dataset carried each record's plain
content sha256, and a short memory ("Card on file ends in 4821.") was recovered from it in
10,000 guesses. They carry a hash keyed by the store's run secret now, and `receipts
verify` (which holds the store) still ties each one to its record."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pyarrow.parquet as pq
from typer.testing import CliRunner

from memlife.cli import app
from memlife.model import RetentionClass
from memlife.stores.sqlite import SqliteStore
from tests.support.records import good

runner = CliRunner()


def _guessable_hashes() -> dict[str, str]:
    return {hashlib.sha256(f"Card on file ends in {i:04d}.".encode()).hexdigest(): f"{i:04d}"
            for i in range(10_000)}  # fmt: skip


def _every_value(root: Path) -> list[str]:
    """Every string the receipts location holds: JSON values and Parquet cells."""
    out: list[str] = []

    def walk(v: object) -> None:
        if isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, str):
            out.append(v)

    for f in root.rglob("*"):
        if f.suffix == ".json":
            walk(json.loads(f.read_text()))
        elif f.suffix == ".parquet":
            walk(pq.read_table(io.BytesIO(f.read_bytes())).to_pylist())
    return out


def test_no_receipt_gives_a_short_memory_back(home: Path, tmp_path: Path) -> None:
    rows = [
        good("m-card", content="Card on file ends in 4821.", subject="payment"),
        good("m-card2", content="Card on file ends in 0007.", subject="payment",
             retention_class=RetentionClass.legal_hold.value),
        good("m-old", content="Card on file ends in 1234.", expires_at="2026-01-03T00:00:00Z"),
        good("m-keep", content="Likes green tea.", subject="drinks"),
    ]  # fmt: skip
    src = tmp_path / "r.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert runner.invoke(app, ["import", str(src)]).exit_code == 0
    res = runner.invoke(app, ["erase", "--actor", "u-1", "--subject", "payment", "--yes",
                              "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    erase_run = json.loads(res.stdout)["run_id"]
    res = runner.invoke(app, ["run", "--engine", "local", "--json"])
    assert res.exit_code == 0, res.output
    night = json.loads(res.stdout)["run_id"]

    receipts = home / "receipts"
    assert list(receipts.rglob("deferrals/*.json"))  # the held card's deferral is written
    values = _every_value(receipts)
    hashes = [v for v in values if v.startswith("hmac-sha256:")]
    assert len(hashes) >= 3  # erased, deferred and expired: each names its content, keyed
    guessed = _guessable_hashes()
    found = {guessed[v] for v in values if v in guessed}
    assert found == set(), f"card digits recovered from the receipts: {found}"
    for run_id in (erase_run, night):
        res = runner.invoke(app, ["receipts", "verify", run_id, "--json"])
        assert res.exit_code == 0 and json.loads(res.stdout)["ok"], res.stdout


def test_a_keyed_hash_edited_in_a_receipt_is_still_caught(home: Path, tmp_path: Path) -> None:
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-old", expires_at="2026-01-03T00:00:00Z")) + "\n")
    assert runner.invoke(app, ["import", str(src)]).exit_code == 0
    res = runner.invoke(app, ["run", "--engine", "local", "--json"])
    night = json.loads(res.stdout)["run_id"]
    (receipt,) = (home / "receipts" / "operations").glob("*.json")
    doc = json.loads(receipt.read_text())
    doc["content_sha256"] = "hmac-sha256:" + "0" * 64
    receipt.write_text(json.dumps(doc))
    res = runner.invoke(app, ["receipts", "verify", night, "--json"])
    out = json.loads(res.stdout)
    assert res.exit_code == 1
    assert {p.get("field") for p in out["problems"]} >= {"content_sha256"}, out["problems"]
    with SqliteStore(home / "memlife.db") as store:
        assert store.get("m-old") is None


def test_a_plain_receipt_and_its_reruns_keyed_row_are_not_a_mismatch() -> None:
    """Session 29 review: an attempt crashed before keys wrote plain operation receipts; its
    rerun's seal keys every row: the bucket alone cannot compare the two forms (verify
    with the store compares each with the journal), so they are no RECEIPT_FIELD_MISMATCH;
    two values of one form still are."""
    from memlife.evidence import _mismatched
    from memlife.evidence_key import keyed

    plain = "a" * 64
    row = {"record_id": "m-1", "content_sha256": keyed(plain, b"k"), "actor_id": "u",
           "namespace": "/n"}  # fmt: skip
    doc = {
        "record_id": "m-1",
        "content_sha256": plain,
        "scope": {"actor_id": "u", "namespace": "/n"},
    }
    assert "content_sha256" not in _mismatched(doc, row)
    assert "content_sha256" in _mismatched(doc | {"content_sha256": keyed("b" * 64, b"k")}, row)
    assert "content_sha256" in _mismatched(
        doc | {"content_sha256": "b" * 64}, row | {"content_sha256": plain}
    )
