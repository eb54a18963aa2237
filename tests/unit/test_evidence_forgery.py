"""Forged evidence that adds keys (what S3 Object Lock allows) or rewrites the run's result
fails `receipts verify`, each with a named problem; untouched evidence verifies clean."""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memlife import pipeline
from memlife.audit import FileSink
from memlife.evidence import chain, counts_from_rows, receipt_digest, sha256
from memlife.pipeline import RunConfig, run_local
from memlife.review import find_run
from memlife.run_types import RunSummary
from memlife.stores.base import BatchResult, ItemFailure
from memlife.stores.sqlite import SqliteStore
from tests.support.evidence import copied_run, sealed_nightly_run, verify_problems
from tests.support.lifecycle import CUTOFF, seed


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return sealed_nightly_run(tmp_path_factory.mktemp("forgery"))


@pytest.fixture()
def ev(pristine: dict, tmp_path: Path) -> dict:
    run = copied_run(pristine, tmp_path / "c")
    return run | {"sink": FileSink(run["root"] / "receipts")}


def codes(ev: dict, evidence_only: bool) -> set[str]:
    return {p["code"] for p in verify_problems(ev, evidence_only)}


def both(ev: dict) -> tuple[set[str], set[str]]:
    return codes(ev, evidence_only=True), codes(ev, evidence_only=False)


def original(ev: dict) -> dict:
    return json.loads(ev["receipt"].read_text())


def as_failure(doc: dict) -> dict:
    out = {k: v for k, v in doc.items() if k not in ("evidence", "digest")}
    out.update(status="failure", error="RuntimeError", counts={k: 0 for k in doc["counts"]})
    return out


def test_untouched_evidence_verifies_clean(ev: dict) -> None:
    assert both(ev) == (set(), set())
    assert "previous_receipt_sha256" in original(ev)["evidence"]


def test_failure_receipt_appended_after_a_success(ev: dict) -> None:
    """Old code: an unsealed failure receipt.2.json made --evidence-only check nothing."""
    (ev["folder"] / "receipt.2.json").write_text(json.dumps(as_failure(original(ev))))
    for found in both(ev):
        assert "RECEIPT_AFTER_COMPLETION" in found, found
    run = find_run(ev["sink"], ev["run_id"])
    assert run is not None and run.receipt is not None and run.receipt["status"] == "success"


def test_receipt_json_rewritten_as_an_unsealed_failure(ev: dict) -> None:
    ev["receipt"].write_text(json.dumps(as_failure(original(ev))))
    for found in both(ev):
        assert {"RECEIPT_NOT_IN_RUN", "PARQUET_NOT_SEALED"} <= found, found


def test_forged_success_appended_after_a_partial_run(ev: dict) -> None:
    """A self-consistent receipt.2.json (digest recomputed) does not replace the result."""
    forged = {**original(ev), "counts": {**original(ev)["counts"], "deleted": 0}}
    forged["digest"] = receipt_digest(forged)
    (ev["folder"] / "receipt.2.json").write_text(json.dumps(forged))
    for found in both(ev):
        assert "RECEIPT_AFTER_COMPLETION" in found, found
        assert "RECEIPT_CHAIN_MISMATCH" in found, found  # it names no previous receipt
    run = find_run(ev["sink"], ev["run_id"])
    assert run is not None and run.receipt == original(ev)


def test_sealed_receipt_moved_behind_a_forged_failure(ev: dict) -> None:
    """The seal binds a receipt to the one before it: a forged earlier failure breaks it."""
    doc = original(ev)
    (ev["folder"] / "receipt.2.json").write_text(ev["receipt"].read_text())
    ev["receipt"].write_text(json.dumps(as_failure(doc)))
    for found in both(ev):
        assert found == {"RECEIPT_CHAIN_MISMATCH"}, found


def test_receipt_of_another_run(ev: dict) -> None:
    doc = {**original(ev), "run_id": "20261101T120000Z-apply-0000000000"}
    doc["digest"] = receipt_digest(doc)
    ev["receipt"].write_text(json.dumps(doc))
    for found in both(ev):
        assert "RECEIPT_RUN_ID_MISMATCH" in found, found
    manifest = ev["folder"] / "manifest.json"
    mdoc = {**json.loads(manifest.read_text()), "run_id": "20261101T120000Z-apply-0000000000"}
    manifest.write_text(json.dumps(mdoc))
    assert "MANIFEST_RUN_ID_MISMATCH" in codes(ev, evidence_only=True)


def test_rerun_after_a_failed_attempt_links_and_verifies(ev: dict) -> None:
    """A legitimate failure then completion: the completion names the failure's digest."""
    doc = original(ev)
    failure = json.dumps(as_failure(doc)).encode()
    ev["receipt"].write_bytes(failure)  # the first attempt failed ...
    relinked = {**doc, "evidence": {**doc["evidence"], "previous_receipt_sha256": sha256(failure)}}
    relinked["digest"] = receipt_digest(relinked)
    (ev["folder"] / "receipt.2.json").write_text(json.dumps(relinked))  # ... the rerun completed
    assert both(ev) == (set(), set())
    run = find_run(ev["sink"], ev["run_id"])
    assert run is not None and run.receipt is not None and run.receipt["status"] == "success"


