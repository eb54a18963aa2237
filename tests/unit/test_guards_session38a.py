"""Guards left untested by the thirty-second audit (session 38): receipts verification
attacked as a tamperer would (memlife/evidence.py, evidence_dataset.py, evidence_journal.py,
evidence_deferrals.py, evidence_key.py, and `memlife receipts verify`).

Each test edits one piece of a sealed run's evidence (a receipt, the Parquet beside it, a
deferral receipt, the store's run secret) and expects verify to fail naming what changed.
Four real bugs the audit found, fixed in session 38 (their tests failed on the code before):
verify crashed on, or passed, a tampered file.
"""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from memlife.audit import FileSink
from memlife.cli import app
from memlife.evidence import receipt_digest, sha256
from memlife.evidence_key import keyed
from memlife.journal import open_journal
from memlife.review import find_run
from memlife.stores.sqlite import SqliteStore
from tests.support.evidence import copied_run, sealed_nightly_run, verify_problems
from tests.support.records import good

runner = CliRunner()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return sealed_nightly_run(tmp_path_factory.mktemp("s38a"))


@pytest.fixture()
def ev(pristine: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    run = copied_run(pristine, tmp_path / "c")
    root = run["root"]
    return run | {"sink": FileSink(root / "receipts"), "parquet": run["folder"] / "operations.parquet",
                  "ops": root / "receipts" / "operations"}  # fmt: skip


def codes(ev: dict[str, Any], evidence_only: bool) -> set[tuple[str, Any]]:
    return {(p["code"], p.get("field")) for p in verify_problems(ev, evidence_only)}


def rows(ev: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = pq.read_table(ev["parquet"]).to_pylist()
    return out


def receipted(ev: dict[str, Any]) -> Path:
    oid = next(r["operation_id"] for r in rows(ev) if r["state"] == "RECEIPTED")
    return Path(ev["ops"]) / f"{oid}.json"


def deferred_erasure(home: Path, tmp_path: Path) -> tuple[str, Path]:
    """An erasure a legal hold deferred: its run id and its deferral receipt."""
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1", retention_class="legal_hold")) + "\n")
    assert runner.invoke(app, ["import", str(src)]).exit_code == 0
    res = runner.invoke(app, ["erase", "--actor", "u-1", "--id", "m-1", "--yes", "--json"])
    assert res.exit_code == 0, res.output
    (receipt,) = (home / "receipts" / "deferrals").glob("*.json")
    return json.loads(res.stdout)["run_id"], receipt


def cli_problems(run_id: str, *flags: str) -> set[tuple[str, Any]]:
    res = runner.invoke(app, ["receipts", "verify", run_id, "--json", *flags])
    return {(p["code"], p.get("field")) for p in json.loads(res.stdout)["problems"]}


# --- the manifest, the keyed content hash --------------------------------------------------


def test_one_byte_of_the_manifest_edited_is_named(ev: dict[str, Any]) -> None:
    """Attacks `sha256(manifest) != ev.get("manifest_sha256")` in
    `memlife/evidence.py::_verify_receipt` (no test named MANIFEST_DIGEST_MISMATCH): the
    manifest still parses and names its run, only its policy version changed."""
    manifest = ev["folder"] / "manifest.json"
    body = manifest.read_bytes()
    doc = json.loads(body)
    doc["policy_version"] = str(doc.get("policy_version")) + "x"
    manifest.write_text(json.dumps(doc))
    assert manifest.read_bytes() != body
    for evidence_only in (True, False):
        assert ("MANIFEST_DIGEST_MISMATCH", None) in codes(ev, evidence_only)


def test_receipts_carry_the_content_hash_keyed_by_the_stores_own_secret(
    ev: dict[str, Any],
) -> None:
    """Attacks `hmac.new(secret, ...)` in `memlife/evidence_key.py::keyed` (a key that is
    not the store's run secret, e.g. a constant, keys seal and verify alike and no earlier
    test saw it): each receipt's content hash is HMAC(run secret, the journal's sha256)."""
    store = SqliteStore(ev["root"] / "memlife.db")
    try:
        journal = open_journal(store)
        secret = journal.run_secret()
        checked = 0
        for path in sorted(Path(ev["ops"]).glob("*.json")):
            doc = json.loads(path.read_text())
            op = journal.get(doc["operation_id"])
            assert op is not None
            if op.content_sha256 is None:
                continue
            assert doc["content_sha256"] == keyed(op.content_sha256, secret)
            assert doc["content_sha256"] != keyed(op.content_sha256, b"")
            checked += 1
        assert checked > 0
    finally:
        store.close()


@pytest.mark.parametrize("secret", ["changed", "absent"])
def test_run_secret_changed_or_absent_is_a_content_mismatch(
    ev: dict[str, Any], secret: str
) -> None:
    """Attacks `as_written(o.content_sha256, ...)` in
    `memlife/evidence_journal.py::verify_journal`: with the store's run secret replaced (or
    deleted, so verify makes a new one) the keyed content hashes no longer tie each receipt
    to its journaled record, and verify against the store says so (evidence alone cannot)."""
    db = sqlite3.connect(ev["root"] / "memlife.db")
    try:
        if secret == "changed":
            db.execute("UPDATE secrets SET value = ? WHERE name = 'run'", (b"k" * 32,))
        else:
            db.execute("DELETE FROM secrets WHERE name = 'run'")
        db.commit()
    finally:
        db.close()
    assert codes(ev, evidence_only=True) == set()
    assert ("RECEIPT_FIELD_MISMATCH", "content_sha256") in codes(ev, evidence_only=False)


# --- tampered files that verify must name (REAL BUGS: it crashes or passes) ---------------


@pytest.mark.parametrize("only", [(), ("--evidence-only",)])
@pytest.mark.parametrize("forged", ["prefix", "garbage"])
def test_deferral_receipt_content_hash_rewritten_is_named(
    home: Path, tmp_path: Path, forged: str, only: tuple[str, ...]
) -> None:
    """Attacks `_other_form` in `memlife/evidence.py` as `verify_deferrals` uses it: one
    byte of the deferral receipt's `hmac-sha256:` prefix edited (or the hash replaced by
    any string) leaves verify saying "verified", both with the store and evidence-only."""
    run_id, receipt = deferred_erasure(home, tmp_path)
    assert cli_problems(run_id, *only) == set()
    doc = json.loads(receipt.read_text())
    value = doc["content_sha256"]
    assert value.startswith("hmac-sha256:")
    doc["content_sha256"] = value.replace("sha256", "sha257", 1) if forged == "prefix" else "x"
    receipt.write_text(json.dumps(doc))
    assert ("DEFERRAL_FIELD_MISMATCH", "content_sha256") in cli_problems(run_id, *only)


def test_a_plain_hash_put_in_a_deferral_receipt_is_named_against_the_journal(
    home: Path, tmp_path: Path
) -> None:
    """A plain sha256 where the sealed row is keyed reads, to the bucket alone, as a hash
    written before keys (it cannot tell); verify with the store compares the deferral
    receipt with the journal, as it does operation receipts, and names it."""
    run_id, receipt = deferred_erasure(home, tmp_path)
    doc = json.loads(receipt.read_text())
    doc["content_sha256"] = "0" * 64
    receipt.write_text(json.dumps(doc))
    assert ("DEFERRAL_FIELD_MISMATCH", "content_sha256") in cli_problems(run_id)


def test_operation_receipt_scope_of_the_wrong_type_is_named_not_a_crash(
    ev: dict[str, Any],
) -> None:
    """Attacks `scope = doc.get("scope") or {}` in `memlife/evidence.py::_mismatched`, as
    `verify_journal` calls it outside any guard: verify against the store raises
    AttributeError ("error: AttributeError" from the CLI, no report); evidence-only names
    the RUN receipt unreadable and drops every row, never the operation receipt."""
    path = receipted(ev)
    doc = json.loads(path.read_text())
    path.write_text(json.dumps(doc | {"scope": "u-1/default"}))
    key, oid = f"operations/{path.name}", doc["operation_id"]
    for evidence_only in (True, False):
        found = verify_problems(ev, evidence_only)
        named = [p for p in found if p.get("key") == key
                 or (p["code"] == "RECEIPT_FIELD_MISMATCH" and p.get("operation_id") == oid)]  # fmt: skip
        assert named, found


@pytest.mark.parametrize("evidence_only", [True, False])
def test_parquet_rewritten_without_its_action_column_is_named_not_a_crash(
    ev: dict[str, Any], evidence_only: bool
) -> None:
    """Attacks `_ROW_COLUMNS` in `memlife/evidence.py::_read_rows` (it lacks `action`,
    which `evidence_deferrals.verify_deferrals` and `review.verify_run` index): a Parquet
    rewritten without that column crashes `receipts verify` (KeyError) where a changed
    Parquet must be PARQUET_DIGEST_MISMATCH / PARQUET_UNREADABLE naming its key."""
    table = pq.read_table(ev["parquet"])
    pq.write_table(table.drop(["action"]), ev["parquet"])
    found = verify_problems(ev, evidence_only)
    assert {p["code"] for p in found} & {"PARQUET_DIGEST_MISMATCH", "PARQUET_UNREADABLE"}


# --- attacks verify already names (held here so a regression shows) ----------------------


def test_truncated_receipt_parquet_and_operation_receipt_are_each_named(
    ev: dict[str, Any],
) -> None:
    """Attacks `loads` / `_read_rows` in `memlife/evidence.py::verify_evidence`: each
    truncated file is a problem naming its key, never a crash, in both modes."""
    op = receipted(ev)
    for path, code in ((ev["parquet"], "PARQUET_UNREADABLE"), (op, "RECEIPT_UNREADABLE"),
                       (ev["receipt"], "RECEIPT_UNREADABLE")):  # fmt: skip
        body = path.read_bytes()
        path.write_bytes(body[: len(body) // 2])
        for evidence_only in (True, False):
            found = verify_problems(ev, evidence_only)
            assert any(p["code"] == code and str(p.get("key", "")).endswith(path.name)
                       for p in found), (path.name, found)  # fmt: skip
        path.write_bytes(body)
    assert codes(ev, evidence_only=False) == set()


def test_run_receipt_digest_field_of_the_wrong_type_is_named(ev: dict[str, Any]) -> None:
    """Attacks `receipt_digest(receipt) != receipt["digest"]` and the `isinstance` checks of
    `memlife/evidence.py::_verify_receipt`: digest fields of the wrong type (digest an int,
    the evidence's operations a string, recomputed digest) are named, never a crash."""
    doc = json.loads(ev["receipt"].read_text())
    ev["receipt"].write_text(json.dumps(doc | {"digest": 5}))
    assert ("RECEIPT_DIGEST_MISMATCH", None) in codes(ev, evidence_only=True)
    forged = doc | {"evidence": doc["evidence"] | {"operations": "x", "manifest_sha256": 5}}
    forged["digest"] = receipt_digest(forged)
    ev["receipt"].write_text(json.dumps(forged))
    for evidence_only in (True, False):
        found = codes(ev, evidence_only)
        assert {("OPERATIONS_DIGEST_MISMATCH", None), ("MANIFEST_DIGEST_MISMATCH", None)} <= found


def test_parquet_one_cell_rewritten_is_named_against_every_witness(ev: dict[str, Any]) -> None:
    """Attacks `sha256(body) != ev.get("parquet_sha256")` in
    `memlife/evidence.py::_verify_receipt` and the row/receipt comparison: one row's
    record id rewritten in the Parquet is a digest mismatch and a field mismatch."""
    table = pq.read_table(ev["parquet"])
    data = table.to_pylist()
    i = next(n for n, r in enumerate(data) if r["state"] == "RECEIPTED")
    data[i]["record_id"] = data[i]["record_id"] + "x"
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(data, schema=table.schema), buf)
    ev["parquet"].write_bytes(buf.getvalue())
    assert (
        sha256(buf.getvalue())
        != json.loads(ev["receipt"].read_text())["evidence"]["parquet_sha256"]
    )
    for evidence_only in (True, False):
        found = codes(ev, evidence_only)
        assert {("PARQUET_DIGEST_MISMATCH", None), ("RECEIPT_FIELD_MISMATCH", "record_id")} <= found


def test_legacy_runs_dataset_part_truncated_is_named(ev: dict[str, Any]) -> None:
    """Attacks `v.problem("DATASET_UNREADABLE", ...)` in `memlife/evidence_dataset.py::_part`
    (no test named it): a run sealed before `dataset_key` (its receipt as such a run's was,
    digest recomputed) is checked by content, and a part file that no longer parses is
    named, not skipped as absent."""
    doc = json.loads(ev["receipt"].read_text())
    legacy = {k: v for k, v in doc["evidence"].items() if not k.startswith("dataset_")}
    assert legacy != doc["evidence"]
    old = doc | {"evidence": legacy}
    old["digest"] = receipt_digest(old)
    ev["receipt"].write_text(json.dumps(old))
    assert codes(ev, evidence_only=True) == set()
    (part,) = [k for k in ev["sink"].list("dataset/") if k.endswith(".parquet")]
    path = Path(ev["root"]) / "receipts" / part
    path.write_bytes(path.read_bytes()[:40])
    for evidence_only in (True, False):
        found = verify_problems(ev, evidence_only)
        assert any(p["code"] == "DATASET_UNREADABLE" and p.get("key") == part for p in found), found


def test_unsealed_failure_appended_after_a_sealed_failure_is_named(ev: dict[str, Any]) -> None:
    """Attacks `if receipt.get("status") == "failure" and ev is None: continue` in
    `memlife/evidence.py::verify_evidence`, with keys only added (what S3 Object Lock
    allows): after a run's sealed failure receipt, a receipt.2.json with no evidence and
    its counts set to zero verifies clean in both modes, and `find_run` (what `receipts
    show` prints) then reported the forged counts (deleted 0 where the seal says 40)."""
    doc = json.loads(ev["receipt"].read_text())
    failed = {k: v for k, v in doc.items() if k != "digest"}
    failed |= {"status": "failure", "error": "RuntimeError"}
    failed["digest"] = receipt_digest(failed)
    ev["receipt"].write_text(json.dumps(failed))  # the run as a sealed failure leaves it
    assert codes(ev, evidence_only=True) == set()
    assert codes(ev, evidence_only=False) == set()
    forged = {k: v for k, v in failed.items() if k not in ("evidence", "digest")}
    forged |= {"counts": dict.fromkeys(doc["counts"], 0), "error": "Nothing"}
    (ev["folder"] / "receipt.2.json").write_text(json.dumps(forged))
    run = find_run(ev["sink"], ev["run_id"])
    assert run is not None and run.receipt is not None
    assert run.receipt["counts"]["deleted"] == doc["counts"]["deleted"] > 0  # the seal's, shown
    for evidence_only in (True, False):
        assert ("EVIDENCE_UNSEALED", None) in codes(ev, evidence_only)


@pytest.mark.parametrize("edit", ["deleted", "demoted"])
def test_journal_row_of_a_receipted_change_deleted_or_demoted_is_named(
    ev: dict[str, Any], edit: str
) -> None:
    """Attacks `journaled is None or journaled.state is not OpState.RECEIPTED` in
    `memlife/review.py::verify_run`: one journal row of a receipted delete removed from the
    store's journal (or set back to APPLIED) leaves a receipt no journaled change backs."""
    path = receipted(ev)
    oid = json.loads(path.read_text())["operation_id"]
    db = sqlite3.connect(ev["root"] / "memlife.db")
    try:
        if edit == "deleted":
            db.execute("DELETE FROM operations WHERE operation_id = ?", (oid,))
        else:
            db.execute("UPDATE operations SET state = 'APPLIED' WHERE operation_id = ?", (oid,))
        assert db.total_changes == 1
        db.commit()
    finally:
        db.close()
    assert codes(ev, evidence_only=True) == set()
    found = verify_problems(ev, evidence_only=False)
    assert any(
        p["code"] == "RECEIPT_WITHOUT_JOURNALED_CHANGE" and p.get("operation_id") == oid
        for p in found
    ), found


def test_receipt_naming_no_parquet_while_counting_changes_is_named(ev: dict[str, Any]) -> None:
    """Attacks `if not parquet_key and changed` in `memlife/evidence.py::_verify_receipt`:
    a receipt whose evidence names no Parquet (digest recomputed) while its counts say it
    deleted records is OPERATIONS_PARQUET_MISSING, not only a count mismatch."""
    doc = json.loads(ev["receipt"].read_text())
    assert doc["counts"]["deleted"] > 0
    forged = doc | {"evidence": doc["evidence"] | {"parquet_key": None, "parquet_sha256": None}}
    forged["digest"] = receipt_digest(forged)
    ev["receipt"].write_text(json.dumps(forged))
    for evidence_only in (True, False):
        assert ("OPERATIONS_PARQUET_MISSING", None) in codes(ev, evidence_only)


def test_completed_receipt_without_evidence_is_named_unsealed(ev: dict[str, Any]) -> None:
    """Attacks `receipt.get("status") == "failure" and ev is None` in
    `memlife/evidence.py::verify_evidence` (no test named EVIDENCE_UNSEALED): a success
    receipt stripped of its evidence and digest is checked as unsealed, never skipped as a
    failure that sealed nothing."""
    doc = json.loads(ev["receipt"].read_text())
    ev["receipt"].write_text(
        json.dumps({k: v for k, v in doc.items() if k not in ("evidence", "digest")})
    )
    for evidence_only in (True, False):
        assert ("EVIDENCE_UNSEALED", None) in codes(ev, evidence_only)


def test_counts_of_the_wrong_type_are_named_not_a_crash(ev: dict[str, Any]) -> None:
    """Attacks `all(isinstance(n, int) for n in counts.values())` in
    `memlife/evidence.py::_counts`: a count written as a string (digest recomputed) is
    RECEIPT_COUNTS_INVALID, never compared with an int (a TypeError in `_keeps_earlier`)."""
    doc = json.loads(ev["receipt"].read_text())
    forged = doc | {"counts": doc["counts"] | {"deleted": str(doc["counts"]["deleted"])}}
    forged["digest"] = receipt_digest(forged)
    ev["receipt"].write_text(json.dumps(forged))
    for evidence_only in (True, False):
        assert ("RECEIPT_COUNTS_INVALID", None) in codes(ev, evidence_only)
