"""A hold placed or lifted writes only the retention class, and only on the row as read.

The hold and release appliers read the record, then wrote the whole record back: another
writer's change in between (a record of another actor taking the id, an update of its
text) was overwritten. Races are forced deterministically: a SqliteStore subclass lets
another connection (another process) write right AFTER the applier's read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memlife.erase import release_hold
from memlife.holds import place_hold
from memlife.model import MemoryRecord, RetentionClass, Status
from memlife.stores.sqlite import SqliteStore

NOW = datetime(2026, 6, 1, tzinfo=UTC)
NS, NS2 = "/users/u-1/facts", "/users/u-2/facts"


def rec(rid: str, content: str, **kw: Any) -> MemoryRecord:
    base = dict(id=rid, actor_id="u-1", namespace=NS, memory_type="semantic", content=content,
                subject="city", owner="team-a", created_at=NOW - timedelta(days=50))  # fmt: skip
    return MemoryRecord.model_validate({**base, **kw})


class AfterReadStore(SqliteStore):
    """Runs ``after_read`` (another writer, its own connection) once, right after the first
    ``get_many`` that names ``rid`` returned: between the applier's read and its write."""

    after_read: Callable[[], None] | None = None
    rid: str = ""

    def get_many(self, ids: Sequence[str]) -> dict[str, MemoryRecord]:
        got = super().get_many(ids)
        if self.after_read is not None and self.rid in ids:
            fn, self.after_read = self.after_read, None
            fn()
        return got


def other_writer(db: Path, *, delete: str | None = None, put: MemoryRecord) -> Callable[[], None]:
    def run() -> None:
        with SqliteStore(db) as other:
            if delete:
                other.delete_many([delete])
            other.put_many([put])

    return run


def test_a_hold_never_writes_its_record_back_over_another_actors_that_took_the_id(
    home: Path,
) -> None:
    db = home / "memlife.db"
    with AfterReadStore(db) as store:
        store.put_many([rec("m", "Lives in Lisbon.")])
        theirs = rec("m", "Bob lives in Porto.", actor_id="u-2", namespace=NS2)
        store.rid, store.after_read = "m", other_writer(db, delete="m", put=theirs)
        place_hold(store, ids=["m"], actor="u-1", now=NOW)
        after = store.get("m")
        assert after is not None
        assert (after.actor_id, after.content) == ("u-2", "Bob lives in Porto.")
        assert after.retention_class is RetentionClass.standard


def test_a_release_never_writes_its_record_back_over_another_actors_held_one(
    home: Path,
) -> None:
    db = home / "memlife.db"
    with AfterReadStore(db) as store:
        store.put_many([rec("h", "Owes 500 EUR to Bob.", retention_class="legal_hold")])
        theirs = rec("h", "Bob's case file.", actor_id="u-2", namespace=NS2,
                     retention_class="legal_hold")  # fmt: skip
        store.rid, store.after_read = "h", other_writer(db, delete="h", put=theirs)
        release_hold(store, ["h"], now=NOW)
        after = store.get("h")
        assert after is not None and after.actor_id == "u-2"
        assert after.retention_class is RetentionClass.legal_hold  # u-2's hold stands


def test_a_hold_keeps_the_text_another_writer_changed_after_its_read(home: Path) -> None:
    db = home / "memlife.db"
    with AfterReadStore(db) as store:
        store.put_many([rec("m", "Lives in Lisbon.")])
        store.rid = "m"
        store.after_read = other_writer(db, put=rec("m", "Lives in Porto since May."))
        place_hold(store, ids=["m"], actor="u-1", now=NOW)
        after = store.get("m")
        assert after is not None and after.content == "Lives in Porto since May."
        assert after.retention_class is RetentionClass.legal_hold  # read again, then held


def test_a_release_of_a_retained_record_makes_it_active_in_the_same_write(home: Path) -> None:
    """The one status a release changes (retained -> active), with the class, at the run's
    time; nothing else in the row."""
    db = home / "memlife.db"
    with SqliteStore(db) as store:
        store.put_many([rec("r", "Kept for the audit.", status="retained",
                            retention_class="legal_hold", access_count=7)])  # fmt: skip
        release_hold(store, ["r"], now=NOW)
        after = store.get("r")
        assert after is not None
        assert (after.status, after.retention_class) == (Status.active, RetentionClass.standard)
        assert after.status_changed_at == NOW and after.access_count == 7
