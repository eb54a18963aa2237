"""Guards a mutation audit found unattacked (session 34, round e2: receipts and their
verification, the access log that feeds nightly scoring): each test holds one guarantee that
a named guard in memlife/ alone keeps, and fails when that guard is removed or loosened.
Real components: the Parquet access ledger over CloudTrail log files on disk, the SQLite
store and its journal, the file sink, a real sealed nightly run (tests/support/evidence.py)."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from memlife.audit import FileSink
from memlife.evidence import chain, counts_from_rows, receipt_digest, sha256
from memlife.evidence_key import keyed
from memlife.journal import Operation, OpKind, OpState, Outcome, open_journal
from memlife.ledger import AccessLedger
from memlife.receipts import operation_key, write_operation_receipt
from memlife.receipts_dataset import dataset_key
from memlife.receipts_history import record_history
from memlife.run_receipts import put_run_receipt, run_receipts
from memlife.stores.sqlite import SqliteStore
from tests.support.evidence import copied_run, sealed_nightly_run
from tests.support.evidence import verify_problems as problems
from tests.support.lifecycle import CUTOFF

T0 = datetime(2026, 11, 30, 12, tzinfo=UTC)
NAME = "111_CloudTrail_us-east-1_20261130T0000Z_x.json.gz"


def _get(rid: str, when: str, ns: str = "/users/u-2/preferences") -> dict[str, Any]:
    return {
        "eventSource": "bedrock-agentcore.amazonaws.com", "eventName": "GetMemoryRecord",
        "eventTime": when, "requestParameters": {"memoryRecordId": rid},
        "responseElements": {"memoryRecord": {"memoryRecordId": rid, "namespaces": [ns]}},
    }  # fmt: skip


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return sealed_nightly_run(tmp_path_factory.mktemp("pristine"))


@pytest.fixture
def ev(pristine: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """A copy of one sealed nightly run (deletes included) to tamper with."""
    run = copied_run(pristine, tmp_path / "c")
    return run | {"sink": FileSink(run["root"] / "receipts"),
                  "ops": run["root"] / "receipts" / "operations"}  # fmt: skip


def rows(ev: dict[str, Any]) -> list[dict[str, Any]]:
    return pq.read_table(ev["folder"] / "operations.parquet").to_pylist()


def reseal(ev: dict[str, Any]) -> None:
    """Recompute the run receipt's chain and digest: a consistent rewrite of the bucket."""
    doc = json.loads(ev["receipt"].read_text())
    n, head, _ = chain(
        ev["sink"], [r["operation_id"] for r in rows(ev) if r["state"] == "RECEIPTED"]
    )
    doc["evidence"]["operations"].update(count=n, chain_sha256=head)
    doc["digest"] = receipt_digest(doc)
    ev["receipt"].write_text(json.dumps(doc))


def _log(path: Path, *events: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(json.dumps({"Records": list(events)}).encode()))
    return path


# -- 1. cloudtrail.py _event_time: a read without a time zone is no read -------------------
def test_a_read_whose_time_names_no_zone_is_skipped_not_taken_as_utc(tmp_path: Path) -> None:
    """An eventTime without an offset says no instant (CloudTrail always writes ``Z``): it is
    skipped as bad_event_time, and the rest of the file still counts."""
    trail = tmp_path / "trail"
    _log(trail / NAME, _get("m-1", "2026-11-30T00:00:00"), _get("m-2", "2026-11-30T00:00:00Z"))
    ledger = AccessLedger(tmp_path / "ledger")
    report = ledger.ingest_cloudtrail(trail)
    assert report.skipped["bad_event_time"] == 1
    assert (report.events, report.rows) == (2, 1)
    ledger.flush()
    assert ledger.read().column("record_id").to_pylist() == ["m-2"]


# -- 2. ledger_merge.py reads_by_record: reads are grouped by actor first --------------------
def test_two_actors_reads_of_one_id_interleaved_in_time_are_each_counted(tmp_path: Path) -> None:
    """Two tenants' records may share an id; reads of it alternating between them in time
    are still each tenant's own: every read counted, none credited to the other."""
    ledger = AccessLedger(tmp_path / "ledger")
    for minutes, actor in ((1, "u-a"), (2, "u-b"), (3, "u-a"), (4, "u-b"), (5, "u-a")):
        ledger.append(actor, f"/users/{actor}/facts", "m-1", at=T0 + timedelta(minutes=minutes))
    ledger.flush()
    stats = ledger.actor_stats(until=T0 + timedelta(hours=1))
    assert (stats[("u-a", "m-1")].count, stats[("u-b", "m-1")].count) == (3, 2)
    assert stats[("u-a", "m-1")].last == T0 + timedelta(minutes=5)
    assert stats[("u-b", "m-1")].last == T0 + timedelta(minutes=4)