# -- consistent rewrites (an unlocked bucket) and retried operations ---------------------------
def _rewrite(ev: dict, rows: list[dict], **receipt: object) -> None:
    """Rewrite operations.parquet and receipt.json consistently (digests recomputed)."""
    parquet = ev["folder"] / "operations.parquet"
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(parquet)), buf)
    parquet.write_bytes(buf.getvalue())
    (part,) = (ev["root"] / "receipts").glob(f"dataset/operations/*/run_id={ev['run_id']}/*")
    said, table = {r["operation_id"]: r for r in rows}, pq.read_table(part)
    kept = [{**d, "state": said[d["operation_id"]]["state"]} for d in table.to_pylist()
            if d["operation_id"] in said]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(kept, schema=table.schema), part)  # the dataset too
    doc = {**original(ev), **receipt}
    doc["counts"] = {**doc["counts"], **counts_from_rows(rows)}
    n, head, _ = chain(ev["sink"], [r["operation_id"] for r in rows if r["state"] == "RECEIPTED"])
    doc["evidence"] = {**doc["evidence"], "parquet_sha256": sha256(buf.getvalue()),
                       "dataset_sha256": sha256(part.read_bytes()),
                       "operations": {**doc["evidence"]["operations"], "count": n, "chain_sha256": head}}  # fmt: skip
    doc["digest"] = receipt_digest(doc)
    ev["receipt"].write_text(json.dumps(doc))


def test_deletes_rewritten_as_planned_are_caught_by_the_journal(ev: dict) -> None:
    rows = pq.read_table(ev["folder"] / "operations.parquet").to_pylist()
    for r in rows:
        if r["action"] == "delete":
            r["state"] = "PLANNED"
    _rewrite(ev, rows)
    assert codes(ev, evidence_only=True) == set()  # the bucket alone cannot tell
    assert "JOURNAL_PARQUET_MISMATCH" in codes(ev, evidence_only=False)


class PartialDelete(SqliteStore):
    """The first three ids of every delete batch fail (retryable) while ``fail`` is set."""

    fail = True

    def delete_many(self, ids, **kw):  # type: ignore[no-untyped-def]
        ids = list(ids)
        if not PartialDelete.fail:
            return super().delete_many(ids, **kw)
        res = super().delete_many(ids[3:], **kw)
        return BatchResult(res.succeeded, [ItemFailure(i, "THROTTLED") for i in ids[:3]],
                           res.missing)  # fmt: skip


@pytest.fixture()
def failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    base = tmp_path / "f"
    base.mkdir()
    monkeypatch.setenv("MEMLIFE_HOME", str(base))
    seed(base / "memlife.db")
    monkeypatch.setattr(pipeline, "open_store", lambda url=None: PartialDelete(base / "memlife.db"))
    monkeypatch.setattr(PartialDelete, "fail", True)

    def apply(now: datetime) -> RunSummary:
        return run_local(RunConfig(dry_run=False, now=now, store=f"sqlite:///{base / 'memlife.db'}",
                                   receipts=f"file://{base / 'receipts'}"))  # fmt: skip

    summary = apply(CUTOFF)
    assert summary.status == "partial_failure" and summary.lifecycle["failed"] > 0
    receipt = Path(summary.receipt or "")
    return {"root": base, "sink": FileSink(base / "receipts"), "run_id": summary.run_id,
            "receipt": receipt, "folder": receipt.parent, "apply": apply}  # fmt: skip


def test_failed_rows_dropped_are_caught_by_the_journal(failed: dict) -> None:
    assert both(failed) == (set(), set())
    rows = pq.read_table(failed["folder"] / "operations.parquet").to_pylist()
    _rewrite(failed, [r for r in rows if r["state"] != "FAILED"], status="success", failures=[])
    assert codes(failed, evidence_only=True) == set()
    assert "JOURNAL_OP_NOT_IN_PARQUET" in codes(failed, evidence_only=False)


def test_run_verifies_after_a_retry_completed_its_failures(failed: dict) -> None:
    """Old code: OPERATIONS_DIGEST_MISMATCH on untouched evidence once a retry receipted."""
    PartialDelete.fail = False
    later = failed["apply"](CUTOFF + timedelta(days=2))
    assert later.status == "success"
    assert both(failed) == (set(), set())
    rows = pq.read_table(failed["folder"] / "operations.parquet").to_pylist()
    retried = [r for r in rows if r["state"] == "FAILED"]
    assert retried and all(
        (failed["root"] / "receipts" / "operations" / f"{r['operation_id']}.json").exists()
        for r in retried
    )
    (failed["root"] / "receipts" / "operations" / f"{retried[0]['operation_id']}.json").unlink()
    assert "OPERATION_RECEIPT_MISSING" in codes(failed, evidence_only=False)
