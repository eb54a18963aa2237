"""Session 48 (audit 48m): `receipts verify` holds what each operation is to the journal (audit 48g,
memlife/evidence_journal.py ``ident``), over the bucket of a real sealed night rewritten
consistently, as the session-48 test rewrites it (fixtures from there)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memlife.evidence import chain, receipt_digest, sha256
from tests.unit.test_evidence_journal_session48 import codes, ev, pristine  # noqa: F401


@pytest.mark.parametrize(
    ("field", "value"),
    [("replacement_id", "m-innocent"), ("action", "retain")],
    ids=["replacement", "action"],
)
def test_what_a_receipted_delete_was_rewritten_everywhere_is_caught_by_the_journal(
    ev: dict,  # noqa: F811
    field: str,
    value: str,
) -> None:
    """Weak test (mutants: `replacement_id` or `action` left out of `ident`). The adversary
    rewrites a receipted delete's row, its dataset row and its operation receipt to name
    another replacement, or another action, and recomputes every digest. The journal
    still holds the operation as planned: verify must say JOURNAL_PARQUET_MISMATCH."""
    folder, receipts = ev["receipt"].parent, ev["root"] / "receipts"
    rows = pq.read_table(folder / "operations.parquet").to_pylist()
    oid = next(r["operation_id"] for r in rows if r["action"] == "delete")
    for path in (folder / "operations.parquet", ev["part"]):
        table = pq.read_table(path)
        said = [{**r, field: value} if r["operation_id"] == oid else r for r in table.to_pylist()]
        pq.write_table(pa.Table.from_pylist(said, schema=table.schema), path)
    op_receipt = receipts / "operations" / f"{oid}.json"
    op_receipt.write_text(json.dumps({**json.loads(op_receipt.read_text()), field: value}))
    doc = json.loads(ev["receipt"].read_text())
    n, head, _ = chain(ev["sink"], [r["operation_id"] for r in rows if r["state"] == "RECEIPTED"])
    doc["evidence"].update(parquet_sha256=sha256((folder / "operations.parquet").read_bytes()),
                           dataset_sha256=sha256(ev["part"].read_bytes()),
                           operations={**doc["evidence"]["operations"], "count": n, "chain_sha256": head})  # fmt: skip
    doc.pop("digest")
    ev["receipt"].write_text(json.dumps({**doc, "digest": receipt_digest(doc)}))
    assert "JOURNAL_PARQUET_MISMATCH" in codes(ev)
