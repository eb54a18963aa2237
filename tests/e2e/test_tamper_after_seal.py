"""An operation receipted after its run was sealed (a later night's retry queue finished it)
sits outside the run's sealed chain: `receipts verify --evidence-only` holds its receipt to
the run's Parquet row instead (memlife/evidence.py, the field check). Tampering with that
receipt is caught; the untouched evidence verifies clean."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.audit import FileSink
from memlife.pipeline import RunConfig, run_local
from memlife.receipts import operation_key
from memlife.review import verify_run
from memlife.stores.base import BatchResult, ItemFailure
from memlife.stores.sqlite import SqliteStore
from tests.support.gate import NOW, rec

EXPIRED = rec("m-old", "facts", "Parked in row 4.", subject="parking", expires=NOW - timedelta(days=2))  # fmt: skip
KEPT = rec("m-new", "facts", "Likes green tea.", subject="drinks")


@pytest.fixture()
def retried(home: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Night 1's delete is throttled (queued, the run sealed without its receipt); night 2's
    retry queue deletes the record and writes the receipt."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    home.mkdir()
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([EXPIRED, KEPT])
    real = SqliteStore.delete_many

    def throttled(self: SqliteStore, ids: Any, **kw: Any) -> BatchResult:
        return BatchResult(failed=[ItemFailure(i, "THROTTLED") for i in ids])

    monkeypatch.setattr(SqliteStore, "delete_many", throttled)
    first = run_local(RunConfig(dry_run=False, now=NOW))
    monkeypatch.setattr(SqliteStore, "delete_many", real)
    run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=1)))
    with SqliteStore(home / "memlife.db") as store:
        assert store.get("m-old") is None and store.get("m-new") is not None
    sink = FileSink(home / "receipts")
    receipts = [p for p in (home / "receipts" / "operations").glob("*.json")]
    late = [p for p in receipts if json.loads(p.read_text()).get("record_id") == "m-old"]
    assert len(late) == 1  # the delete's receipt, written on night 2
    return {"sink": sink, "run_id": first.run_id, "late": late[0]}


def problems(env: dict[str, Any]) -> set[tuple[str, str]]:
    v = verify_run(env["sink"], None, None, env["run_id"], evidence_only=True)
    return {(p["code"], str(p.get("field", ""))) for p in v.problems}


def test_the_untouched_evidence_of_a_run_finished_later_verifies(retried: dict[str, Any]) -> None:
    assert problems(retried) == set()


@pytest.mark.parametrize(
    ("field", "value"),
    [("record_id", "m-new"), ("action", "supersede"), ("reason_codes", ["HELD"])],
)
def test_a_receipt_written_after_the_seal_and_edited_is_caught(
    retried: dict[str, Any], field: str, value: object
) -> None:
    path: Path = retried["late"]
    assert path.name == Path(operation_key(path.stem)).name
    doc = json.loads(path.read_text())
    doc[field] = value
    path.write_text(json.dumps(doc))
    assert ("RECEIPT_FIELD_MISMATCH", field) in problems(retried)
