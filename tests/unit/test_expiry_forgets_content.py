"""A record deleted by expiry takes what its content left beside the store with it.

Found by review (session 16): the nightly delete removed the record but kept its content's
vector and token codes (whose word-piece ids spell the text) and its inferred subject key
(content words) for ever, under an id another actor's record may take later.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from memlife.embed_cache import EmbeddingCache
from memlife.model import MemoryRecord, MemoryType, RetentionClass, content_sha256
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.gate import NOW

EXPIRING = "Maria adopted a grey cat named Pixel from the shelter."
HELD = "Maria keeps the cat's adoption papers in the blue folder."
KEPT = "Maria's grey cat Pixel likes sleeping on the windowsill."


def rec(rid: str, content: str, **kw: object) -> MemoryRecord:
    base = dict(id=rid, actor_id="u-1", namespace="/users/u-1/facts",
                memory_type=MemoryType.semantic, content=content,
                created_at=NOW - timedelta(days=30))  # fmt: skip
    return MemoryRecord(**(base | kw))  # type: ignore[arg-type]


def rows_of(con, text: str) -> int:
    q = "SELECT COUNT(*) FROM embeddings WHERE content_sha256 = ?"
    return int(con.execute(q, (content_sha256(text),)).fetchone()[0])


def test_an_expired_record_leaves_no_vector_codes_or_subject_key(home: Path) -> None:
    soon = NOW + timedelta(hours=12)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([
            rec("X", EXPIRING, expires_at=soon),
            rec("H", HELD, expires_at=soon, retention_class=RetentionClass.legal_hold),
            rec("Y", KEPT),
            rec("Z", "Maria takes Pixel the cat to the vet every spring."),
        ])  # fmt: skip
    run_local(RunConfig(dry_run=True, now=NOW, consolidate=False))  # the dry runs' own file
    run_local(RunConfig(dry_run=False, now=NOW, consolidate=False))  # vectors, inferred keys
    with SqliteStore(home / "memlife.db") as store:
        con = store.connection
        assert rows_of(con, EXPIRING) == 2  # vector and token codes: the setup holds
        inferred = dict(con.execute("SELECT record_id, subject FROM inferred_subjects"))
        assert "X" in inferred
    home_cache = EmbeddingCache(path=home / "embeddings.db")
    assert rows_of(home_cache.connection, EXPIRING) == 2
    home_cache.close()

    run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=1), consolidate=False))

    with SqliteStore(home / "memlife.db") as store:
        con = store.connection
        assert store.get("X") is None and store.get("H") is not None
        assert rows_of(con, EXPIRING) == 0
        assert rows_of(con, HELD) == 2 and rows_of(con, KEPT) == 2  # only what left
        left = dict(con.execute("SELECT record_id, subject FROM inferred_subjects"))
        assert "X" not in left and left["Y"] == inferred["Y"]
    home_cache = EmbeddingCache(path=home / "embeddings.db")
    assert rows_of(home_cache.connection, EXPIRING) == 0
    assert rows_of(home_cache.connection, KEPT) == 2
    home_cache.close()
