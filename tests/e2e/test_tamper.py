"""Tampering with a run's evidence fails `receipts verify` (and `--evidence-only` wherever the
bucket alone can show it), each with a named problem (issue 11, "What broke" 4)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from memlife.audit import FileSink
from memlife.cli import app
from memlife.evidence import chain, counts_from_rows, receipt_digest, sha256
from tests.support.evidence import copied_run, sealed_nightly_run, verify_problems


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return sealed_nightly_run(tmp_path_factory.mktemp("pristine"))


@pytest.fixture()
def ev(pristine: dict, tmp_path: Path) -> dict:
    run = copied_run(pristine, tmp_path / "c")
    root = run["root"]
    return run | {"sink": FileSink(root / "receipts"), "parquet": run["folder"] / "operations.parquet",
                  "ops": root / "receipts" / "operations"}  # fmt: skip


def codes(ev: dict, evidence_only: bool) -> set[str]:
    return {p["code"] for p in verify_problems(ev, evidence_only)}


def rows(ev: dict) -> list[dict]:
    return pq.read_table(ev["parquet"]).to_pylist()


def op_receipt(ev: dict, action: str) -> Path:
    rid = next(
        r["operation_id"] for r in rows(ev) if r["action"] == action and r["state"] == "RECEIPTED"
    )
    return ev["ops"] / f"{rid}.json"


def edit(path: Path, **changes: object) -> None:
    doc = json.loads(path.read_text())
    doc.update(changes)
    path.write_text(json.dumps(doc))


def test_untouched_evidence_verifies_both_ways(ev: dict) -> None:
    assert codes(ev, evidence_only=False) == set()
    assert codes(ev, evidence_only=True) == set()
    res = CliRunner().invoke(app, ["receipts", "verify", ev["run_id"], "--evidence-only", "--json",
                                   "--receipts", f"file://{ev['root'] / 'receipts'}"])  # fmt: skip
    assert res.exit_code == 0 and json.loads(res.stdout)["ok"], res.output


@pytest.mark.parametrize("field,value", [
    ("content_sha256", "0" * 64), ("outcome", "already_absent"), ("reason_codes", ["MANUAL"]),
    ("scope", {"actor_id": "someone-else", "namespace": "/x"}), ("timestamp", "2020-01-01T00:00:00+00:00"),
])  # fmt: skip
def test_edited_operation_receipt_field(ev: dict, field: str, value: object) -> None:
    edit(op_receipt(ev, "delete"), **{field: value})
    assert "OPERATIONS_DIGEST_MISMATCH" in codes(ev, evidence_only=True)
    full = codes(ev, evidence_only=False)
    assert "OPERATIONS_DIGEST_MISMATCH" in full
    if field != "timestamp":  # a field the journal also holds
        assert "RECEIPT_FIELD_MISMATCH" in full


def test_fake_operation_receipt(ev: dict) -> None:
    doc = json.loads(op_receipt(ev, "delete").read_text())
    (ev["ops"] / "op-forged0000000000000000000000000.json").write_text(
        json.dumps(
            {**doc, "operation_id": "op-forged0000000000000000000000000", "record_id": "m-none"}
        )
    )
    assert "RECEIPT_NOT_IN_RUN" in codes(ev, evidence_only=True)
    assert "RECEIPT_NOT_IN_RUN" in codes(ev, evidence_only=False)


def test_edited_run_receipt_counts(ev: dict) -> None:
    doc = json.loads(ev["receipt"].read_text())
    doc["counts"]["deleted"] += 7
    ev["receipt"].write_text(json.dumps(doc))
    for evidence_only in (True, False):
        found = codes(ev, evidence_only)
        assert {"RECEIPT_DIGEST_MISMATCH", "COUNTS_MISMATCH"} <= found, found


def test_parquet_deleted_and_counts_zeroed(ev: dict) -> None:
    ev["parquet"].unlink()
    doc = json.loads(ev["receipt"].read_text())
    doc["counts"] = {k: 0 for k in doc["counts"]}
    ev["receipt"].write_text(json.dumps(doc))
    for evidence_only in (True, False):
        found = codes(ev, evidence_only)
        assert {"OPERATIONS_PARQUET_MISSING", "RECEIPT_DIGEST_MISMATCH"} <= found, found
    assert "JOURNAL_OP_NOT_IN_PARQUET" in codes(ev, evidence_only=False)


def _drop_deletes(ev: dict) -> list[dict]:
    kept = [r for r in rows(ev) if r["action"] != "delete"]
    dropped = [r for r in rows(ev) if r["action"] == "delete"]
    for r in dropped:
        (ev["ops"] / f"{r['operation_id']}.json").unlink()
    schema = pq.read_schema(ev["parquet"])
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(kept, schema=schema), buf)
    ev["parquet"].write_bytes(buf.getvalue())
    assert dropped
    return kept


def test_delete_rows_dropped_with_their_receipts(ev: dict) -> None:
    _drop_deletes(ev)
    only = codes(ev, evidence_only=True)
    assert {"PARQUET_DIGEST_MISMATCH", "OPERATIONS_DIGEST_MISMATCH", "COUNTS_MISMATCH"} <= only, (
        only
    )
    assert "JOURNAL_OP_NOT_IN_PARQUET" in codes(ev, evidence_only=False)


def test_consistent_rewrite_of_an_unlocked_bucket_is_caught_by_the_journal(ev: dict) -> None:
    """The threat model's limit: whoever can rewrite the bucket can make it consistent
    (digests recomputed); only Object Lock prevents that, and the journal still disagrees."""
    kept = _drop_deletes(ev)
    doc = json.loads(ev["receipt"].read_text())
    doc["counts"].update(counts_from_rows(kept))
    body = ev["parquet"].read_bytes()
    n, head, _ = chain(ev["sink"], [r["operation_id"] for r in kept])
    (part,) = (ev["root"] / "receipts").glob(f"dataset/operations/*/run_id={ev['run_id']}/*")
    ids, table = {r["operation_id"] for r in kept}, pq.read_table(part)
    said = [d for d in table.to_pylist() if d["operation_id"] in ids]
    pq.write_table(pa.Table.from_pylist(said, schema=table.schema), part)  # the dataset too
    doc["evidence"].update(
        parquet_sha256=sha256(body),
        operations={"count": n, "chain_sha256": head},
        dataset_sha256=sha256(part.read_bytes()),
    )
    doc["digest"] = receipt_digest(doc)
    ev["receipt"].write_text(json.dumps(doc))
    assert codes(ev, evidence_only=True) == set()  # the bucket alone cannot tell
    assert "JOURNAL_OP_NOT_IN_PARQUET" in codes(ev, evidence_only=False)
