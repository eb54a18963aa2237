"""Session 48 (audit 48g): `receipts verify` against a bucket rewritten consistently (the journal cross-
check is the defence, memlife/evidence.py), and the journal's state machine."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from memlife import pipeline
from memlife.audit import FileSink
from memlife.cli import app
from memlife.evidence import chain, counts_from_rows, receipt_digest, sha256
from memlife.pipeline import RunConfig, run_local
from memlife.receipts_history import record_history
from memlife.run_types import RunSummary
from memlife.stores.base import BatchResult, ItemFailure
from memlife.stores.sqlite import SqliteStore
from tests.support.evidence import copied_run, sealed_nightly_run, verify_problems
from tests.support.lifecycle import CUTOFF, seed
from tests.support.records import good

runner = CliRunner()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return sealed_nightly_run(tmp_path_factory.mktemp("audit48g"))


@pytest.fixture()
def ev(pristine: dict, tmp_path: Path) -> dict:
    run = copied_run(pristine, tmp_path / "c")
    receipts = run["root"] / "receipts"
    (part,) = receipts.glob(f"dataset/operations/date=*/run_id={run['run_id']}/part-0.parquet")
    return run | {"sink": FileSink(receipts), "part": part}


def codes(ev: dict) -> set[str]:
    return {p["code"] for p in verify_problems(ev, evidence_only=False)}


def reseal(ev: dict, **evidence: object) -> None:
    """The receipt's evidence block edited and its (unkeyed) digest recomputed."""
    doc = json.loads(ev["receipt"].read_text())
    doc["evidence"] = {**doc["evidence"], **evidence}
    doc.pop("digest")
    doc["digest"] = receipt_digest(doc)
    ev["receipt"].write_text(json.dumps(doc))


def test_the_sealed_dataset_file_rewritten_with_its_digest_is_caught_by_the_journal(
    ev: dict,
) -> None:
    """The adversary writes the bucket, not the journal: the run's sealed dataset file (what
    `receipts history` and the SQL views read) loses its real delete and gains a delete of a
    record never deleted; `dataset_sha256` and the receipt's digest are recomputed. The
    operations Parquet is untouched, so the journal agrees with it, but the file history
    reads no longer says what the journal-checked seal says: the full verify must name it."""
    assert codes(ev) == set()
    table = pq.read_table(ev["part"])
    gone = next(r["record_id"] for r in table.to_pylist() if r["action"] == "delete")
    fake = table.filter(pc.equal(table["record_id"], gone)).to_pylist()[0]
    fake.update(record_id="m-never-deleted")
    forged = pa.concat_tables([table.filter(pc.not_equal(table["record_id"], gone)),
                               pa.Table.from_pylist([fake], schema=table.schema)])  # fmt: skip
    pq.write_table(forged, ev["part"])
    reseal(ev, dataset_sha256=hashlib.sha256(ev["part"].read_bytes()).hexdigest())
    assert [r["action"] for r in record_history(ev["sink"], "m-never-deleted")] == ["delete"]
    assert record_history(ev["sink"], gone) == []
    assert codes(ev) & {"DATASET_MISMATCH", "DATASET_DIGEST_MISMATCH"}


def _moved_to(run_folder: Path, receipts: Path, rid: str, other: str) -> None:
    """Every file of a manual run and its deferral receipt say ``other`` where they said
    ``rid``; the digests that bind them recomputed (an unlocked bucket's consistent rewrite)."""
    for path in [*run_folder.glob("*.parquet"), *receipts.glob("dataset/operations/*/*/*")]:
        rows = pq.read_table(path).to_pylist()
        rows = [
            {**r, "record_id": other if r["record_id"] == rid else r["record_id"]} for r in rows
        ]
        pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(path)), path)
    for path in [run_folder / "manifest.json", *receipts.glob("deferrals/*.json")]:
        path.write_text(path.read_text().replace(f'"{rid}"', f'"{other}"'))
    receipt = run_folder / "receipt.json"
    doc = json.loads(receipt.read_text().replace(f'"{rid}"', f'"{other}"'))
    digest = {"parquet_key": "parquet_sha256", "dataset_key": "dataset_sha256"}
    for k, sha in digest.items():
        doc["evidence"][sha] = hashlib.sha256(
            (receipts / doc["evidence"][k]).read_bytes()
        ).hexdigest()
    doc["evidence"]["manifest_sha256"] = hashlib.sha256(
        (run_folder / "manifest.json").read_bytes()
    ).hexdigest()
    doc.pop("digest")
    receipt.write_text(json.dumps({**doc, "digest": receipt_digest(doc)}))


def test_a_deferred_erasure_rewritten_to_another_record_is_caught_by_the_journal(
    home: Path, tmp_path: Path
) -> None:
    """An erasure of held m-1 is deferred (FAILED in the journal, a deferral receipt). The
    adversary rewrites the bucket, not the journal: the run's Parquet, dataset file, manifest,
    run receipt and deferral receipt all say m-2 instead, digests recomputed. The evidence
    now names the wrong person's record as the one whose erasure waits on the hold; the
    journal still says m-1, so the full verify must not say "verified"."""
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1", retention_class="legal_hold")) + "\n"
                   + json.dumps(good("m-2")) + "\n")  # fmt: skip
    assert runner.invoke(app, ["import", str(src)]).exit_code == 0
    res = runner.invoke(app, ["erase", "--actor", "u-1", "--id", "m-1", "--yes", "--json"])
    assert res.exit_code == 0, res.output
    run_id = json.loads(res.stdout)["run_id"]
    receipts = home / "receipts"
    (folder,) = receipts.glob(f"runs/*/*/*/{run_id}")
    assert runner.invoke(app, ["receipts", "verify", run_id]).exit_code == 0
    _moved_to(folder, receipts, "m-1", "m-2")
    assert runner.invoke(app, ["receipts", "verify", run_id, "--evidence-only"]).exit_code == 0
    history = runner.invoke(app, ["receipts", "history", "m-2"], env={"COLUMNS": "250"})
    assert "deferred (legal hold)" in history.stdout, history.output
    res = runner.invoke(app, ["receipts", "verify", run_id, "--json"])
    assert res.exit_code != 0, res.output


