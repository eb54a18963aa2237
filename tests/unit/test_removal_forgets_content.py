"""A removed record (deleted by expiry, erased) takes what its content left beside the
store with it.

Found by review (session 16): the nightly delete removed the record but kept its content's
vector and token codes (whose word-piece ids spell the text), its inferred subject key
(content words) and the shard's derived rows for ever; and the key stayed on every record
grouped under it, erasure included. A second review found the delete dropping a vector a
held record with the same text still uses, and an online shard load storing an expired
record's vector again after the nightly delete.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from memlife.embed_cache import EmbeddingCache
from memlife.erase import erase
from memlife.group import subject_keywords
from memlife.ledger import AccessLedger
from memlife.model import MemoryRecord, MemoryType, RetentionClass, content_sha256, utcnow
from memlife.online.memory import LongTermMemory
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.gate import NOW

LEADER = "Maria adopted a grey cat named Pixel from the shelter."
KEPT = "Maria's grey cat Pixel likes sleeping on the windowsill."
ALSO = "Maria takes Pixel the cat to the vet every spring."


def rec(rid: str, content: str, **kw: object) -> MemoryRecord:
    base = dict(id=rid, actor_id="u-1", namespace="/users/u-1/facts",
                memory_type=MemoryType.semantic, content=content,
                created_at=NOW - timedelta(days=30))  # fmt: skip
    return MemoryRecord(**(base | kw))  # type: ignore[arg-type]


def rows_of(con, text: str) -> int:
    q = "SELECT COUNT(*) FROM embeddings WHERE content_sha256 = ?"
    return int(con.execute(q, (content_sha256(text),)).fetchone()[0])


def words_left(con, key: str) -> list[str]:
    """Where the removed record's key (its words) is still kept: subject keys, derived rows."""
    keys = [k for (k,) in con.execute("SELECT subject FROM inferred_subjects") if k == key]
    derived = [v for (v,) in con.execute("SELECT value FROM derived") if key in v]
    return keys + derived


def first_night(home: Path, *records: MemoryRecord) -> str:
    """Seed, run a dry run (its own cache file) and an apply run; the leader's key."""
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([
            rec("X", LEADER, expires_at=NOW + timedelta(hours=12)),
            rec("Y", KEPT),
            rec("Z", ALSO),
            *records,
        ])  # fmt: skip
    run_local(RunConfig(dry_run=True, now=NOW, consolidate=False))
    run_local(RunConfig(dry_run=False, now=NOW, consolidate=False))
    with SqliteStore(home / "memlife.db") as store:
        con = store.connection
        assert rows_of(con, LEADER) == 2  # vector and token codes: the setup holds
        keys = dict(con.execute("SELECT record_id, subject FROM inferred_subjects"))
        assert keys["X"].startswith(subject_keywords(LEADER) + " ~")  # X's words made it
        assert keys["Y"] == keys["X"] and words_left(con, keys["X"])  # Y carries them too
        return keys["X"]


def test_an_expired_record_leaves_no_vector_codes_or_subject_words(home: Path) -> None:
    held = rec("H", LEADER, retention_class=RetentionClass.legal_hold, subject="adoption")
    key = first_night(home, held)
    home_cache = EmbeddingCache(path=home / "embeddings.db")
    assert rows_of(home_cache.connection, KEPT) == 2
    home_cache.close()

    run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=1), consolidate=False))

    with SqliteStore(home / "memlife.db") as store:
        con = store.connection
        assert store.get("X") is None and store.get("Y") is not None
        assert words_left(con, key) == []
        assert rows_of(con, KEPT) == 2
        # the held record says the same as X: its text's vector is not X's to take
        assert rows_of(con, LEADER) == 2
    home_cache = EmbeddingCache(path=home / "embeddings.db")
    assert rows_of(home_cache.connection, KEPT) == 2 and rows_of(home_cache.connection, LEADER) == 2
    home_cache.close()


def test_an_expired_records_text_goes_when_no_other_record_holds_it(home: Path) -> None:
    first_night(home)
    run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=1), consolidate=False))
    with SqliteStore(home / "memlife.db") as store:
        assert rows_of(store.connection, LEADER) == 0
    home_cache = EmbeddingCache(path=home / "embeddings.db")
    assert rows_of(home_cache.connection, LEADER) == 0
    assert rows_of(home_cache.connection, KEPT) == 2
    home_cache.close()


