"""Audit 52c: the embedding cache's identity and its own file.

1. A vector is cached under (content sha256, model id). ``MiniLMEmbedder`` takes a
   ``max_tokens`` (the window a text is cut at) and other model or tokenizer files, yet
   its ``model_id`` was the pinned model's whatever they were: a long text embedded by an
   embedder cut at 128 tokens was served, from the shared cache, to the default embedder
   (256 tokens) as its own vector (cosine about 0.92 with the vector it computes), and
   the other way round; which one recall ranked on depended on who embedded it first.
2. The dry runs' cache, ``$MEMLIFE_HOME/embeddings.db``, is opened by every erasure and
   every nightly delete (what leaves the store leaves it too). A file there that SQLite
   cannot read (a copy cut short, a file of another kind under that name) stopped every
   erasure with SQLite's bare "file is not a database" / "database disk image is
   malformed", naming no file; another application's database under that name was
   switched to WAL and given memlife's table; one with its own ``embeddings`` table
   failed with "no such column: content_sha256".

Real SQLite files, the bundled MiniLM, the real erase path; nothing mocked.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from memlife.embed import MiniLMEmbedder, default_embedder
from memlife.embed_cache import EmbeddingCache
from memlife.errors import StoreError
from tests.unit.test_embed_cache import CountingEmbedder

LONG = " ".join(
    f"On day {i} my sister Anna planted tulips and roses in the garden behind her house."
    for i in range(30)
)  # about 600 word pieces: past a 128- and a 256-token window


# -- 1. identity: another window is another model ------------------------------------------
def test_a_vector_cut_at_another_window_is_not_served_as_the_defaults(tmp_path: Path) -> None:
    short_window = MiniLMEmbedder(max_tokens=128, intra_op_threads=1)
    theirs = EmbeddingCache(short_window, path=tmp_path / "e.db").get_or_embed_texts([LONG])[0]
    mine = default_embedder().embed([LONG])[0]
    assert float(theirs @ mine) < 0.99  # two windows, two vectors
    served = EmbeddingCache(default_embedder(), path=tmp_path / "e.db").get_or_embed_texts([LONG])
    np.testing.assert_allclose(served[0], mine, atol=1e-5)


def test_control_the_default_configuration_keeps_its_id_and_shares_the_cache(
    tmp_path: Path,
) -> None:
    """Control: the pinned model at its own window keeps the id every stored vector is
    under, and a second embedder of that configuration is answered from the cache."""
    assert default_embedder().model_id == "all-MiniLM-L6-v2-onnx-int8"
    same = MiniLMEmbedder(intra_op_threads=1)
    assert same.model_id == default_embedder().model_id
    EmbeddingCache(default_embedder(), path=tmp_path / "e.db").get_or_embed_texts([LONG])
    again = EmbeddingCache(same, path=tmp_path / "e.db")
    again.get_or_embed_texts([LONG])
    assert (again.stats.hits, again.stats.misses) == (1, 0)


# -- 2. the cache's own file -------------------------------------------------------------
def _not_sqlite(p: Path) -> None:
    p.write_bytes(b"<html><body>not a database</body></html>" * 40)


def _cut_short(p: Path) -> None:
    cache = EmbeddingCache(CountingEmbedder(), path=p)
    cache.get_or_embed_texts([f"text {i}" for i in range(200)])
    cache.fold_wal()
    cache.close()
    p.write_bytes(p.read_bytes()[:1500])


def _foreign_embeddings_table(p: Path) -> None:
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE embeddings (id INTEGER PRIMARY KEY, text TEXT, vec BLOB)")
    con.commit()
    con.close()


def _another_application(p: Path) -> None:
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    con.commit()
    con.close()


DAMAGE = [_not_sqlite, _cut_short, _foreign_embeddings_table, _another_application]


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda f: f.__name__.strip("_"))
def test_a_cache_file_memlife_cannot_use_is_refused_naming_it(tmp_path: Path, damage) -> None:
    path = tmp_path / "embeddings.db"
    damage(path)
    before = path.read_bytes()
    with pytest.raises(StoreError, match=str(path)):
        EmbeddingCache(CountingEmbedder(), path=path)
    assert path.read_bytes() == before  # refused before any write


def test_an_erasure_with_a_damaged_dry_run_cache_names_the_file(home: Path) -> None:
    from memlife.audit import FileSink
    from memlife.erase import erase
    from memlife.stores.sqlite import SqliteStore
    from tests.unit.test_guards_session33 import POLICY, T0, rec

    home.mkdir(parents=True, exist_ok=True)
    _not_sqlite(home / "embeddings.db")
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("m-x", "Likes tea.")])
        with pytest.raises(StoreError, match="embeddings.db") as err:
            erase(store, "u-1", ids=["m-x"], policy=POLICY, receipts=FileSink(home / "r"), now=T0)
        assert "delete it" in str(err.value)  # what the operator can do: it is derived
        assert store.get("m-x") is not None  # refused before anything was erased


def test_control_an_erasure_with_a_sound_dry_run_cache_goes_ahead(home: Path) -> None:
    from memlife.audit import FileSink
    from memlife.erase import erase
    from memlife.stores.sqlite import SqliteStore
    from tests.unit.test_guards_session33 import POLICY, T0, rec

    home.mkdir(parents=True, exist_ok=True)
    EmbeddingCache(CountingEmbedder(), path=home / "embeddings.db").close()
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("m-x", "Likes tea.")])
        out = erase(store, "u-1", ids=["m-x"], policy=POLICY, receipts=FileSink(home / "r"), now=T0)
        assert out["erased"] == ["m-x"] and store.get("m-x") is None


def test_control_files_memlife_wrote_still_open(tmp_path: Path) -> None:
    """Control: an empty file, a cache file memlife wrote (vectors and kept model answers
    beside them) and a store file (the cache in the store's file) all open as before."""
    empty = tmp_path / "empty.db"
    empty.touch()
    EmbeddingCache(CountingEmbedder(), path=empty).close()
    ours = tmp_path / "ours.db"
    first = EmbeddingCache(CountingEmbedder(), path=ours)
    first.get_or_embed_texts(["Likes tea."])
    first.connection.execute(  # type: ignore[union-attr]
        "CREATE TABLE model_answers (digest TEXT, actor_id TEXT, namespace TEXT, output TEXT)"
    )
    first.close()
    again = EmbeddingCache(CountingEmbedder(), path=ours)
    again.get_or_embed_texts(["Likes tea."])
    assert again.stats.hits == 1
    again.close()
    from memlife.stores.sqlite import SqliteStore

    with SqliteStore(tmp_path / "memlife.db"):
        pass
    EmbeddingCache(CountingEmbedder(), path=tmp_path / "memlife.db").close()
