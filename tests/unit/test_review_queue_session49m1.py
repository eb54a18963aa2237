"""Audit 49m1 (mutation pass over session 49): what a delete's receipt says when the
recheck under the lease (audit 49b) refuses it.

The run was started when the refusal comes, so its receipt is the evidence of why nothing
was deleted: ``refused`` is ``DISPUTED`` for a dispute filed meanwhile and ``HELD_SOURCE``
for a legal hold placed meanwhile on a record that would go with it. Kills the label
fixed to either value. The real SQLite store, review queue, holds and receipts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.holds import place_hold
from memlife.plan import Reason
from memlife.review_queue import ReviewError, ReviewQueue, item_id, resolve
from memlife.stores.sqlite import SqliteStore
from tests.unit.test_guards_session35 import NS, POLICY, T0, finding, rec

EVE_AT = T0 + timedelta(hours=2)


@pytest.fixture
def store(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SqliteStore]:
    monkeypatch.setenv("MEMLIFE_STATE", "local")
    s = SqliteStore(home / "memlife.db")
    yield s
    s.close()


def _meanwhile(monkeypatch: pytest.MonkeyPatch, act: Any) -> None:
    """``act`` runs after eve's delete passed its first checks, before its run starts."""
    import memlife.quarantine as quarantine

    real = quarantine.manual_run

    def first(*args: Any, **kw: Any) -> Any:
        if kw.get("now") == EVE_AT:
            act()
        return real(*args, **kw)

    monkeypatch.setattr(quarantine, "manual_run", first)


def _eves_receipt(receipts: Path) -> dict[str, Any]:
    found = [json.loads(p.read_text()) for p in receipts.rglob("receipt.json")]
    (eve,) = [r for r in found if r.get("mode") == "manual:review_delete"]
    return eve


def _superseded_pair(store: SqliteStore) -> None:
    store.put_many([rec("m-old", status="superseded", provenance={"replaced_by": "m-new"}),
                    rec("m-new", "Lives in Porto.", provenance={"supersedes": ["m-old"]})])  # fmt: skip
    queue = ReviewQueue.for_store(store)
    queue.queue([finding(store.get("m-old")), finding(store.get("m-new"))], budget=10,
                run_id="night-1", at=T0)  # fmt: skip


def _eve_deletes_m_new(store: SqliteStore, receipts: Path) -> None:
    with pytest.raises(ReviewError):
        resolve(store, item_id("m-new", "MISSING_OWNER", "u-1", NS), "delete", "eve@example.com",
                policy=POLICY, receipts=f"file://{receipts}", now=EVE_AT)  # fmt: skip


def test_a_hold_placed_while_the_delete_waits_is_receipted_as_a_held_source(
    store: SqliteStore, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    receipts = home / "receipts"
    _superseded_pair(store)
    _meanwhile(monkeypatch, lambda: place_hold(store, ids=["m-old"], receipts=f"file://{receipts}",
                                               now=T0 + timedelta(hours=1)))  # fmt: skip
    _eve_deletes_m_new(store, receipts)
    assert store.get("m-new") is not None and store.get("m-old") is not None
    assert _eves_receipt(receipts)["refused"] == "HELD_SOURCE"


def test_a_dispute_filed_while_the_delete_waits_is_receipted_as_disputed(
    store: SqliteStore, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    receipts = home / "receipts"
    store.put_many([rec("m-1")])
    queue = ReviewQueue.for_store(store)
    queue.queue([finding(store.get("m-1"), Reason.MISSING_OWNER, Reason.STALE_VERIFICATION)],
                budget=10, run_id="night-1", at=T0)  # fmt: skip
    _meanwhile(monkeypatch, lambda: resolve(
        store, item_id("m-1", "STALE_VERIFICATION", "u-1", NS), "dispute", "ana@example.com",
        policy=POLICY, receipts=f"file://{receipts}", now=T0 + timedelta(hours=1)))  # fmt: skip
    with pytest.raises(ReviewError, match="disputed"):
        resolve(store, item_id("m-1", "MISSING_OWNER", "u-1", NS), "delete", "eve@example.com",
                policy=POLICY, receipts=f"file://{receipts}", now=EVE_AT)  # fmt: skip
    assert store.get("m-1") is not None
    assert _eves_receipt(receipts)["refused"] == "DISPUTED"