# -- 3. cloudtrail.py read_log: a Records that is no list is a bad file, not marked read ----
def test_a_log_whose_records_is_an_object_is_named_and_read_again_later(tmp_path: Path) -> None:
    """A log file whose ``Records`` is an object is malformed as a whole: named in
    bad_files, its entries never taken, and the file not marked ingested (read again)."""
    trail = tmp_path / "trail"
    bad = trail / NAME
    bad.parent.mkdir(parents=True)
    bad.write_bytes(json.dumps({"Records": {"0": _get("m-1", "2026-11-30T00:00:00Z")}}).encode())
    _log(trail / "222_CloudTrail_y.json.gz", _get("m-2", "2026-11-30T00:00:00Z"))
    ledger = AccessLedger(tmp_path / "ledger")
    report = ledger.ingest_cloudtrail(trail)
    assert len(report.bad_files) == 1 and "Records is dict" in report.bad_files[0]
    assert (report.files, report.rows, report.skipped.get("bad_event", 0)) == (1, 1, 0)
    again = ledger.ingest_cloudtrail(trail)
    assert (again.already_ingested, len(again.bad_files)) == (1, 1)


# -- 4. evidence.py put_run_receipt: nothing follows a completed run receipt ------------------
def test_a_receipt_written_after_a_completed_one_is_not_a_second_receipt(tmp_path: Path) -> None:
    """Once a run's receipt says it finished (success, blocked), a later put (a rerun's
    failure, a second completion) writes nothing: the finished receipt's key comes back,
    and it alone stays. A failure or a partial failure is followed (run_receipts.FOLLOWED:
    its rerun finishes what it left, session 43)."""
    sink = FileSink(tmp_path / "receipts")
    for run, done in (("r-1", "success"), ("r-3", "blocked")):
        prefix = f"runs/2026/11/30/{run}"
        assert put_run_receipt(sink, prefix, {"run_id": run, "status": done}) == (
            f"{prefix}/receipt.json"
        )
        for status in ("failure", "partial_failure", "success"):
            assert put_run_receipt(sink, prefix, {"run_id": run, "status": status}) == (
                f"{prefix}/receipt.json"
            )
        assert [json.loads(b)["status"] for _, b in run_receipts(sink, prefix)] == [done]
    # a failure and a partial failure are followed: the rerun's receipt is the next one
    failed = "runs/2026/11/30/r-2"
    put_run_receipt(sink, failed, {"run_id": "r-2", "status": "failure"})
    assert put_run_receipt(sink, failed, {"run_id": "r-2", "status": "partial_failure"}) == (
        f"{failed}/receipt.2.json"
    )
    assert put_run_receipt(sink, failed, {"run_id": "r-2", "status": "success"}) == (
        f"{failed}/receipt.3.json"
    )
    assert put_run_receipt(sink, failed, {"run_id": "r-2", "status": "failure"}) == (
        f"{failed}/receipt.3.json"
    )


# -- 5. evidence.py FIELDS: an operation receipt names the run its Parquet row is in ------------
def test_an_operation_receipt_moved_to_another_run_is_a_field_mismatch(ev: dict[str, Any]) -> None:
    """An operation receipt rewritten to name another run (chain and digest recomputed) is
    RECEIPT_FIELD_MISMATCH on run_id, against the Parquet and against the journal."""
    oid = next(r["operation_id"] for r in rows(ev) if r["state"] == "RECEIPTED")
    path = ev["ops"] / f"{oid}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "run_id": "another-run"}))
    reseal(ev)
    only = problems(ev, evidence_only=True)
    assert {"RECEIPT_DIGEST_MISMATCH", "OPERATIONS_DIGEST_MISMATCH"}.isdisjoint(
        p["code"] for p in only
    )
    mismatch = {
        (p.get("field"), p.get("against")) for p in only if p["code"] == "RECEIPT_FIELD_MISMATCH"
    }
    assert mismatch == {("run_id", "parquet")}
    full = problems(ev, evidence_only=False)
    assert ("run_id", "journal") in {
        (p.get("field"), p.get("against")) for p in full if p["code"] == "RECEIPT_FIELD_MISMATCH"
    }


