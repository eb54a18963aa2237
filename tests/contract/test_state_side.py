"""Quarantine snapshots, pending erasures, tombstones and the embedding cache on DynamoDB
(moto): the same answers as the SQLite side tables, no content in any item."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from memlife import tombstones
from memlife.model import MemoryRecord, content_sha256
from memlife.state.embeddings import DynamoEmbeddingCache
from memlife.state.side import DynamoSideTables, SqliteSideTables, side_tables
from tests.support.aws_state import aws_state
from tests.unit.test_embed_cache import CountingEmbedder, recs


@pytest.fixture()
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    import memlife.state as state_mod

    with aws_state("inprocess") as (url, state):
        monkeypatch.setenv("MEMLIFE_STATE", url)
        monkeypatch.setattr(state_mod, "_open", {url: state})
        yield state


@pytest.fixture(params=["sqlite", "dynamodb"])
def side(request, aws) -> object:
    if request.param == "sqlite":
        return SqliteSideTables(sqlite3.connect(":memory:"), threading.RLock())
    return DynamoSideTables(aws)


class RemoteStore:
    """A store without a SQLite file of its own (AgentCore-like) for the dispatch, its
    records gone (what an erasure leaves: a source id is read to tell a reused one)."""

    connection = None

    def get(self, record_id: str) -> None:
        return None


def test_snapshots_and_pending_erasures(side) -> None:
    side.put_snapshot("m-1", ("active", None, '{"supersedes": []}'), "2026-11-01T00:00:00+00:00")
    side.put_snapshot("m-2", ("retained", "2026-10-01T00:00:00+00:00", "{}"), "t")
    side.put_snapshot("m-1", ("superseded", None, "{}"), "t2")  # replaced, as INSERT OR REPLACE
    assert side.snapshots(["m-1", "m-2", "m-3"]) == {
        "m-1": ("superseded", None, "{}"), "m-2": ("retained", "2026-10-01T00:00:00+00:00", "{}"),
    }  # fmt: skip
    side.forget_snapshots(["m-1"])
    assert list(side.snapshots(["m-1", "m-2"])) == ["m-2"]

    row = {"record_id": "m-5", "actor_id": "u-1", "namespace": "/n", "operation_id": "op-1",
           "run_id": "manual-1", "requested_at": "2026-11-01T00:00:00+00:00"}  # fmt: skip
    side.add_pending(row)
    side.add_pending({**row, "operation_id": "op-2"})  # the first deferral stands
    side.add_pending({**row, "record_id": "m-6", "actor_id": "u-2", "requested_at": "2026-11-02"})
    assert [p["record_id"] for p in side.pending()] == ["m-5", "m-6"]
    assert side.pending("u-1") == [row]
    assert side.forget_pending(["m-5", "m-7"]) == ["op-1"]
    assert [p["record_id"] for p in side.pending()] == ["m-6"]


def test_dispatch_follows_the_state_setting(aws) -> None:
    assert isinstance(side_tables(RemoteStore()), DynamoSideTables)


def _record(
    rid: str, content: str, actor: str = "u-1", supersedes: list[str] | None = None
) -> MemoryRecord:
    r = recs(content)[0]
    prov = r.provenance.model_copy(update={"supersedes": supersedes or []})
    return r.model_copy(update={"id": rid, "actor_id": actor, "provenance": prov})


@pytest.fixture(params=["dynamodb", "side-file", "store-file"])
def tomb_store(request, aws, tmp_path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """A store whose tombstones live in DynamoDB, in $MEMLIFE_HOME/tombstones.db, or in the
    store's own SQLite file."""
    if request.param == "dynamodb":
        yield RemoteStore()
        return
    monkeypatch.delenv("MEMLIFE_STATE")
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path))
    if request.param == "side-file":
        yield RemoteStore()
        return
    from memlife.stores.sqlite import SqliteStore

    with SqliteStore(tmp_path / "store.db") as own:
        yield own


def test_a_source_tombstone_is_the_erasing_actors_only(tomb_store) -> None:
    """Record ids are not unique across actors (an id freed by an erasure can be taken by
    another actor): u-1's erased m-1 refuses u-1's replacements naming m-1, never u-2's."""
    tombstones.add(tomb_store, [_record("m-1", "Drinks only green tea, never coffee.")])
    mine = _record("m-4", "Prefers tea.", supersedes=["m-1"])
    theirs = _record("m-5", "Prefers tea.", actor="u-2", supersedes=["m-1", "m-2"])
    assert tombstones.refusal(tomb_store, mine) == "ERASED_SOURCE"
    assert tombstones.refusal(tomb_store, theirs) is None


def test_tombstones_refuse_erased_content_and_sources(aws) -> None:
    store = RemoteStore()
    erased = _record("m-1", "Drinks only green tea, never coffee.")
    assert tombstones.add(store, [erased]) >= 1
    assert tombstones.add(store, [erased]) == 0  # idempotent
    same = _record("m-2", "drinks only green tea never coffee")  # case and punctuation folded
    assert tombstones.refusal(store, same) == "ERASED_CONTENT"
    other_actor = _record("m-3", erased.content, actor="u-2")
    assert tombstones.refusal(store, other_actor) is None  # tombstones are per actor
    derived = _record("m-4", "Prefers tea.", supersedes=["m-1"])
    assert tombstones.refusal(store, derived) == "ERASED_SOURCE"
    assert tombstones.refusal(store, _record("m-5", "Likes jazz.")) is None
    rows = tombstones.listing(store)
    assert [t["record_id"] for t in rows] == ["m-1"] and rows[0]["actor_id"] == "u-1"
    assert rows[0]["content_sha256"] == content_sha256(erased.content)
    dumped = str(aws.ddb.scan(TableName=aws.table)["Items"])
    assert "green tea" not in dumped  # ids and hashes only


def test_embedding_cache_on_dynamodb(aws) -> None:
    emb = CountingEmbedder()
    cache = DynamoEmbeddingCache(aws, emb)
    texts = ["alpha", "beta", "alpha"]
    first = cache.get_or_embed_texts(texts)
    assert emb.texts == ["alpha", "beta"]
    again = DynamoEmbeddingCache(aws, emb).get_or_embed_texts(texts)  # another worker
    assert emb.texts == ["alpha", "beta"]  # found, not embedded again
    np.testing.assert_array_equal(first, again)
    assert cache.stats.misses == 2
    other_model = DynamoEmbeddingCache(aws, CountingEmbedder(model_id="fake-v2"))
    other_model.get_or_embed_texts(["alpha"])
    shas = [content_sha256("alpha")]
    assert cache.count(shas) == 2  # two models
    assert cache.delete_for(shas) == 2  # erasure: every model's vector of that content
    assert cache.count(shas) == 0 and cache.count([content_sha256("beta")]) == 1


def test_token_codes_on_dynamodb_are_found_by_another_worker_and_erased(aws) -> None:
    from memlife.embed import default_embedder

    cache = DynamoEmbeddingCache(aws, default_embedder())
    texts = ["Caroline went to the LGBTQ support group.", "Melanie paints sunsets."]
    cache.get_or_embed_texts(texts)  # one pass: vectors and token codes
    shas = [content_sha256(t) for t in texts]
    assert cache.count(shas) == 4
    other = DynamoEmbeddingCache(aws, default_embedder())
    got = other.token_codes(texts)
    assert got is not None and other.stats.misses == 0  # read, not embedded again
    assert [len(c) for c in got] == [len(c) for c in cache.token_codes(texts) or []]
    assert cache.delete_for(shas[:1]) == 2  # the vector and the codes of that content
    assert cache.count(shas) == 2
