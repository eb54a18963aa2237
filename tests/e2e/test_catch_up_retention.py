"""A catch-up run's supersedes keep their originals for the retention, counted in real time.

Adversary (session 30 "Left" list): a supersede is stamped with its run's cutoff, so a
catch-up run (`--now` 200 days back) stamped its supersedes then, and the very next
regular night deleted those originals (SUPERSEDED_RETENTION, 90 days for standard) a day
after they were superseded. The retention now counts from the later of the stamp and the
journal's wall-clock time for the supersede (memlife/superseded_since.py).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from memlife.model import MemoryRecord, RetentionClass, Status, utcnow
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.gate import rec
from tests.unit.test_gate_staged import policy_with, statuses

WALL = utcnow()
CATCH_UP = WALL - timedelta(days=200)


def _at(r: MemoryRecord, days_before_catch_up: float) -> MemoryRecord:
    t = CATCH_UP - timedelta(days=days_before_catch_up)
    return r.model_copy(update={"created_at": t, "last_verified_at": t})


def _seed(home: Path) -> None:
    sensitive = RetentionClass.sensitive  # kept 30 days once superseded; standard 90
    store = SqliteStore(home / "memlife.db")
    store.put_many([
        _at(rec("m-tea", "preferences", "Drinks only green tea, never coffee.",
                subject="beverage"), 100),
        _at(rec("m-coffee", "preferences", "Switched to black coffee; no longer drinks tea.",
                subject="beverage"), 10),
        _at(rec("m-flat", "facts", "Lives at 4 Elm Street, flat 2.", subject="address",
                retention=sensitive), 100),
        _at(rec("m-house", "facts", "Moved to 9 Oak Road; no longer lives on Elm Street.",
                subject="address", retention=sensitive), 10),
    ])  # fmt: skip
    store.close()


def _age_supersedes(home: Path, days: float) -> int:
    """Real time passes: the journal's supersedes were done ``days`` earlier."""
    store = SqliteStore(home / "memlife.db")
    try:
        with store.lock, store.transaction():
            cur = store.connection.execute(
                "UPDATE operations SET updated_at=? WHERE kind='supersede'",
                ((utcnow() - timedelta(days=days)).isoformat(),),
            )
        return cur.rowcount
    finally:
        store.close()


def test_the_night_after_a_catch_up_run_keeps_what_it_superseded(
    home: Path, tmp_path: Path
) -> None:
    _seed(home)
    policy = policy_with(tmp_path, required=False)  # the gate withholds no retention deletion
    run_local(RunConfig(dry_run=False, now=CATCH_UP, policy=policy))
    superseded = {rid for rid, s in statuses(home).items() if s == "superseded"}
    assert {"m-tea", "m-flat"} <= superseded  # the older statements lost to the newer ones

    dry = run_local(RunConfig(dry_run=True, now=utcnow(), policy=policy))
    night = run_local(RunConfig(dry_run=False, now=utcnow(), policy=policy))
    after = statuses(home)
    assert superseded <= set(after) and all(after[r] == "superseded" for r in superseded)
    assert night.lifecycle["deleted"] == 0 and dry.counts.get("delete_expired", 0) == 0

    # 40 days later in real time the sensitive class's 30 days have passed, not the 90
    assert _age_supersedes(home, 40) >= 2
    run_local(RunConfig(dry_run=False, now=utcnow(), policy=policy))
    left = set(statuses(home))
    assert "m-flat" not in left and "m-tea" in left
    # 91 days: the standard one goes too
    _age_supersedes(home, 91)
    run_local(RunConfig(dry_run=False, now=utcnow(), policy=policy))
    assert not superseded & set(statuses(home))


def test_a_catch_up_run_re_pointing_a_record_keeps_its_status_time(
    home: Path, tmp_path: Path
) -> None:
    """Review of session 31: re-pointing (A superseded by B, B now superseded: A moves to
    the new replacement) stamped A with the catch-up run's cutoff, 200 days back, and no
    supersede of the journal names A (the app superseded it online), so the next night
    deleted A at once. Re-pointing is no new supersede: A keeps its status time."""
    store = SqliteStore(home / "memlife.db")
    store.put_many([
        _at(rec("m-a", "preferences", "Likes oolong.", subject="drink-old"), 150),
        _at(rec("m-b", "preferences", "Drinks only green tea, never coffee.",
                subject="beverage"), 100),
        _at(rec("m-c", "preferences", "Switched to black coffee; no longer drinks tea.",
                subject="beverage"), 10),
    ])  # fmt: skip
    store.set_status(["m-a"], Status.superseded, replaced_by="m-b")  # online, just now
    online = store.get("m-a").status_changed_at
    store.close()
    policy = policy_with(tmp_path, required=False)
    run_local(RunConfig(dry_run=False, now=CATCH_UP, policy=policy))
    store = SqliteStore(home / "memlife.db")
    a = store.get("m-a")
    store.close()
    assert a.provenance.replaced_by not in (None, "m-b")  # moved on with B
    assert a.status_changed_at == online
    run_local(RunConfig(dry_run=False, now=utcnow(), policy=policy))
    assert statuses(home).get("m-a") == "superseded"


def test_a_regular_night_re_pointing_a_record_keeps_its_status_time(
    home: Path, tmp_path: Path
) -> None:
    """Review of session 31: the first fix kept the later of the record's status time and
    the cutoff, so every regular night that re-pointed a record restarted its superseded
    retention, and a subject restated more often than every 90 days kept its old records
    for good. A record superseded 80 days ago keeps that time when re-pointed tonight."""
    now = utcnow()
    day = timedelta(days=1)
    store = SqliteStore(home / "memlife.db")
    store.put_many([
        rec("m-a", "preferences", "Likes oolong.", subject="drink-old").model_copy(
            update={"created_at": now - 150 * day, "last_verified_at": now - 150 * day}),
        rec("m-b", "preferences", "Drinks only green tea, never coffee.",
            subject="beverage").model_copy(
            update={"created_at": now - 100 * day, "last_verified_at": now - 100 * day}),
        rec("m-c", "preferences", "Switched to black coffee; no longer drinks tea.",
            subject="beverage").model_copy(
            update={"created_at": now - 10 * day, "last_verified_at": now - 10 * day}),
    ])  # fmt: skip
    store.set_status(["m-a"], Status.superseded, replaced_by="m-b", at=now - 80 * day)
    before = store.get("m-a").status_changed_at
    store.close()
    run_local(RunConfig(dry_run=False, now=utcnow(), policy=policy_with(tmp_path, required=False)))
    store = SqliteStore(home / "memlife.db")
    a = store.get("m-a")
    store.close()
    assert a.provenance.replaced_by not in (None, "m-b")  # re-pointed tonight
    assert a.status_changed_at == before
