"""Audit 49m2 (session 49 mutation pass, part 2): the run's receipt chain and its own folder
(``memlife/run_receipts.py``: put_run_receipt's own-write check, check_own_folder,
completed_plan), each test killing a mutation the session's tests let live.

Real components: the receipts folder (``FileSink``) as the night writes it; receipts are
the JSON the run writes (``audit.dumps``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memlife.audit import FileSink, ReceiptWriteError, dumps
from memlife.run_receipts import (
    RUN_FIELDS,
    check_own_folder,
    completed_plan,
    put_run_receipt,
    receipt_key,
)

PREFIX = "runs/2026/11/01/20261101T000000Z-apply-0123456789"


def receipt(status: str, started: str, **kw: Any) -> dict[str, Any]:
    return {"run_id": "r", "status": status, "started_at": started, **kw}


def test_a_rerun_after_a_partial_failure_writes_its_own_receipt(tmp_path: Path) -> None:
    """receipt.json holds the first attempt's partial failure; the rerun's receipt (another
    body) follows it as receipt.2.json. Returning receipt.json because it is the last one
    (dropping the "our own bytes" half of the check) left the rerun unreceipted."""
    sink = FileSink(tmp_path)
    first = receipt("partial_failure", "2026-11-01T00:00:00+00:00")
    assert put_run_receipt(sink, PREFIX, first) == receipt_key(PREFIX, 1)
    rerun = receipt("success", "2026-11-01T01:00:00+00:00")
    assert put_run_receipt(sink, PREFIX, rerun) == receipt_key(PREFIX, 2)
    assert sink.get(receipt_key(PREFIX, 2)) == dumps(rerun)


def test_our_own_bytes_mid_chain_are_not_taken_as_our_lost_write(tmp_path: Path) -> None:
    """Only the LAST receipt can be this attempt's own write whose answer was lost: the same
    bytes earlier in the chain, with a receipt after them, are an earlier attempt's, and the
    receipt is written after the chain's end (receipt.3.json), not claimed at receipt.json."""
    sink = FileSink(tmp_path)
    same = receipt("failure", "2026-11-01T00:00:00+00:00", error="ABANDONED")
    assert sink.put_new(receipt_key(PREFIX, 1), dumps(same))
    assert sink.put_new(receipt_key(PREFIX, 2), dumps(receipt("partial_failure", "x")))
    assert put_run_receipt(sink, PREFIX, same) == receipt_key(PREFIX, 3)
    assert sink.get(receipt_key(PREFIX, 3)) == dumps(same)


def test_the_last_receipt_holding_our_bytes_is_our_lost_write(tmp_path: Path) -> None:
    """Control: the retried PUT of a lost answer is not written twice."""
    sink = FileSink(tmp_path)
    ours = receipt("partial_failure", "2026-11-01T00:00:00+00:00")
    assert sink.put_new(receipt_key(PREFIX, 1), dumps(ours))
    assert put_run_receipt(sink, PREFIX, ours) == receipt_key(PREFIX, 1)
    assert sink.get(receipt_key(PREFIX, 2)) is None


def manifest() -> dict[str, Any]:
    return {
        "run_id": "r", "run_key": "k", "mode": "apply_run", "policy_version": "p1",
        "cutoff": "2026-11-01T00:00:00+00:00", "scope": {"actors": ["u-1"], "namespaces": []},
        "store_identity": "sqlite:abc", "consolidator": "extractive", "eval_cases": None,
        "started_at": "2026-11-01T00:00:00+00:00", "memlife_version": "0",
    }  # fmt: skip


def test_an_unreadable_manifest_in_the_folder_is_not_taken_as_ours(tmp_path: Path) -> None:
    """A manifest.json that is not JSON (planted, or damaged) cannot be an earlier attempt's:
    the run is refused before any change, naming every field it could not match."""
    sink = FileSink(tmp_path)
    assert sink.put_new(f"{PREFIX}/manifest.json", b"not json {")
    with pytest.raises(ReceiptWriteError, match="not this run's manifest") as err:
        check_own_folder(sink, PREFIX, manifest(), created=False)
    assert all(f in str(err.value) for f in RUN_FIELDS)


@pytest.mark.parametrize("field", RUN_FIELDS)
def test_each_run_field_of_a_planted_manifest_is_checked(tmp_path: Path, field: str) -> None:
    """A manifest differing from this run's in any one run field is refused, naming it;
    a field that may differ between attempts (started_at, the version) is not checked."""
    sink = FileSink(tmp_path)
    planted = {**manifest(), field: "planted"}
    assert sink.put_new(f"{PREFIX}/manifest.json", dumps(planted))
    with pytest.raises(ReceiptWriteError, match=f"\\({field} differ"):
        check_own_folder(sink, PREFIX, manifest(), created=False)


def test_an_earlier_attempts_manifest_is_ours(tmp_path: Path) -> None:
    """Control: an earlier attempt's manifest (another start time and version) passes; its
    scope, written as JSON, reads back equal to the tuple-free dict this run holds."""
    sink = FileSink(tmp_path)
    earlier = {**manifest(), "started_at": "2026-11-01T03:00:00+00:00", "memlife_version": "1"}
    assert sink.put_new(f"{PREFIX}/manifest.json", dumps(earlier))
    ours = {**manifest(), "scope": {"actors": ("u-1",), "namespaces": ()}}  # as held in memory
    check_own_folder(sink, PREFIX, ours, created=False)


def test_a_completed_receipts_plan_is_read_only_where_its_figures_are_counts(
    tmp_path: Path,
) -> None:
    """completed_plan gives the completed receipt's planned actions and records found; a
    plan holding a figure that is no count is dropped whole, a records_found that is no
    count is None (never reported as the run's)."""
    sink = FileSink(tmp_path)
    assert completed_plan(sink, PREFIX) == ({}, None)
    assert sink.put_new(receipt_key(PREFIX, 1), dumps(receipt("partial_failure", "a")))
    planned = {"delete_expired": 2, "keep": 5}
    done = receipt("success", "b", planned=planned, records_found=7)
    assert sink.put_new(receipt_key(PREFIX, 2), dumps(done))
    assert completed_plan(sink, PREFIX) == (planned, 7)

    other = FileSink(tmp_path / "other")
    bad = receipt("success", "b", planned={"delete_expired": "2", "keep": 5}, records_found="7")
    assert other.put_new(receipt_key(PREFIX, 1), dumps(bad))
    assert completed_plan(other, PREFIX) == ({}, None)
    bools = receipt("success", "b", planned={"keep": True}, records_found=True)
    third = FileSink(tmp_path / "third")
    assert third.put_new(receipt_key(PREFIX, 1), dumps(bools))
    assert completed_plan(third, PREFIX) == ({}, None)
