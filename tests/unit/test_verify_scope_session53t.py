"""Audit 53t: ``receipts verify`` let another tenant's removal explain a missing record.

A record a run changed (held, superseded, quarantined, written) that is no longer in the
store needs a receipted removal, or verify reports RECORD_MISSING_WITHOUT_RECEIPT. The
removal it looked for was any receipted delete, erase or purge of the same record *id*,
whatever its actor and whenever it ran. Record ids are unique in a store only at one time:
u-2 erased its ``m-1``, u-1 later got a record ``m-1``, a hold was placed on it, and the
held record then vanished with no receipt at all. Verify said ``ok``: u-2's erasure, of
another record, before the hold, was taken as the evidence of u-1's record's removal.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from memlife.audit import FileSink
from memlife.erase import erase
from memlife.holds import place_hold
from memlife.journal import open_journal
from memlife.model import MemoryRecord
from memlife.review import verify_run
from memlife.stores.sqlite import SqliteStore


def _record(actor: str, content: str) -> MemoryRecord:
    return MemoryRecord(
        id="m-1", actor_id=actor, namespace=f"/users/{actor}/facts", memory_type="semantic",
        content=content, created_at=datetime(2026, 1, 2, tzinfo=UTC), source="user_stated",
    )  # fmt: skip


def _held_then_vanished(home: Path, *, erased_by_u2_first: bool) -> list[str]:
    """u-1's m-1 held (a receipted run), then removed behind the journal's back (an outside
    writer, a tamper): the problem codes verify reports for the hold's run."""
    receipts = f"file://{home / 'receipts'}"
    store = SqliteStore(home / "memlife.db")
    try:
        if erased_by_u2_first:  # u-2's own m-1, erased (receipted) before u-1 took the id
            store.put_many([_record("u-2", "Lives in Lisbon.")])
            assert erase(store, "u-2", ids=["m-1"], receipts=receipts)["erased"] == ["m-1"]
        store.put_many([_record("u-1", "Drinks only green tea.")])
        run_id = place_hold(store, ids=["m-1"], actor="u-1", receipts=receipts)["run_id"]
        with store.lock:  # no receipt, no journal row: the record is simply gone
            store.connection.execute("DELETE FROM records WHERE id = ?", ("m-1",))
            store.connection.commit()
        v = verify_run(FileSink(home / "receipts"), store, open_journal(store), run_id)
        return [p["code"] for p in v.problems]
    finally:
        store.close()


def test_control_a_held_record_gone_without_a_receipt_is_reported(home: Path) -> None:
    assert "RECORD_MISSING_WITHOUT_RECEIPT" in _held_then_vanished(home, erased_by_u2_first=False)


def test_another_actors_erasure_of_the_id_is_no_receipt_for_this_record(home: Path) -> None:
    assert "RECORD_MISSING_WITHOUT_RECEIPT" in _held_then_vanished(home, erased_by_u2_first=True)