def test_removing_a_record_whose_words_did_not_make_the_key_moves_no_key(home: Path) -> None:
    """Review: every member's removal took the key off the whole group, so a shard with
    rolling expiry lost its keys every night (hold by subject missed, the consolidation
    memo missed, the model was asked again)."""
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([
            rec("X", LEADER),
            rec("Y", KEPT),
            rec("Z", ALSO, expires_at=NOW + timedelta(hours=12)),
        ])  # fmt: skip
    run_local(RunConfig(dry_run=False, now=NOW, consolidate=False))
    with SqliteStore(home / "memlife.db") as store:
        before = dict(store.connection.execute("SELECT record_id, subject FROM inferred_subjects"))
    assert before["Z"] == before["X"] == before["Y"]
    run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=1), consolidate=False))
    with SqliteStore(home / "memlife.db") as store:
        assert store.get("Z") is None
        after = dict(store.connection.execute("SELECT record_id, subject FROM inferred_subjects"))
    assert after == {"X": before["X"], "Y": before["Y"]}


def test_erasure_takes_the_erased_words_off_every_record_grouped_under_them(home: Path) -> None:
    key = first_night(home)
    with SqliteStore(home / "memlife.db") as store:
        out = erase(store, "u-1", ids=["X"], now=NOW + timedelta(hours=1))
        con = store.connection
        counts = out["counts"] if "counts" in out else out
        assert counts["inferred_subjects_forgotten"] == 1  # X's own key; Y's and Z's apart
        assert counts["inferred_subjects_rekeyed"] == 2
        assert store.get("X") is None
        assert words_left(con, key) == []


def test_a_clean_up_that_fails_deletes_nothing_and_the_retry_receipts_the_delete(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review: the clean-up ran after the delete; when it raised (a throttled state table,
    a locked cache file) the records were gone and the retry could only say
    already_absent: no receipt ever said deleted. It now runs first."""
    from memlife.errors import StoreError

    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("X", LEADER, expires_at=NOW + timedelta(hours=12)), rec("Y", KEPT)])
    real, boom = EmbeddingCache.delete_for, [1]

    def flaky(self: EmbeddingCache, shas: object) -> int:
        if boom:
            boom.pop()
            raise StoreError("throttled")
        return real(self, shas)  # type: ignore[arg-type]

    monkeypatch.setattr(EmbeddingCache, "delete_for", flaky)
    night = run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=1), consolidate=False))
    assert night.lifecycle["failed"] == 1 and not boom
    with SqliteStore(home / "memlife.db") as store:
        assert store.get("X") is not None  # nothing deleted without its clean-up
    run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=2), consolidate=False))
    with SqliteStore(home / "memlife.db") as store:
        assert store.get("X") is None
    outcomes = [
        json.loads(p.read_text()).get("outcome")
        for p in (home / "receipts").rglob("*.json")
        if '"X"' in p.read_text() and '"delete"' in p.read_text()
    ]
    assert "deleted" in outcomes and "already_absent" not in outcomes


def test_an_online_load_racing_the_nightly_delete_stores_no_expired_vector(home: Path) -> None:
    """The load read X (expired, not yet deleted); the nightly run deleted it and dropped
    its vector; then the load stored the vector it computed: X's text was back for good."""
    now = utcnow()
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([
            rec("X", LEADER, expires_at=now - timedelta(hours=1), created_at=now - timedelta(days=3)),
            rec("Y", KEPT, created_at=now - timedelta(days=3)),
        ])  # fmt: skip
    store = SqliteStore(home / "memlife.db")
    mem = LongTermMemory(store, ledger=AccessLedger(home / "ledger"))
    real, ran = mem.cache.get_or_embed, []

    def racing(records, **kw):  # the nightly run lands between the load's read and its write
        if not ran:
            ran.append(run_local(RunConfig(dry_run=False, now=now, consolidate=False)))
        return real(records, **kw)

    mem.cache.get_or_embed = racing  # type: ignore[method-assign]
    hits = mem.recall("u-1", "pets", threshold=-1.0)
    assert ran and ran[0].lifecycle["deleted"] == 1
    assert store.get("X") is None and "X" not in {h.record.id for h in hits}
    assert rows_of(store.connection, LEADER) == 0
    assert rows_of(store.connection, KEPT) == 2
    store.close()


def test_an_online_load_racing_a_persons_delete_keeps_no_vector(home: Path) -> None:
    """A record imported without a vector is deleted (a reviewer's decision: no tombstone)
    while an online load that read it embeds it: the vector it stores is dropped again."""
    now = utcnow()
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([
            rec("X", LEADER, created_at=now - timedelta(days=3)),
            rec("Y", KEPT, created_at=now - timedelta(days=3)),
        ])  # fmt: skip
    store = SqliteStore(home / "memlife.db")
    mem = LongTermMemory(store, ledger=AccessLedger(home / "ledger"))
    real, ran = mem.cache.get_or_embed, []

    def racing(records, **kw):  # the delete lands between the load's read and its write
        if not ran:
            ran.append(store.delete_many(["X"]))
        return real(records, **kw)

    mem.cache.get_or_embed = racing  # type: ignore[method-assign]
    mem.recall("u-1", "pets", threshold=-1.0)
    assert ran and store.get("X") is None
    assert rows_of(store.connection, LEADER) == 0
    assert rows_of(store.connection, KEPT) == 2
    store.close()


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])
