"""An erasure deferred by holds on two copies of one text (session 40, found by the stateful
online machine): releasing the hold of the copy that was reached (SAME_CONTENT), not asked
for, while the asked-for record stays held, left the copy active and unheld with its
pending erasure dropped: the person's text was served again, for as long as the other hold
stood. The released copy is erased now; the held request stays deferred."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlife import Memory
from memlife.erase import erase, pending_erasures, release_hold
from memlife.holds import place_hold
from memlife.stores.sqlite import SqliteStore

TEXT = "Is allergic to two medications."


@pytest.mark.parametrize("asked", ["first", "second"])
def test_a_released_copy_of_a_held_request_is_erased_and_the_request_stays_deferred(
    home: Path, asked: str
) -> None:
    """Attacks ``still_held`` in `memlife/erase.py::_select` and ``plan_erasure``: a copy
    deferred as SAME_CONTENT is planned again, on its release, from the requests a hold
    still defers (they are no tombstones yet)."""
    with SqliteStore(home / "memlife.db") as store:
        memory = Memory(store)
        x = memory.remember(TEXT, actor="u-2", namespace="/shared/team").id
        y = memory.remember(TEXT, actor="u-2", namespace="/users/u-2/prefs").id
        place_hold(store, ids=[x], actor="u-2")
        place_hold(store, ids=[y], actor="u-2")
        out = erase(store, "u-2", ids=[y if asked == "first" else x])
        assert sorted(out["deferred"]) == sorted([x, y])
        if asked == "second":  # the copy reached is y: release it, x (asked) stays held
            x, y = y, x
        release_hold(store, [x])
        assert store.get(x) is None, "the released copy still serves the erased text"
        held = store.get(y)
        assert held is not None and held.content == TEXT  # the hold wins over the erasure
        assert [p["record_id"] for p in pending_erasures(store, "u-2")] == [y]
        release_hold(store, [y])
        assert store.get(y) is None and not pending_erasures(store, "u-2")
        assert not memory.recall(TEXT, actor="u-2", k=5)
