"""Session 24 review of the audit trail: each finding against real boto3 on moto S3.

F1 a forged completion after a sealed failure, F2 malformed evidence, F3 a deleted receipt
sealed again, F5 ids in the report page, F7 a reused record id, F9 the dataset after a
crash and rerun. Evidence is made on disk (a real run), then copied into a moto bucket and
verified there through ``S3Sink``."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from memlife.audit import S3Sink
from memlife.evidence import receipt_digest, sha256
from memlife.faults import InjectedFault, inject
from memlife.journal import open_journal
from memlife.model import MemoryRecord, utcnow
from memlife.pipeline import RunConfig, run_local
from memlife.receipts_dataset import PREFIX
from memlife.receipts_history import record_history, runs_between
from memlife.report_html import breakdown, namespace_pattern, render
from memlife.review import find_run, verify_run
from memlife.stores.sqlite import SqliteStore
from tests.support.evidence import copied_run, sealed_nightly_run
from tests.support.lifecycle import CUTOFF, seed

BUCKET = "audit24"


@pytest.fixture(autouse=True)
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                 "AWS_DEFAULT_REGION": "us-east-1"}.items():  # fmt: skip
        monkeypatch.setenv(k, v)
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
        yield


def to_s3(receipts: Path) -> S3Sink:
    """The receipts folder, key for key, in the moto bucket (a fresh prefix each call)."""
    prefix = f"memlife/{len(list(S3Sink(BUCKET, 'memlife').list('')))}-{id(receipts)}"
    client = boto3.client("s3", region_name="us-east-1")
    for f in sorted(p for p in receipts.rglob("*") if p.is_file()):
        key = f"{prefix}/{f.relative_to(receipts).as_posix()}"
        client.put_object(Bucket=BUCKET, Key=key, Body=f.read_bytes())
    return S3Sink(BUCKET, prefix)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return sealed_nightly_run(tmp_path_factory.mktemp("review24"))


@pytest.fixture()
def ev(pristine: dict, tmp_path: Path) -> dict:
    return copied_run(pristine, tmp_path / "c")


def problems(sink: S3Sink, run_id: str, root: Path | None = None) -> list[dict]:
    """verify_run's problems: --evidence-only, or with store and journal under ``root``."""
    if root is None:
        return verify_run(sink, None, None, run_id, evidence_only=True).problems
    store = SqliteStore(root / "memlife.db")
    try:
        return verify_run(sink, store, open_journal(store), run_id).problems
    finally:
        store.close()


def codes(found: list[dict]) -> set[str]:
    return {p["code"] for p in found}


@pytest.fixture()
def crashed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """A run killed after 10 receipted deletes: its failure receipt is sealed (Parquet,
    dataset part-0); ``rerun()`` completes it (receipt.2.json, operations.2.parquet)."""
    base = tmp_path / "crash"
    base.mkdir()
    monkeypatch.setenv("MEMLIFE_HOME", str(base))
    seed(base / "memlife.db")
    cfg = RunConfig(dry_run=False, now=CUTOFF, store=f"sqlite:///{base / 'memlife.db'}",
                    receipts=f"file://{base / 'receipts'}")  # fmt: skip
    with pytest.raises(InjectedFault), inject("after_receipt", skip=9):
        run_local(cfg)
    folder = next((base / "receipts" / "runs").rglob("receipt.json")).parent
    return {"root": base, "folder": folder, "run_id": folder.name, "rerun": lambda: run_local(cfg)}


# -- F1 ----------------------------------------------------------------------------------------
def test_forged_completion_after_a_sealed_failure_fails_evidence_only(crashed: dict) -> None:
    """Old code: a correctly chained 'success' with zero counts and no Parquet appended
    after a real sealed failure verified clean with --evidence-only."""
    folder = crashed["folder"]
    fail_bytes = (folder / "receipt.json").read_bytes()
    fail = json.loads(fail_bytes)
    assert fail["status"] == "failure" and fail["evidence"]["operations"]["count"] > 0
    forged = {k: v for k, v in fail.items() if k not in ("digest", "error")}
    forged.update(status="success", counts={k: 0 for k in fail["counts"]}, journal_counts={},
                  evidence={**fail["evidence"], "parquet_key": None, "parquet_sha256": None,
                            "operations": {"count": 0, "chain_sha256": "0" * 64, "over": "RECEIPTED"},
                            "previous_receipt_sha256": sha256(fail_bytes)})  # fmt: skip
    forged["digest"] = receipt_digest(forged)
    (folder / "receipt.2.json").write_text(json.dumps(forged))
    found = problems(to_s3(crashed["root"] / "receipts"), crashed["run_id"])
    dropped = [p for p in found if p["code"] == "COMPLETION_DROPS_OPERATIONS"]
    assert (
        len([p for p in dropped if p.get("operation_id")])
        == fail["evidence"]["operations"]["count"]
    )
    assert any(p.get("count") == "deleted" for p in dropped), dropped
    assert all(p["key"].endswith("/receipt.2.json") for p in dropped)


