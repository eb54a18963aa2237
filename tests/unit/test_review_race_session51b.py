"""Audit 51b: two reviewers at once, where one of them disputes.

A reviewer's dispute keeps its record from any delete until a person resolves it (README,
review). ``review resolve`` reads the item, checks the decision, then takes the store's
lease and reads the item again; that second read refused only an item *resolved* since.
A dispute landing in between (another reviewer, a review UI) leaves the item open in the
sense of "not resolved", so the first reviewer's delete, decided on an item nobody had
disputed, went ahead: the disputed record was deleted and the dispute closed as "delete".
A delete asked of an item that was already disputed when the reviewer read it still ends
that dispute (the control): a person saw the dispute and answered it.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from memlife.review_queue import ReviewError, ReviewQueue, item_id, resolve
from memlife.stores.sqlite import SqliteStore
from tests.unit.test_review_changed_record import T0, night, rec

POLICY = "policies/default.yaml"
IID = item_id("m-proc", "MISSING_OWNER", "u-1", "/users/u-1/procedures")


def _dispute_lands_first(monkeypatch: pytest.MonkeyPatch, store: SqliteStore) -> None:
    """Another reviewer's dispute lands after the deleter's checks, before its lease."""
    import memlife.quarantine as quarantine

    real = quarantine.manual_run

    def disputer_first(*args: object, **kw: object) -> object:
        if kw.get("now") == T0 + timedelta(hours=2):  # the second reviewer, past its checks
            resolve(store, IID, "dispute", "disputer@example.com", policy=POLICY,
                    now=T0 + timedelta(hours=1))  # fmt: skip
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(quarantine, "manual_run", disputer_first)


@pytest.mark.parametrize("decision", ["delete", "supersede", "keep"])
def test_a_dispute_that_lands_before_the_lease_is_not_overridden_unseen(
    home: Path, monkeypatch: pytest.MonkeyPatch, decision: str
) -> None:
    store = SqliteStore(home / "memlife.db")
    v1, newer = rec("m-proc"), rec("m-new", "To reset the router: call support.")
    store.put_many([v1, newer])
    night(store, "night-1", T0, v1)
    _dispute_lands_first(monkeypatch, store)
    with pytest.raises(ReviewError, match="disputed by disputer@example.com"):
        resolve(store, IID, decision, "deleter@example.com", policy=POLICY,
                by="m-new" if decision == "supersede" else None,
                now=T0 + timedelta(hours=2))  # fmt: skip
    assert store.get("m-proc") == v1, "the disputed record was changed"
    item = ReviewQueue.for_store(store).get(IID)
    assert item is not None
    assert (item.state, item.reviewer) == ("disputed", "disputer@example.com")
    store.close()


def test_control_a_delete_of_an_item_already_disputed_ends_the_dispute(home: Path) -> None:
    """Control: the disputed item itself may end its dispute with a delete (session 41)."""
    store = SqliteStore(home / "memlife.db")
    v1 = rec("m-proc")
    store.put_many([v1])
    night(store, "night-1", T0, v1)
    resolve(store, IID, "dispute", "disputer@example.com", policy=POLICY,
            now=T0 + timedelta(hours=1))  # fmt: skip
    resolve(store, IID, "delete", "deleter@example.com", policy=POLICY,
            now=T0 + timedelta(hours=2))  # fmt: skip
    assert store.get("m-proc") is None
    item = ReviewQueue.for_store(store).get(IID)
    assert item is not None and (item.state, item.decision) == ("resolved", "delete")
    store.close()
