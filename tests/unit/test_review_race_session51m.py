"""Audit 51m (session 51 mutation pass): DISPUTED_MEANWHILE (audit 51b) compares the
reviewer too, not only the state.

The session's race starts from an undisputed item. A mutant reading only the state lived:
an item already disputed by one reviewer when the deleter read it, then disputed again
by another reviewer before the deleter's lease, was deleted on a decision that never saw
the second dispute, and that dispute ended unseen.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from memlife.review_queue import ReviewError, ReviewQueue, resolve
from memlife.stores.sqlite import SqliteStore
from tests.unit.test_review_changed_record import T0, night, rec
from tests.unit.test_review_race_session51b import IID, POLICY


def test_a_second_dispute_landing_before_the_lease_is_not_ended_unseen(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memlife.quarantine as quarantine

    store = SqliteStore(home / "memlife.db")
    v1 = rec("m-proc")
    store.put_many([v1])
    night(store, "night-1", T0, v1)
    resolve(store, IID, "dispute", "first@example.com", policy=POLICY,
            now=T0 + timedelta(hours=1))  # fmt: skip
    real = quarantine.manual_run

    def second_dispute_first(*args: object, **kw: object) -> object:
        if kw.get("now") == T0 + timedelta(hours=3):  # the deleter, past its checks
            resolve(store, IID, "dispute", "second@example.com", policy=POLICY,
                    now=T0 + timedelta(hours=2))  # fmt: skip
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(quarantine, "manual_run", second_dispute_first)
    with pytest.raises(ReviewError, match="disputed by second@example.com"):
        resolve(store, IID, "delete", "deleter@example.com", policy=POLICY,
                now=T0 + timedelta(hours=3))  # fmt: skip
    assert store.get("m-proc") == v1
    item = ReviewQueue.for_store(store).get(IID)
    assert item is not None
    assert (item.state, item.reviewer) == ("disputed", "second@example.com")
    store.close()
