"""Audit 43u (session 43): a rebuild after a hold is released keeps the erased source's owner.

A night merges two records (the replacement takes the newest's owner). A hold on the
replacement defers its rebuild when the newest is erased; releasing the hold plans the
rebuild again from the tombstones (``plan_erasure(erased_earlier=True)``), where the erased
source is a ghost with no owner to compare: ``_rebuilt`` gets no ``gone`` record and keeps
the erased owner on the active replacement.
"""

from __future__ import annotations

from pathlib import Path

from memlife.erase import erase, release_hold
from memlife.holds import place_hold
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.lifecycle import gate_cases
from tests.unit.test_erasure_erased_owner import ERASED, KEPT, NOW, OWNER_MARKER, everywhere


def test_a_rebuild_deferred_by_a_hold_drops_the_erased_owner_on_release(home: Path) -> None:
    """The adversary holds the merged replacement, erases its newest source (the one whose
    owner it took), then lifts the hold. The rebuilt replacement must carry the kept
    source's owner, and the erased owner must be in no file under MEMLIFE_HOME."""
    db = home / "memlife.db"
    with SqliteStore(db) as s:
        s.put_many([ERASED, KEPT])
    cfg = RunConfig(dry_run=False, now=NOW, eval_cases=gate_cases(db))
    assert run_local(cfg).status == "success"
    with SqliteStore(db) as s:
        (repl,) = [r for r in s.iter_all() if r.id.startswith("r-")]
        assert repl.owner == ERASED.owner
        place_hold(s, ids=[repl.id], actor="u-1")
        out = erase(s, "u-1", ids=["m-a"], now=NOW)
        assert out["erased"] == ["m-a"] and repl.id in out["deferred"]
        release_hold(s, [repl.id])
        after = s.get(repl.id)
        assert after is not None and after.content == KEPT.content
        assert after.owner == KEPT.owner
    assert everywhere(home, OWNER_MARKER) == []
