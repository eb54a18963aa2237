"""EmbeddingCache: a content is embedded once in its life, per model; erasure removes vectors."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from memlife.backends import embedding_cache
from memlife.embed import default_embedder
from memlife.embed_cache import EmbeddingCache
from memlife.model import MemoryRecord, content_sha256
from memlife.stores.sqlite import SqliteStore


class CountingEmbedder:
    """Deterministic unit vectors from a hash; counts every text it is asked to embed."""

    def __init__(self, model_id: str = "fake-v1", dim: int = 8) -> None:
        self.model_id, self.dim = model_id, dim
        self.texts: list[str] = []
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.texts.extend(texts)
        rows = []
        for t in texts:
            raw = np.frombuffer(hashlib.sha256(f"{self.model_id}:{t}".encode()).digest(), np.uint8)
            v = raw[: self.dim].astype(np.float32) + 1.0
            rows.append(v / np.linalg.norm(v))
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)


def recs(*contents: str) -> list[MemoryRecord]:
    t = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        MemoryRecord(
            id=f"r{i}",
            actor_id="u",
            namespace="/n",
            memory_type="semantic",
            content=c,
            created_at=t,
        )
        for i, c in enumerate(contents)
    ]


RECORDS = recs("Drinks tea.", "Lives in Oslo.", "Drinks tea.", "Has a dog.", "Likes jazz.")


def test_second_call_embeds_nothing(tmp_path: Path) -> None:
    emb = CountingEmbedder()
    cache = EmbeddingCache(emb, path=tmp_path / "e.db", batch_size=2)
    first = cache.get_or_embed(RECORDS)
    assert sorted(emb.texts) == sorted(set(r.content for r in RECORDS))  # duplicate embedded once
    assert (cache.stats.misses, cache.stats.hits, cache.stats.batches) == (4, 0, 2)
    np.testing.assert_array_equal(first[0], first[2])
    embedded = len(emb.texts)
    second = cache.get_or_embed(RECORDS)
    assert len(emb.texts) == embedded  # zero new embeddings
    assert (cache.stats.misses, cache.stats.hits) == (4, 5)
    np.testing.assert_array_equal(first, second)
    assert first.dtype == np.float32 and first.shape == (5, 8)


def test_persists_across_instances_and_keys_by_model(tmp_path: Path) -> None:
    EmbeddingCache(CountingEmbedder(), path=tmp_path / "e.db").get_or_embed(RECORDS)
    again = CountingEmbedder()
    EmbeddingCache(again, path=tmp_path / "e.db").get_or_embed(RECORDS)
    assert again.texts == []
    other_model = CountingEmbedder(model_id="fake-v2", dim=4)
    vecs = EmbeddingCache(other_model, path=tmp_path / "e.db").get_or_embed(RECORDS)
    assert len(other_model.texts) == 4 and vecs.shape == (5, 4)  # a new model misses


def test_lives_in_the_store_file_and_erasure_deletes(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "memlife.db")
    emb = CountingEmbedder()
    cache = embedding_cache(store, emb)
    cache.get_or_embed(RECORDS)
    (n,) = store.connection.execute("SELECT COUNT(*) FROM embeddings").fetchone()
    assert n == 4 == len(cache)
    assert cache.delete_for([content_sha256("Drinks tea."), "no-such-sha"]) == 1
    emb.texts.clear()
    cache.get_or_embed(RECORDS)
    assert emb.texts == ["Drinks tea."]  # only the erased content is embedded again
    store.close()


def test_default_location_is_under_memlife_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path / "home"))
    cache = EmbeddingCache(CountingEmbedder())
    cache.get_or_embed(RECORDS[:1])
    cache.close()
    assert (tmp_path / "home" / "embeddings.db").is_file()


def test_real_model_vectors_round_trip_exactly(tmp_path: Path) -> None:
    emb = default_embedder()
    cache = EmbeddingCache(emb, path=tmp_path / "e.db")
    texts = [r.content for r in RECORDS]
    cache.get_or_embed(RECORDS)
    cached = EmbeddingCache(emb, path=tmp_path / "e.db").get_or_embed(RECORDS)
    np.testing.assert_allclose(cached, emb.embed(texts), atol=1e-6)


def test_recent_vectors_answer_again_without_a_read_and_go_with_an_erasure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    emb = CountingEmbedder()
    cache = EmbeddingCache(emb, path=tmp_path / "e.db", recent=3)
    reads: list[int] = []
    lookup = EmbeddingCache._lookup
    monkeypatch.setattr(
        EmbeddingCache, "_lookup", lambda self, shas, m, d: reads.append(len(shas)) or lookup(self, shas, m, d)
    )  # fmt: skip
    first = cache.get_or_embed(RECORDS[:2])
    again = cache.get_or_embed(RECORDS[:2])
    assert reads == [2]  # the second answer came from memory
    np.testing.assert_array_equal(first, again)
    assert (cache.stats.misses, cache.stats.hits) == (2, 2)  # counted as before: hits
    plain = EmbeddingCache(emb, path=tmp_path / "e.db").get_or_embed(RECORDS[:2])
    np.testing.assert_array_equal(first, plain)  # the same rows the table holds
    cache.get_or_embed(RECORDS[3:5])  # over the bound (3): what came before is forgotten
    cache.get_or_embed(RECORDS[:1])
    assert reads[-1] == 1
    cache.delete_for([content_sha256(RECORDS[3].content)])  # erasure: memory forgets it too
    embedded = len(emb.texts)
    cache.get_or_embed(RECORDS[3:4])
    assert len(emb.texts) == embedded + 1  # embedded again: no copy survived the erasure


def test_a_refused_commit_leaves_no_transaction_open(tmp_path: Path) -> None:
    """Outside WAL a reader's lock refuses the COMMIT of a write that does not wait: the
    write is rolled back, and the connection (shared with the store) is left clean."""
    import sqlite3

    path = tmp_path / "e.db"
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=DELETE")
    cache = EmbeddingCache(CountingEmbedder(), connection=conn)
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM embeddings").fetchone()  # holds a shared lock
    try:
        assert cache._store([("s", "m", 1, b"1234")], wait=False) is False
        assert not conn.in_transaction
    finally:
        reader.execute("ROLLBACK")
        reader.close()
    assert cache._store([("s", "m", 1, b"1234")], wait=False) is True
    assert conn.execute("SELECT COUNT(*) FROM embeddings").fetchone() == (1,)
