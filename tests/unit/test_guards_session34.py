"""Tenants never mixed, attacked where a record id meets another actor's record (session 34,
the two actor checks the session 33 audit left untested, on SQLite and AgentCore): a reviewer's delete takes only
its own actor's and namespace's followers, and recall never serves another actor's record
that took over an id between its ranking and its read. Real components: the SQLite store, the AgentCore store against its fake service,
the MiniLM embedder, the online library."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife import Memory
from memlife.model import MemoryRecord, Status
from memlife.orphans import followers
from memlife.stores.sqlite import SqliteStore

T0 = datetime(2026, 11, 1, 12, tzinfo=UTC)
NS = "/users/u-1/facts"


def rec(rid: str, content: str = "Lives in Lisbon.", **kw: Any) -> MemoryRecord:
    base = dict(id=rid, actor_id="u-1", namespace=NS, memory_type="semantic", content=content,
                created_at=T0 - timedelta(days=30), subject="city", owner="team-a")  # fmt: skip
    return MemoryRecord.model_validate({**base, **kw})


def superseded_by(rid: str, by: str, supersedes: tuple[str, ...] = (), **kw: Any) -> MemoryRecord:
    return rec(rid, f"Lived in Porto ({rid}).", status="superseded",
               provenance={"replaced_by": by, "supersedes": list(supersedes)},
               status_changed_at=T0 - timedelta(days=1), **kw)  # fmt: skip


@pytest.fixture(params=["sqlite", "agentcore"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        s = SqliteStore(tmp_path / "memlife.db")
        yield s
        s.close()
        return
    from tests.fakes.agentcore import agentcore_store

    with agentcore_store() as (ac, _fake):
        yield ac


# -- 1. orphans.followers: what goes with a deleted replacement stays in its tenant ----------
@pytest.mark.parametrize(
    ("where", "kw"),
    [
        ("another actor", {"actor_id": "u-2", "namespace": "/users/u-2/facts"}),
        ("another namespace of the same actor", {"namespace": "/users/u-1/notes"}),
    ],
)
def test_a_replacement_claiming_another_tenants_record_does_not_take_it_along(
    store: Any, where: str, kw: dict[str, Any]
) -> None:
    """A replacement R whose provenance lists X, and X pointing back to R, but X lives in
    another actor's (or namespace's) memory: a forged or corrupted link. A reviewer's delete
    of R takes R's followers with it (``REPLACEMENT_DELETED``); X must not be one of them,
    whatever the links say. The actor's own follower Y is taken (the control)."""
    r = rec("R", provenance={"supersedes": ["X", "Y"]})
    x = superseded_by("X", "R", **kw)
    y = superseded_by("Y", "R")
    store.put_many([r, x, y])
    found = [f.id for f in followers(store, store.get("R"))]  # type: ignore[arg-type]
    assert found == ["Y"], where


def test_a_chain_does_not_cross_into_another_actor_further_down(store: Any) -> None:
    """The same check one level down: Y follows R, and Z (another actor's) claims to follow
    Y. Z stays."""
    r = rec("R", provenance={"supersedes": ["Y"]})
    y = superseded_by("Y", "R", supersedes=("Z",))
    z = superseded_by("Z", "Y", actor_id="u-2", namespace="/users/u-2/facts")
    store.put_many([r, y, z])
    assert [f.id for f in followers(store, store.get("R"))] == ["Y"]  # type: ignore[arg-type]


# -- 2. recall: an id taken over by another actor between ranking and reading ---------------
def test_recall_never_serves_another_actors_record_that_took_over_an_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recall ranks from its in-memory shard, then reads the records. Another writer may,
    in between, delete u-1's record and write u-2's under the same id (an import with its
    own ids; SQLite's id is the whole key). The read then returns u-2's active record for
    a hit of u-1's shard: it must be dropped, never served to u-1."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    with Memory(url, ledger=tmp_path / "ledger") as m:
        mine = m.remember("My locker code is 4812.", actor="u-1", namespace=NS)
        m.remember("I like hiking on Sundays.", actor="u-1", namespace=NS)
        assert [h.record.id for h in m.recall("locker code", actor="u-1", k=1)] == [mine.id]
        taken = m.store.get(mine.id)
        assert taken is not None
        theirs = taken.model_copy(
            update={
                "actor_id": "u-2",
                "namespace": "/users/u-2/facts",
                "content": "My locker code is 9999.",
            }  # fmt: skip
        )
        lt = m.long_term
        real = lt._get_many

        def racing(ids: Any) -> dict[str, MemoryRecord]:
            other = SqliteStore(tmp_path / "m.db")  # another writer, its own connection
            try:
                other.delete_many([mine.id])
                other.put_many([theirs])
            finally:
                other.close()
            monkeypatch.setattr(lt, "_get_many", real)  # one race, then reads as usual
            return real(ids)

        monkeypatch.setattr(lt, "_get_many", racing)
        hits = m.recall("locker code", actor="u-1", k=1)
        assert all(h.record.actor_id == "u-1" for h in hits)
        assert "9999" not in " ".join(h.record.content for h in hits)
        # and the shard forgot the id: the next recall does not meet it again
        again = m.recall("locker code", actor="u-1", k=2)
        assert mine.id not in [h.record.id for h in again]
        got = m.store.get(mine.id)
        assert got is not None and got.actor_id == "u-2" and got.status is Status.active