# -- 6. audit.py FileSink.put_new: a local receipt is written create-only ---------------------
def test_a_local_operation_receipt_is_never_overwritten(tmp_path: Path) -> None:
    """The ``file://`` sink, like S3's If-None-Match, refuses a second write of a receipt:
    a rerun's receipt of the same operation (another outcome) leaves the first as it was."""
    sink = FileSink(tmp_path / "receipts")
    op = Operation("op-1", "r-1", OpKind.delete, "u-1", "/users/u-1/facts", "m-1", ["TTL"],
                   "v1", state=OpState.RECEIPTED, outcome=Outcome.deleted, updated_at=T0)  # fmt: skip
    assert write_operation_receipt(sink, op) is True
    first = sink.get(operation_key("op-1"))
    again = Operation("op-1", "r-1", OpKind.delete, "u-1", "/users/u-1/facts", "m-1", ["TTL"],
                      "v1", state=OpState.RECEIPTED, outcome=Outcome.already_absent,
                      updated_at=T0 + timedelta(days=1))  # fmt: skip
    assert write_operation_receipt(sink, again) is False
    assert sink.get(operation_key("op-1")) == first
    assert json.loads(first or b"{}")["outcome"] == "deleted"


# -- 7. receipts_history.py partition_keys: --since and --until take their own day -------------
def test_a_record_history_from_the_runs_own_day_holds_its_operations(ev: dict[str, Any]) -> None:
    """A history asked from (or until) the very day a run's operations are filed under
    holds them: the bounds are inclusive, never a silent gap at either end."""
    rid = next(r["record_id"] for r in rows(ev) if r["state"] == "RECEIPTED")
    day = CUTOFF.date()
    gaps: list[dict[str, str]] = []
    whole = record_history(ev["sink"], rid, problems=gaps)
    assert whole and not gaps
    for since, until in ((day, day), (day, None), (None, day)):
        assert record_history(ev["sink"], rid, since=since, until=until) == whole
    assert record_history(ev["sink"], rid, since=day + timedelta(days=1)) == []


# -- 8. receipts_history.py _sealed: a run's seal is read only for its own dataset file ---------
def test_a_receipt_naming_another_runs_dataset_file_hides_nothing(ev: dict[str, Any]) -> None:
    """A run receipt rewritten to name a dataset file under another run id (one without this
    record's rows) is not followed: the history still reads the run's own file."""
    rid = next(r["record_id"] for r in rows(ev) if r["state"] == "RECEIPTED")
    whole = record_history(ev["sink"], rid)
    assert whole
    doc = json.loads(ev["receipt"].read_text())
    own = ev["root"] / "receipts" / doc["evidence"]["dataset_key"]
    table = pq.read_table(own)
    emptied = table.filter(pc.not_equal(table["record_id"], rid))
    forged = dataset_key("another-run", CUTOFF)
    path = ev["root"] / "receipts" / forged
    path.parent.mkdir(parents=True)
    pq.write_table(emptied, path)
    doc["evidence"].update(dataset_key=forged, dataset_sha256=sha256(path.read_bytes()))
    doc["digest"] = receipt_digest(doc)
    ev["receipt"].write_text(json.dumps(doc))
    assert record_history(ev["sink"], rid) == whole


