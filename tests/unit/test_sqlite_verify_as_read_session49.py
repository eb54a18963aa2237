"""A reviewer's `verify` writes the verification, not the whole record as it was read.

Audit 49h. The review applier read the record, then wrote it back whole with the new
``last_verified_at`` (``SqliteStore.put_as_read``), checking only its actor, namespace,
text, status and class. A duplicate ``remember`` from the agent (another process) landing
in between refreshed the record in one statement (a read counted, confidence raised, a
longer lifetime): the reviewer's write put the old values back. The agent's update was
lost: the read gone from scoring and the record back on its old, earlier expiry. The race
is forced as the hold tests force theirs: a real second process writes right after the
applier's read.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memlife.model import MemoryRecord, MemoryType
from memlife.plan import Action, Decision, Reason
from memlife.review_queue import ReviewQueue, item_id, resolve
from memlife.stores.sqlite import SqliteStore

T0 = datetime(2026, 11, 1, 2, tzinfo=UTC)
NS = "/users/u-1/episodes"
EXPIRES = T0 + timedelta(days=5)


def rec() -> MemoryRecord:
    return MemoryRecord.model_validate({
        "id": "m-1", "actor_id": "u-1", "namespace": NS, "memory_type": "episodic",
        "content": "Flies to Lisbon every March.", "created_at": T0 - timedelta(days=9),
        "owner": None, "confidence": 0.6, "expires_at": EXPIRES,
    })  # fmt: skip


class AfterReadStore(SqliteStore):
    """Runs the other process once, right after the applier's read of ``m-1``."""

    other: str | None = None

    def get_many(self, ids: Sequence[str]) -> dict[str, MemoryRecord]:
        got = super().get_many(ids)
        if self.other is not None and "m-1" in ids:
            code, self.other = self.other, None
            subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
        return got


def remember_again(db: Path, sha: str) -> str:
    """What a duplicate `remember` writes (Memory.remember -> refresh_active), from another
    process: one more read, a higher confidence, and the restated fact's longer lifetime."""
    return textwrap.dedent(f"""
        from datetime import datetime
        from memlife.model import MemoryType
        from memlife.stores.sqlite import Refresh, SqliteStore
        with SqliteStore({str(db)!r}) as store:
            done = store.refresh_active("m-1", {sha!r}, Refresh(
                at=datetime.fromisoformat({(T0 + timedelta(minutes=5)).isoformat()!r}),
                confidence=0.95, memory_type=MemoryType.semantic, expires_at=None,
                was_type=MemoryType.episodic,
                was_expires_at=datetime.fromisoformat({EXPIRES.isoformat()!r})),
                scope=("u-1", {NS!r}))
            assert done
    """)


def open_item(store: SqliteStore, r: MemoryRecord) -> str:
    d = Decision(r.id, r.actor_id, r.namespace, Action.review, [Reason.MISSING_OWNER], 0.5,
                 content_sha256=r.sha256, priority=1.0, memory_type="episodic")  # fmt: skip
    ReviewQueue.for_store(store).queue([d], budget=10, run_id="night-1", at=T0)
    return item_id(r.id, "MISSING_OWNER", r.actor_id, r.namespace)


def test_a_verify_keeps_what_a_remember_wrote_after_its_read(home: Path) -> None:
    db = home / "memlife.db"
    home.mkdir(parents=True)
    with AfterReadStore(db) as store:
        r = rec()
        store.put_many([r])
        iid = open_item(store, r)
        store.other = remember_again(db, r.sha256)
        out = resolve(store, iid, "verify", "eve@example.com", policy="policies/default.yaml",
                      now=T0 + timedelta(hours=1))  # fmt: skip
        assert store.other is None  # the other process ran between the read and the write
    assert out["status"] == "success", out
    with SqliteStore(db) as store:
        got = store.get("m-1")
    assert got is not None
    assert got.last_verified_at == T0 + timedelta(hours=1)  # the reviewer's verification
    # and the agent's refresh, written after the reviewer's read, is still there
    assert (got.access_count, got.confidence) == (1, 0.95)
    assert (got.memory_type, got.expires_at) == (MemoryType.semantic, None)


def test_control_a_verify_with_no_other_writer_stamps_the_record(home: Path) -> None:
    db = home / "memlife.db"
    home.mkdir(parents=True)
    with SqliteStore(db) as store:
        r = rec()
        store.put_many([r])
        iid = open_item(store, r)
        out = resolve(store, iid, "verify", "eve@example.com", policy="policies/default.yaml",
                      now=T0 + timedelta(hours=1))  # fmt: skip
        assert out["status"] == "success", out
        got = store.get("m-1")
    assert got is not None and got.last_verified_at == T0 + timedelta(hours=1)
    assert got.model_copy(update={"last_verified_at": None}) == r.as_stored()
