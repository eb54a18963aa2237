"""The benchmarks' own honesty (audit 44h, session 44): what a bench reports must be what it measured.

bench/table.py prints "model calls / embeddings / writes 0 / 0 / 0" for the second night
(README's table), and BENCHMARKS.md gives bench/recall_memory.py's figure as the whole
``LongTermMemory.recall``. Each test runs the bench's own code on the real store and the
real embedder and checks that its figure can see what it claims to count or time.
"""

from __future__ import annotations

import random
import sqlite3
import sys
from pathlib import Path

import pytest

from memlife.embed import MiniLMEmbedder, default_embedder
from memlife.embed_cache import TOKENS

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
import recall_memory  # noqa: E402
import table  # noqa: E402


def _keep_classes_as_they_are(monkeypatch: pytest.MonkeyPatch) -> None:
    """table.Counters wraps methods of the real classes for good: put them back after."""
    from memlife.consolidate.anthropic import AnthropicConsolidator
    from memlife.consolidate.extractive import ExtractiveConsolidator
    from memlife.stores.sqlite import SqliteStore

    for cls, names in (
        (AnthropicConsolidator, ("consolidate",)),
        (ExtractiveConsolidator, ("consolidate",)),
        (MiniLMEmbedder, ("embed", "embed_with_tokens", "embed_query")),
        (SqliteStore, ("put_many", "set_status", "delete_many", "add_tombstones",
                       "put_replacement", "insert_new")),
    ):  # fmt: skip
        for name in names:
            monkeypatch.setattr(cls, name, getattr(cls, name))


def test_the_tables_embedding_counter_sees_what_a_night_embeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adversary: a night that embeds texts (a first apply night, cold cache: it must) while
    the table's counter, the one behind README's "0 / 0 / 0", reads 0. What must hold: every
    vector the night stored is counted as embedded, so a 0 on the second night means none."""
    _keep_classes_as_they_are(monkeypatch)
    home = tmp_path / "home"
    monkeypatch.setenv("MEMLIFE_HOME", str(home))
    db = tmp_path / "store.db"
    table.build_store(db, 300)
    counters = table.Counters()
    assert table.run_default(db, home, dry_run=False)["status"] == "success"
    con = sqlite3.connect(db)
    (stored,) = con.execute(
        "SELECT COUNT(*) FROM embeddings WHERE model_id NOT LIKE ?", (f"%{TOKENS}",)
    ).fetchone()
    con.close()
    assert stored > 0  # the night did embed
    assert counters.embedded >= stored


def test_recall_memory_times_recall_on_a_store_as_remember_writes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Adversary: the bench that stands for "the whole LongTermMemory.recall" seeds a store
    no user has (vectors without token codes), so each recall re-embeds up to 50 stored
    memories (measured: p95 385 ms at 10k against 24 ms with codes, one core). What must
    hold: once the shard is loaded, a timed recall embeds its query only, as on a store
    that `remember` (or a night) wrote."""
    from memlife.online.memory import LongTermMemory

    inside = [False]
    embedded_in_recall: list[int] = []
    real_embed, real_recall = MiniLMEmbedder.embed_with_tokens, LongTermMemory.recall

    def embed_with_tokens(self, texts):  # type: ignore[no-untyped-def]
        if inside[0]:
            embedded_in_recall.append(len(texts))
        return real_embed(self, texts)

    def recall(self, *a, **kw):  # type: ignore[no-untyped-def]
        inside[0] = True
        try:
            return real_recall(self, *a, **kw)
        finally:
            inside[0] = False

    monkeypatch.setattr(MiniLMEmbedder, "embed_with_tokens", embed_with_tokens)
    monkeypatch.setattr(LongTermMemory, "recall", recall)
    rng = random.Random(7)
    pool = default_embedder().embed(recall_memory.sentences(20, rng))
    queries = recall_memory.questions(4, rng)
    recall_memory.run_size(200, pool, queries, rng, 5)
    assert embedded_in_recall == []


def test_the_tables_second_night_is_another_night(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adversary: the row "second-night apply" (README: "runs in a new process after the
    first night's, as a scheduler starts each night") times a rerun of the first night's
    own run, whose sealed receipt commits nothing by design. What must hold: the two
    apply children of the table are two runs, each with its own run folder."""
    _keep_classes_as_they_are(monkeypatch)  # apply2 counts through table.Counters
    home = tmp_path / "home"
    monkeypatch.setenv("MEMLIFE_HOME", str(home))
    db = tmp_path / "store.db"
    table.build_store(db, 100)
    monkeypatch.setattr(sys, "argv", ["table.py"])
    for kind in ("apply1", "apply2"):  # as main() runs them, each a child of its own
        assert table.child(kind, [str(db), str(home)])["status"] == "success"
    runs = {p.parent.name for p in (home / "receipts" / "runs").glob("*/*/*/*/manifest.json")}
    assert len(runs) == 2, runs