# -- F9 (and F1's legitimate path) -------------------------------------------------------------
def test_crash_then_rerun_history_has_every_delete_and_verifies_clean(crashed: dict) -> None:
    """Old code: the dataset partition was create-only, kept the crashed attempt's rows and
    `receipts history` missed the rerun's deletes."""
    summary = crashed["rerun"]()
    assert summary.status == "success"
    sink = to_s3(crashed["root"] / "receipts")
    parts = sorted(k for k in sink.list(f"{PREFIX}/") if crashed["run_id"] in k)
    assert [p.rsplit("/", 1)[1] for p in parts] == ["part-0.parquet", "part-001.parquet"]
    deletes = [
        json.loads(p.read_text()) for p in (crashed["root"] / "receipts/operations").iterdir()
    ]
    deletes = [d for d in deletes if d["outcome"] == "deleted"]
    assert len(deletes) > 10
    for d in deletes:
        hist = record_history(sink, d["record_id"])
        assert [h["outcome"] for h in hist] == ["deleted"], (d["record_id"], hist)
    assert problems(sink, crashed["run_id"]) == []  # the rerun kept every receipted row
    assert problems(sink, crashed["run_id"], crashed["root"]) == []


# -- F2 ----------------------------------------------------------------------------------------
def _op_not_json(ev: dict) -> str:
    op = sorted((ev["root"] / "receipts" / "operations").iterdir())[0]
    op.write_bytes(b"\x00garbage")
    return f"operations/{op.name}"


def _parquet_corrupt(ev: dict) -> str:
    p = ev["folder"] / "operations.parquet"
    body = bytearray(p.read_bytes())
    body[-10:] = b"0123456789"
    p.write_bytes(bytes(body))
    return "operations.parquet"


def _manifest_not_json(ev: dict) -> str:
    (ev["folder"] / "manifest.json").write_text("{not json")
    return "manifest.json"


def _counts_a_list(ev: dict) -> str:
    doc = json.loads(ev["receipt"].read_text())
    doc["counts"] = []
    doc["digest"] = receipt_digest(doc)
    ev["receipt"].write_text(json.dumps(doc))
    return "receipt.json"


def _manifest_deleted(ev: dict) -> str:
    (ev["folder"] / "manifest.json").unlink()
    return "manifest.json"


@pytest.mark.parametrize("edit,code", [
    (_op_not_json, "RECEIPT_UNREADABLE"), (_parquet_corrupt, "PARQUET_UNREADABLE"),
    (_manifest_not_json, "MANIFEST_UNREADABLE"), (_counts_a_list, "RECEIPT_COUNTS_INVALID"),
    (_manifest_deleted, "MANIFEST_MISSING"),
])  # fmt: skip
def test_malformed_evidence_is_a_named_problem_not_a_crash(ev: dict, edit, code: str) -> None:  # type: ignore[no-untyped-def]
    """Old code: a bare exception (JSONDecodeError, ArrowInvalid, AttributeError), or, for a
    deleted manifest, RUN_NOT_FOUND and a run missing from `receipts list`."""
    where = edit(ev)
    sink = to_s3(ev["root"] / "receipts")
    for found in (problems(sink, ev["run_id"]), problems(sink, ev["run_id"], ev["root"])):
        named = [p for p in found if p["code"] == code]
        assert named and any(str(p.get("key", "")).endswith(where) for p in named), found
        assert "RUN_NOT_FOUND" not in codes(found)
    assert [r.run_id for r in runs_between(sink, None, None)] == [ev["run_id"]]
    assert find_run(sink, ev["run_id"]) is not None


# -- F3 ----------------------------------------------------------------------------------------
def test_deleted_receipt_is_not_sealed_again_and_its_parquet_is_reported(ev: dict) -> None:
    """Old code: the next night sealed the run failure/ABANDONED (verify then clean) and
    the original operations.parquet was named by no receipt, unreported."""
    from memlife.run_abandoned import seal_abandoned

    ev["receipt"].unlink()
    sink = to_s3(ev["root"] / "receipts")
    store = SqliteStore(ev["root"] / "memlife.db")
    try:
        sealed = seal_abandoned(sink, open_journal(store), store_url=f"sqlite:///{ev['root'] / 'memlife.db'}",
                                run_id="20261102T120000Z-apply-0000000000",
                                cutoff=CUTOFF + timedelta(days=1), now=CUTOFF + timedelta(days=1))  # fmt: skip
    finally:
        store.close()
    assert sealed == []
    run_keys = sorted(k.rsplit("/", 1)[1] for k in sink.list(f"runs/2026/11/01/{ev['run_id']}/"))
    assert "receipt.json" not in run_keys and "operations.2.parquet" not in run_keys
    found = problems(sink, ev["run_id"])
    assert {"RUN_RECEIPT_MISSING", "PARQUET_NOT_SEALED"} <= codes(found), found