class _Throttled(SqliteStore):
    """The first three ids of every delete batch fail, retryably (a throttled store)."""

    def delete_many(self, ids, **kw):  # type: ignore[no-untyped-def]
        ids = list(ids)
        res = super().delete_many(ids[3:], **kw)
        return BatchResult(res.succeeded, [ItemFailure(i, "THROTTLED") for i in ids[:3]],
                           res.missing)  # fmt: skip


def test_failed_deletes_rewritten_as_done_after_a_later_run_failed_them_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Night 1 fails three deletes (throttled); night 2's retry queue fails them again, so
    their last mover is another run. The adversary rewrites night 1's bucket, not the
    journal: those rows APPLIED `deleted`, the counts, status and failures to match,
    digests recomputed. A failed delete is never shown as done: the journal holds them
    FAILED, which no APPLIED operation can become, whoever moved it last."""
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path))
    seed(tmp_path / "memlife.db")
    monkeypatch.setattr(
        pipeline, "open_store", lambda url=None: _Throttled(tmp_path / "memlife.db")
    )

    def night(now: datetime) -> RunSummary:
        return run_local(RunConfig(dry_run=False, now=now, store=f"sqlite:///{tmp_path / 'memlife.db'}",
                                   receipts=f"file://{tmp_path / 'receipts'}"))  # fmt: skip

    first = night(CUTOFF)
    assert first.status == "partial_failure"
    assert night(CUTOFF + timedelta(days=2)).status == "partial_failure"
    receipt = Path(first.receipt or "")
    ev = {"root": tmp_path, "run_id": first.run_id, "receipt": receipt,
          "sink": FileSink(tmp_path / "receipts")}  # fmt: skip
    assert codes(ev) == set()
    parquet = receipt.parent / "operations.parquet"
    rows = pq.read_table(parquet).to_pylist()
    failed = {r["operation_id"] for r in rows if r["state"] == "FAILED"}
    assert failed
    done = [{**r, "state": "APPLIED", "outcome": "deleted"} if r["operation_id"] in failed else r
            for r in rows]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(done, schema=pq.read_schema(parquet)), parquet)
    (part,) = (tmp_path / "receipts").glob(f"dataset/operations/*/run_id={first.run_id}/*")
    table = pq.read_table(part)
    said = [{**d, "state": "APPLIED", "outcome": "deleted"} if d["operation_id"] in failed else d
            for d in table.to_pylist()]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(said, schema=table.schema), part)
    doc = json.loads(receipt.read_text())
    doc.update(status="success", failures=[], counts={**doc["counts"], **counts_from_rows(done)})
    doc["evidence"].update(parquet_sha256=sha256(parquet.read_bytes()),
                           dataset_sha256=sha256(part.read_bytes()))  # fmt: skip
    doc.pop("digest")
    receipt.write_text(json.dumps({**doc, "digest": receipt_digest(doc)}))
    assert {p["code"] for p in verify_problems(ev, evidence_only=True)} == set()
    assert "JOURNAL_PARQUET_MISMATCH" in codes(ev)


def test_the_policy_of_a_receipted_delete_rewritten_everywhere_is_caught_by_the_journal(
    ev: dict,
) -> None:
    """The adversary rewrites the bucket, not the journal: a receipted delete now names
    another policy (the one that authorised it) in its row, its dataset row and its
    operation receipt; chain, Parquet and dataset digests and the receipt's digest are
    recomputed. The journal still holds the policy it was planned under: verify must say so."""
    folder, receipts = ev["receipt"].parent, ev["root"] / "receipts"
    rows = pq.read_table(folder / "operations.parquet").to_pylist()
    oid = next(r["operation_id"] for r in rows if r["action"] == "delete")
    for path in (folder / "operations.parquet", ev["part"]):
        table = pq.read_table(path)
        said = [{**r, "policy_version": "lenient-1"} if r["operation_id"] == oid else r
                for r in table.to_pylist()]  # fmt: skip
        pq.write_table(pa.Table.from_pylist(said, schema=table.schema), path)
    op_receipt = receipts / "operations" / f"{oid}.json"
    op_receipt.write_text(json.dumps({**json.loads(op_receipt.read_text()),
                                      "policy_version": "lenient-1"}))  # fmt: skip
    doc = json.loads(ev["receipt"].read_text())
    n, head, _ = chain(ev["sink"], [r["operation_id"] for r in rows if r["state"] == "RECEIPTED"])
    doc["evidence"].update(parquet_sha256=sha256((folder / "operations.parquet").read_bytes()),
                           dataset_sha256=sha256(ev["part"].read_bytes()),
                           operations={**doc["evidence"]["operations"], "count": n, "chain_sha256": head})  # fmt: skip
    doc.pop("digest")
    ev["receipt"].write_text(json.dumps({**doc, "digest": receipt_digest(doc)}))
    assert {p["code"] for p in verify_problems(ev, evidence_only=True)} == set()
    assert "JOURNAL_PARQUET_MISMATCH" in codes(ev)
