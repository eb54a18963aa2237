"""Session 53 (audit 53b's Left): a decision made from ``review show`` must not land on a
text a night renewed after the reviewer read it.

``review resolve`` checked the record against the item's *current* content hash, which a
night renews for changed text: between the reviewer's ``show`` and their ``resolve`` nothing
tied the decision to what was read. ``show`` now prints a ``seen`` token of the texts it
printed, and ``resolve --seen`` refuses when they changed since.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife.model import MemoryRecord, content_sha256
from memlife.plan import Action, Decision, Reason
from memlife.review_queue import ReviewError, ReviewQueue, item_id, resolve
from memlife.review_queue.show import show
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke

T0 = datetime(2026, 11, 1, 2, tzinfo=UTC)
NS = "/users/u-1/facts"
READ, RENEWED = "Works at the Lisbon office.", "Works at the Porto office, and is the site lead."


def _store_with_item(home: Path) -> tuple[SqliteStore, str]:
    home.mkdir(parents=True, exist_ok=True)
    r = MemoryRecord.model_validate({
        "id": "m-1", "actor_id": "u-1", "namespace": NS, "memory_type": "semantic",
        "content": READ, "created_at": T0 - timedelta(days=400), "subject": "office",
        "owner": None,
    })  # fmt: skip
    store = SqliteStore(home / "memlife.db")
    store.put_many([r])
    finding = Decision(r.id, r.actor_id, NS, Action.review, [Reason.MISSING_OWNER], 0.3,
                       content_sha256=r.sha256, priority=1.0, memory_type="semantic")  # fmt: skip
    ReviewQueue.for_store(store).queue([finding], budget=10, run_id="night-1", at=T0)
    return store, item_id(r.id, "MISSING_OWNER", "u-1", NS)


def _renewed_by_a_night(store: SqliteStore, iid: str) -> None:
    """The record's text changes and the next night renews the item for it."""
    rec = store.get("m-1")
    assert rec is not None
    new = rec.model_copy(update={"content": RENEWED, "provenance": rec.provenance.model_copy(
        update={"content_sha256": content_sha256(RENEWED)})})  # fmt: skip
    store.put_many([new])
    finding = Decision(new.id, new.actor_id, NS, Action.review, [Reason.MISSING_OWNER], 0.3,
                       content_sha256=new.sha256, priority=1.0, memory_type="semantic")  # fmt: skip
    ReviewQueue.for_store(store).queue([finding], budget=10, run_id="night-2",
                                       at=T0 + timedelta(days=1))  # fmt: skip


def test_a_delete_decided_on_a_text_a_night_renewed_since_is_refused(home: Path) -> None:
    store, iid = _store_with_item(home)
    seen = show(store, iid)["seen"]
    _renewed_by_a_night(store, iid)
    with pytest.raises(ReviewError, match="changed since you read them"):
        resolve(
            store, iid, "delete", "eve@example.com", seen=seen, now=T0 + timedelta(days=1, hours=1)
        )
    rec = store.get("m-1")
    assert rec is not None and rec.content == RENEWED  # nothing done to the unread text
    item = ReviewQueue.for_store(store).get(iid)
    assert item is not None and item.state == "open"
    store.close()


def test_a_decision_on_the_text_read_goes_through(home: Path) -> None:
    """Control: the token of what the store holds now is accepted (and its absence, as before)."""
    store, iid = _store_with_item(home)
    _renewed_by_a_night(store, iid)
    seen = show(store, iid)["seen"]
    resolve(store, iid, "delete", "eve@example.com", seen=seen, now=T0 + timedelta(days=1, hours=1))
    assert store.get("m-1") is None
    store.close()


def test_the_cli_prints_the_token_and_resolve_checks_it(home: Path) -> None:
    store, iid = _store_with_item(home)
    store.close()
    code, out, err = invoke("review", "show", iid)
    assert code == 0, err
    token = next(w for line in (out + err).splitlines() if line.startswith("seen:")
                 for w in line.split()[1:2])  # fmt: skip
    store = SqliteStore(home / "memlife.db")
    _renewed_by_a_night(store, iid)
    store.close()
    code, out, err = invoke("review", "resolve", iid, "--decision", "delete",
                            "--reviewer", "eve@example.com", "--seen", token)  # fmt: skip
    assert code == 2, (code, out, err)
    assert "changed since you read them" in err
    store = SqliteStore(home / "memlife.db")
    assert store.get("m-1") is not None
    store.close()