def test_a_parquet_no_receipt_names_is_reported_beside_sealed_ones(ev: dict) -> None:
    """Old code: PARQUET_NOT_SEALED only when no receipt was sealed at all."""
    shutil.copy(ev["folder"] / "operations.parquet", ev["folder"] / "operations.2.parquet")
    found = problems(to_s3(ev["root"] / "receipts"), ev["run_id"])
    assert [p for p in found if p["code"] == "PARQUET_NOT_SEALED"] == [
        {"code": "PARQUET_NOT_SEALED", "key": f"{ev['folder'].relative_to(ev['root'] / 'receipts').as_posix()}/operations.2.parquet"}
    ], found  # fmt: skip


# -- F7 ----------------------------------------------------------------------------------------
def test_reused_record_id_is_a_note_and_restored_content_still_fails(ev: dict) -> None:
    """Old code: DELETED_RECORD_PRESENT for good once a deterministic id was written again."""
    op = next(d for d in (json.loads(p.read_text())
                          for p in sorted((ev["root"] / "receipts" / "operations").iterdir()))
              if d["outcome"] == "deleted")  # fmt: skip
    sink = to_s3(ev["root"] / "receipts")
    store = SqliteStore(ev["root"] / "memlife.db")
    try:
        new = MemoryRecord(id=op["record_id"], actor_id=op["scope"]["actor_id"],
                           namespace=op["scope"]["namespace"], memory_type="semantic",
                           content="A new fact, written a week after the old one expired.",
                           created_at=utcnow() + timedelta(days=7))  # fmt: skip
        store.put_many([new])
        v = verify_run(sink, store, open_journal(store), ev["run_id"])
        assert v.ok, v.problems
        assert [(n["code"], n["record_id"]) for n in v.notes] == [
            ("RECORD_ID_REUSED", op["record_id"])
        ]
        assert v.as_json()["notes"] == v.notes
    finally:
        store.close()


def test_deleted_record_back_with_its_old_content_still_fails(
    ev: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restore of the removed content under the id (a later created_at claimed) is no
    reuse: still DELETED_RECORD_PRESENT. (The removed content is not in the receipts, so
    the hash of the content put back is made to equal the removed one: the journal's, which
    the receipt holds keyed since session 29.)"""
    import memlife.model as model

    ops = [json.loads(p.read_text()) for p in (ev["root"] / "receipts" / "operations").iterdir()]
    op = next(d for d in ops if d["outcome"] == "deleted" and d.get("content_sha256"))
    store = SqliteStore(ev["root"] / "memlife.db")
    removed = open_journal(store).get(op["operation_id"]).content_sha256
    real = model.content_sha256
    monkeypatch.setattr(model, "content_sha256",
                        lambda text: removed if text == "restored" else real(text))  # fmt: skip
    sink = to_s3(ev["root"] / "receipts")
    try:
        store.put_many([MemoryRecord(id=op["record_id"], actor_id=op["scope"]["actor_id"],
                                     namespace=op["scope"]["namespace"], memory_type="semantic",
                                     content="restored", created_at=utcnow() + timedelta(days=7))])  # fmt: skip
        v = verify_run(sink, store, open_journal(store), ev["run_id"])
    finally:
        store.close()
    assert "DELETED_RECORD_PRESENT" in codes(v.problems) and not v.notes


# -- F5 ----------------------------------------------------------------------------------------
def test_report_page_masks_actor_ids_with_slashes_and_session_ids(tmp_path: Path) -> None:
    """Old code: only a segment equal to the actor id became '*'."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from memlife.report import SCHEMA

    assert (
        namespace_pattern("acme/alice@example.com", "/tenants/acme/alice@example.com/prefs")
        == "/tenants/*/prefs"
    )
    assert (
        namespace_pattern("u-7", "/strategies/s-1/actors/u-7/sessions/sess-4f2a")
        == "/strategies/s-1/actors/*/sessions/*"
    )
    assert namespace_pattern("u-1", "/users/u-1/prefs") == "/users/*/prefs"
    rows = [{"id": "m-1", "actor_id": "acme/alice@example.com", "namespace": "/tenants/acme/alice@example.com/prefs",
             "action": "delete_expired", "reasons": ["HARD_EXPIRED"], "score": None},
            {"id": "m-2", "actor_id": "u-7", "namespace": "/strategies/s-1/actors/u-7/sessions/sess-4f2a-intake",
             "action": "retain", "reasons": ["SCORE_OK"], "score": 0.9}]  # fmt: skip
    p = tmp_path / "r.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), p)
    html = render({"run_id": "r", "mode": "apply", "status": "success", "counts": {}, "lifecycle": {}},
                  breakdown(p), [])  # fmt: skip
    for secret in ("alice@example.com", "acme/alice", "sess-4f2a-intake", "u-7"):
        assert secret not in html, secret
