"""LongTermMemory: duplicate refresh, active-only and actor-scoped recall, index upkeep."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from memlife.ledger import AccessLedger, query_sha256
from memlife.model import MemoryRecord, MemoryType, Status, content_sha256
from memlife.online.memory import LongTermMemory, new_memory_id
from memlife.stores.sqlite import SqliteStore

NS = "/users/u1/facts"
TEA = "I only drink green tea, never coffee."


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    with SqliteStore(tmp_path / "m.db") as s:
        yield s


@pytest.fixture()
def ledger(tmp_path: Path) -> AccessLedger:
    return AccessLedger(tmp_path / "ledger")


@pytest.fixture()
def mem(store: SqliteStore, ledger: AccessLedger) -> LongTermMemory:
    return LongTermMemory(store, ledger=ledger)


def active(store: SqliteStore, actor: str = "u1", ns: str = NS) -> list[MemoryRecord]:
    return store.page(actor, ns, statuses=[Status.active]).records


def test_ids_are_unique_and_prefixed() -> None:
    ids = [new_memory_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    assert all(i.startswith("m-") and len(i) == 34 for i in ids)
    assert ids[0][2:14] <= ids[-1][2:14]  # time-ordered prefix


def test_exact_and_paraphrase_duplicates_refresh_one_record(
    mem: LongTermMemory, store: SqliteStore
) -> None:
    first = mem.remember("u1", NS, "drinks", TEA)
    assert first.created and first.refreshed_duplicate_of is None
    again = mem.remember("u1", NS, "drinks", "  i only drink GREEN tea,   never coffee ")
    para = mem.remember("u1", NS, None, "I drink only green tea, never any coffee.")
    assert (again.created, again.refreshed_duplicate_of, again.similarity) == (
        False,
        first.record_id,
        1.0,
    )
    assert not para.created and para.refreshed_duplicate_of == first.record_id
    assert para.similarity is not None and para.similarity >= 0.9
    recs = active(store)
    assert [r.id for r in recs] == [first.record_id]
    assert recs[0].content == TEA  # the original wording is kept
    assert recs[0].access_count == 2 and recs[0].last_verified_at is not None
    # the paraphrase's vector and token codes were not kept (its text is stored nowhere)
    q = "SELECT DISTINCT content_sha256 FROM embeddings"
    assert [r[0] for r in mem.cache.connection.execute(q)] == [content_sha256(TEA)]


def test_opposite_polarity_is_not_a_duplicate(mem: LongTermMemory, store: SqliteStore) -> None:
    a = mem.remember("u1", NS, None, "I drink coffee")
    b = mem.remember("u1", NS, None, "I never drink coffee")
    assert a.created and b.created and a.record_id != b.record_id
    assert len(active(store)) == 2


def test_duplicate_check_is_per_actor_and_namespace(mem: LongTermMemory) -> None:
    a = mem.remember("u1", NS, None, TEA)
    assert mem.remember("u2", "/users/u2/facts", None, TEA).created
    assert mem.remember("u1", "/users/u1/other", None, TEA).created
    assert not mem.remember("u1", NS, None, TEA).created
    assert a.created


def test_recall_finds_the_fact_first_and_ledgers_each_hit(
    mem: LongTermMemory, ledger: AccessLedger
) -> None:
    tea = mem.remember("u1", NS, None, TEA).record_id
    mem.remember("u1", NS, None, "I live in Lisbon.")
    mem.remember("u1", NS, None, "My dog is called Rex.")
    hits = mem.recall("u1", "What do I usually drink?")
    assert hits and hits[0].record.id == tea and hits[0].rank == 1
    assert all(h.similarity >= mem.threshold for h in hits)
    assert "I live in Lisbon." not in [h.record.content for h in hits]  # below threshold
    assert mem.ledger.pending == len(hits)
    mem.close()
    table = ledger.read()
    assert table.column("record_id").to_pylist() == [h.record.id for h in hits]
    assert table.column("rank").to_pylist() == [h.rank for h in hits]
    assert set(table.column("query_sha256").to_pylist()) == {
        query_sha256("What do I usually drink?")
    }
    for path in ledger.files():
        assert b"usually drink" not in path.read_bytes()


@pytest.mark.parametrize("status", [Status.superseded, Status.quarantined, Status.pending_delete])
def test_inactive_records_are_never_recalled(
    mem: LongTermMemory, store: SqliteStore, status: Status
) -> None:
    via_memory = mem.remember("u1", NS, None, TEA).record_id
    via_store = mem.remember("u1", NS, None, "I prefer herbal tea in the evening.").record_id
    assert len(mem.recall("u1", "Which tea do I drink?", k=5)) == 2
    # a superseded record names its replacement (invariant 3: set_status refuses none)
    by = None
    if status is Status.superseded:
        by = mem.remember("u1", NS, None, "I gave up tea.").record_id
    assert mem.set_status([via_memory], status, replaced_by=by) == [via_memory]
    store.set_status([via_store], status, replaced_by=by)  # the nightly job, behind our back
    hits = mem.recall("u1", "Which tea do I drink?", k=5, threshold=-1.0)
    assert not {h.record.id for h in hits} & {via_memory, via_store}


def test_recall_is_scoped_to_actor_and_namespace(mem: LongTermMemory) -> None:
    mine = mem.remember("u1", NS, None, TEA).record_id
    other_ns = mem.remember(
        "u1", "/users/u1/work", None, "I drink espresso at the office."
    ).record_id
    mem.remember("u2", "/users/u2/facts", None, "I only drink green tea, never coffee!")
    mem.remember("u2", "/users/u2/facts", None, "I drink coffee all day.")
    all_ns = mem.recall("u1", "What do I drink?", k=10, threshold=-1.0)
    assert {h.record.id for h in all_ns} == {mine, other_ns}
    assert all(h.record.actor_id == "u1" for h in all_ns)
    one_ns = mem.recall("u1", "What do I drink?", k=10, namespace=NS, threshold=-1.0)
    assert [h.record.id for h in one_ns] == [mine]
    assert mem.recall("nobody", "What do I drink?") == []


def test_index_kept_in_step_without_reload(mem: LongTermMemory) -> None:
    mem.remember("u1", NS, None, TEA)
    assert mem.load_count == 1
    mem.recall("u1", "What do I drink?")
    new = mem.remember("u1", NS, None, "My sister Ana lives in Oslo.").record_id
    hits = mem.recall("u1", "Where does my sister live?")
    assert hits[0].record.id == new
    gone = hits[0].record.id
    mem.set_status([gone], Status.quarantined)
    assert gone not in [h.record.id for h in mem.recall("u1", "Where does my sister live?")]
    assert mem.load_count == 1  # one load, then appends and drops only


def test_foreign_writes_are_picked_up(tmp_path: Path, mem: LongTermMemory) -> None:
    mem.remember("u1", NS, None, TEA)
    mem.recall("u1", "tea")
    mem.recall("u1", "tea")
    assert mem.load_count == 1  # nothing changed: no reload
    now = datetime.now(UTC)
    with SqliteStore(tmp_path / "m.db") as other:  # another process, e.g. the nightly job
        other.put_many(
            [
                MemoryRecord(
                    id="x-1",
                    actor_id="u1",
                    namespace=NS,
                    memory_type=MemoryType.semantic,
                    content="My favourite city is Kyoto.",
                    created_at=now,
                )
            ]
        )
    hits = mem.recall("u1", "Which city do I like most?")
    assert hits and hits[0].record.id == "x-1" and mem.load_count == 2
    mem.invalidate("u1")
    mem.recall("u1", "Which city do I like most?")
    assert mem.load_count == 3


def test_unrelated_writes_do_not_reload(tmp_path: Path, mem: LongTermMemory) -> None:
    mem.remember("u1", NS, None, TEA)
    with SqliteStore(tmp_path / "m.db") as other:
        other.put_many(
            [
                MemoryRecord(
                    id="x-2",
                    actor_id="u9",
                    namespace="/users/u9/facts",
                    memory_type=MemoryType.semantic,
                    content="Unrelated.",
                    created_at=datetime.now(UTC),
                )
            ]
        )
    mem.recall("u1", "tea", namespace=NS)
    assert mem.load_count == 1  # the file changed, this shard's fingerprint did not


def test_blank_fact_is_rejected(mem: LongTermMemory) -> None:
    with pytest.raises(ValueError):
        mem.remember("u1", NS, None, "   ")


def test_shard_running_centroid_tracks_appends_and_removals() -> None:
    from memlife.online.index import ShardIndex

    rng = np.random.default_rng(3)
    shard = ShardIndex("a", "ns", 8)
    vecs = rng.normal(size=(40, 8)).astype(np.float32)
    for i, v in enumerate(vecs):
        shard.append(f"r{i}", f"fact {i}", v)
    for i in (0, 7, 39, 12, 12):  # the repeat is a no-op
        shard.remove(f"r{i}")
    shard.append("r5", "fact 5 again", vecs[5] * 2)  # re-append replaces the row
    np.testing.assert_allclose(shard.centroid, shard.vectors.mean(axis=0), atol=1e-5)
    for rid in list(shard.ids):
        shard.remove(rid)
    assert shard.n == 0 and not shard.centroid.any()


def test_recall_prefers_memories_created_on_the_date_asked(mem: LongTermMemory) -> None:
    # Two equally relevant memories; the question names the day one of them was saved.
    may = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    june = datetime(2023, 6, 16, 19, 20, tzinfo=UTC)
    a = mem.remember("u1", NS, None, "Maria went to a pottery class.", at=may)
    b = mem.remember("u1", NS, None, "Maria went to a cooking class.", at=june)
    dated = mem.recall("u1", "Which class did Maria go to on 16 June, 2023?", k=2)
    assert [h.record.id for h in dated] == [b.record_id, a.record_id]
    dated = mem.recall("u1", "Which class did Maria go to in May 2023?", k=2)
    assert [h.record.id for h in dated] == [a.record_id, b.record_id]


def test_expired_hits_never_crowd_out_the_active_ones(
    mem: LongTermMemory, store: SqliteStore
) -> None:
    """Records past their deadline stay in the index until a run deletes them; recall skips
    them. Six of them rank above four active memories in another namespace: recall still
    returns k active ones (session 24 review: with the namespaces ranked as one set, the
    k + 2 candidates were all expired and recall returned nothing)."""
    from datetime import timedelta

    now = datetime.now(UTC)

    def rec(rid: str, ns: str, content: str, expired: bool) -> MemoryRecord:
        return MemoryRecord(
            id=rid, actor_id="u1", namespace=f"/users/u1/{ns}", memory_type=MemoryType.semantic,
            content=content, created_at=now - timedelta(days=3),
            expires_at=now - timedelta(hours=1) if expired else None,
        )  # fmt: skip

    store.put_many(
        [rec(f"x-{i}", "trips", f"Planned a hiking trip to the Alps in summer {2010 + i}.", True)
         for i in range(6)]
        + [rec(f"a-{i}", "notes", f"Went hiking in the Alps with friends, trip number {i}.", False)
           for i in range(4)]
    )  # fmt: skip
    hits = mem.recall("u1", "hiking trip to the Alps", k=3, log=False)
    assert len(hits) == 3 and all(h.record.id.startswith("a-") for h in hits)
