"""Audit 49m2 (session 49 mutation pass, part 2): the embedded SQLite store's session-49
changes (``verify_as_read``, ``_ERASED_BEFORE``, the damaged-provenance names), each test
killing a mutation the session's tests let live. Real components: the SQLite store file."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from memlife.model import MemoryRecord, utcnow
from memlife.stores.sqlite import SqliteStore

T0 = datetime(2026, 11, 1, 2, tzinfo=UTC)


def rec(rid: str = "m-1", **kw: object) -> MemoryRecord:
    return MemoryRecord.model_validate({
        "id": rid, "actor_id": "u-1", "namespace": "/users/u-1/facts",
        "memory_type": "semantic", "content": f"Fact {rid}: flies to Lisbon every March.",
        "created_at": T0 - timedelta(days=9), "source": "agent_inferred", "confidence": 0.6,
        **kw,
    })  # fmt: skip


def test_a_later_verification_moves_the_stamp_forward_an_earlier_one_never_back(
    tmp_path: Path,
) -> None:
    """verify_as_read keeps the latest verification, its time and its text together: a
    second reviewer's later verify is what the record says; an earlier one (a verify
    resolved late, at an older `now`) leaves it. The ordering and the CASE that keeps
    ``last_verified_at`` with ``last_verified_ts`` were not checked by the session's tests."""
    with SqliteStore(tmp_path / "m.db") as store:
        r = rec()
        store.put_many([r])
        assert store.verify_as_read(r, T0 + timedelta(hours=1))
        assert store.verify_as_read(r, T0 + timedelta(hours=3))  # later: forward
        got = store.get("m-1")
        assert got is not None and got.last_verified_at == T0 + timedelta(hours=3)
        assert store.verify_as_read(r, T0 + timedelta(hours=2))  # earlier: never back
        got = store.get("m-1")
        assert got is not None and got.last_verified_at == T0 + timedelta(hours=3)
        ts = store.connection.execute(
            "SELECT last_verified_ts FROM records WHERE id='m-1'"
        ).fetchone()[0]
        assert ts == (T0 + timedelta(hours=3)).timestamp()  # the time and its text agree


def test_a_verify_of_a_record_changed_since_its_read_writes_nothing(tmp_path: Path) -> None:
    """Control: the row no longer as read (another text) is not stamped; False."""
    with SqliteStore(tmp_path / "m.db") as store:
        r = rec()
        store.put_many([r])
        store.put_as_read(r.model_copy(update={"content": "Flies to Porto now."}), r)
        assert not store.verify_as_read(r, T0 + timedelta(hours=1))
        got = store.get("m-1")
        assert got is not None and got.last_verified_at is None


def old(rid: str, actor: str, content: str, created: datetime) -> MemoryRecord:
    return MemoryRecord.model_validate({
        "id": rid, "actor_id": actor, "namespace": f"/users/{actor}/facts",
        "memory_type": "semantic", "content": content, "created_at": created,
    })  # fmt: skip


def test_another_actors_erasure_of_an_id_never_refuses_this_actors_record(
    tmp_path: Path,
) -> None:
    """_ERASED_BEFORE is the erasing actor's: u-2 erasing its own m-1 must not make u-1's
    m-1 (created before that erasure, another text) "the erased record" (tenants mixed)."""
    from memlife.erase import erase

    with SqliteStore(tmp_path / "m.db") as store:
        created = utcnow() - timedelta(days=3)
        store.put_many([old("m-1", "u-2", "Plays chess on Sundays.", created)])
        assert erase(store, "u-2", ids=["m-1"])["erased"] == ["m-1"]
        mine = old("m-1", "u-1", "Keeps bees in the garden.", created)
        assert store.tombstone_refusal(mine) is None
        assert store.insert_new([mine]).succeeded == ["m-1"]