# -- 9. evidence.py _keeps_earlier: a later seal counts no fewer changes than an earlier one ----
def test_a_completion_counting_one_change_fewer_than_its_failed_attempt_is_caught(
    ev: dict[str, Any],
) -> None:
    """A failed attempt sealed a delete as APPLIED; a forged completion after it leaves that
    row out and counts one delete fewer (consistent with its own rows): the bucket alone
    shows COMPLETION_DROPS_OPERATIONS on ``deleted``."""
    first = json.loads(ev["receipt"].read_text())
    parquet = ev["root"] / "receipts" / first["evidence"]["parquet_key"]
    had = rows(ev)
    gone = next(r for r in had if r["action"] == "delete" and r["state"] == "RECEIPTED")
    applied = [{**r, "state": "APPLIED"} if r is gone else r for r in had]
    pq.write_table(pa.Table.from_pylist(applied, schema=pq.read_schema(parquet)), parquet)
    n, head, _ = chain(
        ev["sink"], [r["operation_id"] for r in applied if r["state"] == "RECEIPTED"]
    )
    first.update(status="failure", counts={**first["counts"], **counts_from_rows(applied)})
    first["evidence"].update(parquet_sha256=sha256(parquet.read_bytes()),
                             operations={"count": n, "chain_sha256": head, "over": "RECEIPTED"})  # fmt: skip
    first["digest"] = receipt_digest(first)
    ev["receipt"].write_text(json.dumps(first))
    kept = [r for r in had if r is not gone]
    second = ev["folder"] / "operations.2.parquet"
    pq.write_table(pa.Table.from_pylist(kept, schema=pq.read_schema(parquet)), second)
    n, head, _ = chain(ev["sink"], [r["operation_id"] for r in kept if r["state"] == "RECEIPTED"])
    doc = {k: v for k, v in first.items() if k != "digest"}
    doc.update(status="success", counts={**first["counts"], **counts_from_rows(kept)})
    doc["evidence"] = {**first["evidence"], "parquet_key": str(second.relative_to(ev["root"] / "receipts")),
                       "parquet_sha256": sha256(second.read_bytes()),
                       "operations": {"count": n, "chain_sha256": head, "over": "RECEIPTED"},
                       "previous_receipt_sha256": sha256(ev["receipt"].read_bytes())}  # fmt: skip
    assert doc["counts"]["deleted"] == first["counts"]["deleted"] - 1
    (ev["folder"] / "receipt.2.json").write_text(json.dumps({**doc, "digest": receipt_digest(doc)}))
    dropped = [
        p for p in problems(ev, evidence_only=True) if p["code"] == "COMPLETION_DROPS_OPERATIONS"
    ]
    assert {p.get("count") for p in dropped} == {"deleted"}


def _journal_op(ev: dict[str, Any], oid: str) -> tuple[Operation, bytes]:
    store = SqliteStore(ev["root"] / "memlife.db")
    try:
        journal = open_journal(store)
        return next(o for o in journal.by_run(ev["run_id"]) if o.operation_id == oid), (
            journal.run_secret()
        )
    finally:
        store.close()


# -- 10. evidence_key.py keyed: the evidence hash is keyed by the store's run secret -----------
def test_a_receipts_content_hash_is_keyed_by_the_stores_secret(ev: dict[str, Any]) -> None:
    """The hash a receipt carries is HMAC(run secret, sha256): neither the plain hash nor an
    HMAC anyone can compute without the store's secret (a guessed memory's hash, keyed by
    nothing, must not match it)."""
    row = next(r for r in rows(ev) if r["state"] == "RECEIPTED" and r["content_sha256"])
    op, secret = _journal_op(ev, row["operation_id"])
    doc = json.loads((ev["ops"] / f"{row['operation_id']}.json").read_text())
    assert secret and op.content_sha256
    assert doc["content_sha256"] == keyed(op.content_sha256, secret) == row["content_sha256"]
    assert doc["content_sha256"] not in (op.content_sha256, keyed(op.content_sha256, b""))


# -- 11. evidence_key.py as_written: a receipt from before keys is compared in its own form ---
def test_a_plain_hash_receipt_from_before_keys_is_checked_against_the_journal(
    ev: dict[str, Any],
) -> None:
    """An operation receipt an attempt before keyed hashes wrote (plain sha256), sealed by a
    rerun's keyed Parquet, is compared with the journal in its own plain form: the true hash
    verifies, and a wrong one is RECEIPT_FIELD_MISMATCH on content_sha256 (the bucket alone,
    plain against keyed, cannot tell)."""
    row = next(r for r in rows(ev) if r["state"] == "RECEIPTED" and r["content_sha256"])
    op, _ = _journal_op(ev, row["operation_id"])
    path = ev["ops"] / f"{row['operation_id']}.json"
    doc = json.loads(path.read_text())
    for plain, expected in ((op.content_sha256, set()), ("0" * 64, {"content_sha256"})):
        path.write_text(json.dumps({**doc, "content_sha256": plain}))
        reseal(ev)
        assert not problems(ev, evidence_only=True)
        found = problems(ev, evidence_only=False)
        assert {p.get("field") for p in found if p["code"] == "RECEIPT_FIELD_MISMATCH"} == expected
