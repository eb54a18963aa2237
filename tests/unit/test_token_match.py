"""Token alignment (memlife.token_match): codes, the score, rank's use of it, storage."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlife.embed import default_embedder
from memlife.embed_cache import TOKENS, EmbeddingCache
from memlife.model import MemoryRecord, content_sha256
from memlife.retrieval import rank
from memlife.token_match import (
    QueryTokens,
    TokenCodes,
    alignment,
    pack,
)

DIM = 16


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def codes(states: np.ndarray, pieces: list[int]) -> TokenCodes:
    return pack(states, np.array(pieces))


def test_codes_round_trip_and_a_wrong_length_is_refused() -> None:
    rng = np.random.default_rng(0)
    c = codes(rng.standard_normal((5, 384)), [3, 9, 9, 1000, 65000])
    back = TokenCodes.from_bytes(c.to_bytes(), 5, 384)
    assert back.pieces.tolist() == [3, 9, 9, 1000, 65000]
    assert np.array_equal(back.bits, c.bits) and back.bits.shape == (5, 48)
    with pytest.raises(ValueError, match="5 tokens"):
        TokenCodes.from_bytes(c.to_bytes()[:-1], 5, 384)


def test_the_candidate_holding_the_question_tokens_wins_and_idf_is_over_the_pool() -> None:
    e = np.eye(DIM, dtype=np.float32)
    # question: "name" (piece 1) and "tournament" (piece 2)
    q = QueryTokens(states=e[[0, 1]], pieces=np.array([1, 2]))
    has_both = codes(e[[0, 1, 5]], [1, 2, 7])
    name_only = codes(e[[0, 6, 7]], [1, 8, 9])
    other = codes(e[[8, 9]], [10, 11])
    s = alignment(q, [has_both, name_only, other, None])
    # a sign pattern of a basis vector meets its own basis vector at +1/4, any other at -1/4
    idf1, idf2 = np.log(4 / 3) + 1, np.log(4 / 2) + 1  # piece 1 in 2 of 3 candidates, 2 in 1
    assert s[0] == pytest.approx(0.25)
    assert s[1] == pytest.approx((idf1 - idf2) * 0.25 / (idf1 + idf2))
    assert s[2] == pytest.approx(-0.25) and s[3] == 0.0
    assert s[0] > s[1] > s[2]


def test_a_question_without_content_tokens_scores_nothing() -> None:
    q = QueryTokens(states=np.zeros((0, DIM), np.float32), pieces=np.zeros(0, np.int64))
    c = codes(np.eye(DIM)[:3], [1, 2, 3])
    assert alignment(q, [c, c]).tolist() == [0.0, 0.0]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 8))
def test_scores_are_bounded_and_follow_a_permutation(seed: int, t: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    q = QueryTokens(states=unit(rng.standard_normal((t, DIM))), pieces=rng.integers(0, 5, t))
    cands = [
        codes(rng.standard_normal((int(rng.integers(1, 6)), DIM)), list(rng.integers(0, 5, 5)))
        for _ in range(n)
    ]
    cands = [TokenCodes(pieces=c.pieces[: len(c.bits)], bits=c.bits) for c in cands]
    s = alignment(q, cands)
    assert np.all(np.abs(s) <= 1.0 + 1e-6)
    perm = rng.permutation(n)
    assert np.allclose(alignment(q, [cands[i] for i in perm]), s[perm], atol=1e-6)


def test_rank_reorders_the_pool_by_token_alignment_and_weight_zero_turns_it_off() -> None:
    e = np.eye(DIM, dtype=np.float32)
    query = unit(e[0] + e[1])
    # candidate 0 is a little closer as a sentence vector; candidate 1 holds the question's tokens
    vectors = unit(np.stack([e[0] + e[1] + 0.3 * e[2], e[0] + e[1] + 0.6 * e[3], e[4]]))
    table = [codes(e[[2, 3]], [5, 6]), codes(e[[0, 1]], [1, 2]), codes(e[[4]], [9])]
    q = QueryTokens(states=e[[0, 1]], pieces=np.array([1, 2]))
    asked: list[list[int]] = []

    def lookup(rows: np.ndarray) -> list[TokenCodes | None]:
        asked.append([int(r) for r in rows])
        return [table[int(r)] for r in rows]

    plain = rank(query, vectors, k=2, centroid_weight=0.0)
    assert plain.indices.tolist()[0] == 0
    hits = rank(query, vectors, k=2, centroid_weight=0.0, query_tokens=q, token_codes=lookup)
    assert hits.indices.tolist()[0] == 1
    assert sorted(asked[0]) == [0, 1, 2]  # the whole pool, not only the top k
    off = rank(
        query, vectors, k=2, centroid_weight=0.0, query_tokens=q, token_codes=lookup,
        token_weight=0.0,
    )  # fmt: skip
    assert off.indices.tolist() == plain.indices.tolist()


def test_rank_never_returns_a_below_threshold_record_for_its_tokens() -> None:
    e = np.eye(DIM, dtype=np.float32)
    vectors = unit(np.stack([e[0] + e[1], e[5]]))  # row 1 is unrelated as a sentence
    table = [codes(e[[7]], [7]), codes(e[[0, 1]], [1, 2])]  # ... but holds the tokens
    q = QueryTokens(states=e[[0, 1]], pieces=np.array([1, 2]))
    hits = rank(
        unit(e[0] + e[1]), vectors, k=2, threshold=0.25, query_tokens=q,
        token_codes=lambda rows: [table[int(r)] for r in rows],
    )  # fmt: skip
    assert hits.indices.tolist() == [0]


def test_real_model_a_chatty_turn_that_answers_beats_one_on_the_topic() -> None:
    emb = default_embedder()
    answer = (
        "Nate: Haha thanks! Anyway, big news, I won my second tournament last week, it was "
        "Street Fighter of all games, and the crowd was wild. How was your weekend?"
    )
    topic = "Nate: I've been gaming a lot lately, practicing every day with my friends online."
    _, table = emb.embed_with_tokens([answer, topic])
    _, q = emb.embed_query("What game was the second tournament that Nate won based on?")
    s = alignment(q, table)
    assert s[0] > s[1]
    words = [emb._tokenizer().id_to_token(int(i)) for i in q.pieces]
    assert "second" in words and "tournament" in words and "what" not in words


def test_the_cache_stores_codes_with_vectors_and_erases_them_with_the_content(
    tmp_path: Path,
) -> None:
    cache = EmbeddingCache(default_embedder(), path=tmp_path / "e.db")
    texts = ["Caroline went to the LGBTQ support group.", "Melanie paints sunsets."]
    cache.get_or_embed_texts(texts)
    assert len(cache) == 2  # vectors only; the codes ride along
    db = sqlite3.connect(tmp_path / "e.db")
    rows = db.execute("SELECT COUNT(*) FROM embeddings WHERE model_id LIKE ?", ("%" + TOKENS,))
    assert rows.fetchone()[0] == 2
    got = cache.token_codes(texts)
    assert got is not None and all(len(c) > 3 and c.bits.shape[1] == 48 for c in got)
    assert cache.stats.misses == 2  # the two vectors; the codes were read back, not embedded
    fresh_text = "Jon lost his job as a banker."
    fresh = cache.token_codes([fresh_text])
    assert fresh is not None and cache.stats.misses == 3  # codes missing: one pass
    cache.delete_for([content_sha256(texts[0])])
    left = db.execute("SELECT content_sha256 FROM embeddings").fetchall()
    assert {r[0] for r in left} == {content_sha256(texts[1]), content_sha256(fresh_text)}
    db.close()
    cache.close()


def test_damaged_codes_are_computed_again_not_served(tmp_path: Path) -> None:
    cache = EmbeddingCache(default_embedder(), path=tmp_path / "e.db")
    text = "Jon lost his job as a banker."
    want = cache.token_codes([text])
    assert want is not None
    db = sqlite3.connect(tmp_path / "e.db", isolation_level=None)
    db.execute(
        "UPDATE embeddings SET vector = x'00' WHERE model_id LIKE ?", ("%" + TOKENS,)
    )  # a tampered or truncated blob
    db.close()
    again = cache.token_codes([text])
    assert again is not None and np.array_equal(again[0].bits, want[0].bits)
    cache.close()


def test_online_recall_reads_each_candidates_codes_once(tmp_path: Path) -> None:
    from memlife.ledger import AccessLedger
    from memlife.online.memory import LongTermMemory
    from memlife.stores.sqlite import SqliteStore

    ns = "/users/u1/facts"
    facts = [
        "Caroline went to the LGBTQ support group on Friday.",
        "Caroline is thinking about adopting a child.",
        "Melanie paints sunsets by the lake.",
        "Melanie went camping with her kids in the mountains.",
        "Caroline gave a talk at a school about her journey.",
    ]
    with SqliteStore(tmp_path / "m.db") as store:
        mem = LongTermMemory(store, ledger=AccessLedger(tmp_path / "ledger"))
        for f in facts:
            mem.remember("u1", ns, None, f)
        shard = mem._shards[("u1", ns)]
        real = shard.codes_source
        assert real is not None
        asked: list[str] = []

        def spy(ids: Sequence[str]) -> Sequence[TokenCodes | None] | None:
            asked.extend(ids)
            return real(ids)

        shard.codes_source = spy
        hits = mem.recall("u1", "When did Caroline go to the support group?", k=2)
        assert hits[0].record.content == facts[0]
        # the pool's candidates (those past the cosine threshold), each asked for once
        first = list(asked)
        assert first and len(set(first)) == len(first) and set(first) <= set(shard.ids)
        mem.recall("u1", "When did Caroline go to the LGBTQ group?", k=2)
        assert asked == first  # the same candidates again: nothing read a second time
        mem.recall("u1", "What does Melanie paint?", k=2)
        assert not set(asked[len(first) :]) & set(first)  # only rows never read before


SECRET = "I am allergic to peanuts and carry an epipen."


def _secret_and_pasta(store: Any, home: Path) -> tuple[Any, str]:
    """Online memory over ``store`` holding a secret and one harmless fact; the secret's id."""
    from memlife.ledger import AccessLedger
    from memlife.online.memory import LongTermMemory

    mem = LongTermMemory(store, ledger=AccessLedger(home / "ledger"))
    rid = mem.remember("u1", "/users/u1/facts", "allergy", SECRET).record_id
    mem.remember("u1", "/users/u1/facts", "food", "I like pasta with tomato sauce.")
    return mem, rid


def test_an_erasure_racing_a_recall_leaves_no_vector_or_codes(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process erases a record between recall's read of its content and the codes
    lookup: recall must not store the erased text's vector or codes again."""
    from memlife.erase import erase
    from memlife.stores.sqlite import SqliteStore

    with SqliteStore(home / "m.db") as store:
        mem, rid = _secret_and_pasta(store, home)
        q = "SELECT model_id FROM embeddings WHERE content_sha256=?"
        sha = content_sha256(SECRET)
        assert len(store.connection.execute(q, (sha,)).fetchall()) == 2  # vector and codes
        # an old store: codes were never stored, so recall must compute them
        store.connection.execute("DELETE FROM embeddings WHERE model_id LIKE '%#tokens'")
        real = mem.cache.token_codes
        erased: list[str] = []

        def racing(texts: Sequence[str], **kw: bool) -> list[TokenCodes] | None:
            if SECRET in texts and not erased:
                erased.extend(erase(store, "u1", ids=[rid])["erased"])
            return real(texts, **kw)

        monkeypatch.setattr(mem.cache, "token_codes", racing)
        hits = mem.recall("u1", "what am I allergic to?")
        assert erased == [rid] and rid not in {h.record.id for h in hits}
        assert store.connection.execute(q, (sha,)).fetchall() == []


def test_an_erasure_racing_a_shard_load_leaves_no_vector_or_codes(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records without vectors (a model change, an import that did not embed) are embedded
    and stored when recall first loads their shard. An erasure committed between that
    load's read of the records and its write must not find the erased text's vector or
    codes back in the cache afterwards."""
    from memlife.erase import erase
    from memlife.ledger import AccessLedger
    from memlife.online.memory import LongTermMemory
    from memlife.stores.sqlite import SqliteStore

    with SqliteStore(home / "m.db") as store:
        _, rid = _secret_and_pasta(store, home)
        store.connection.execute("DELETE FROM embeddings")
        fresh = LongTermMemory(store, ledger=AccessLedger(home / "ledger"))
        real = fresh.cache.get_or_embed
        erased: list[str] = []

        def racing(records: Sequence[MemoryRecord], **kw: bool) -> np.ndarray:
            if any(r.content == SECRET for r in records) and not erased:
                erased.extend(erase(store, "u1", ids=[rid])["erased"])
            return real(records, **kw)

        monkeypatch.setattr(fresh.cache, "get_or_embed", racing)
        hits = fresh.recall("u1", "what do I like to eat?", threshold=-1.0)
        assert erased == [rid] and [h.record.content for h in hits] == [
            "I like pasta with tomato sauce."
        ]
        q = "SELECT model_id FROM embeddings WHERE content_sha256=?"
        assert store.connection.execute(q, (content_sha256(SECRET),)).fetchall() == []
        # the record that was not erased keeps its vector and codes
        left = store.connection.execute(q, (content_sha256("I like pasta with tomato sauce."),))
        assert len(left.fetchall()) == 2


def _recall_while_another_writes(mem: Any, db: Path) -> list[Any]:
    """Recall with another connection holding the file's write lock all along."""
    writer = sqlite3.connect(db, isolation_level=None, timeout=1)
    writer.execute("BEGIN IMMEDIATE")
    try:
        return list(mem.recall("u1", "When did Caroline go to the support group?", k=1))
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_recall_writes_nothing_and_is_not_blocked_by_a_writer(tmp_path: Path) -> None:
    from memlife.ledger import AccessLedger
    from memlife.online.memory import LongTermMemory
    from memlife.stores.sqlite import SqliteStore

    ns = "/users/u1/facts"
    with SqliteStore(tmp_path / "m.db") as store:
        mem = LongTermMemory(store, ledger=AccessLedger(tmp_path / "ledger"))
        for f in ("Caroline went to the support group.", "Melanie paints sunsets."):
            mem.remember("u1", ns, None, f)
        store.connection.execute("DELETE FROM embeddings WHERE model_id LIKE '%#tokens'")
        fresh = LongTermMemory(store, ledger=AccessLedger(tmp_path / "ledger"))
        hits = _recall_while_another_writes(fresh, tmp_path / "m.db")
        assert hits[0].record.content == "Caroline went to the support group."
        q = "SELECT COUNT(*) FROM embeddings WHERE model_id LIKE '%#tokens'"
        assert store.connection.execute(q).fetchone()[0] == 0  # computed, not stored


def test_a_shard_load_that_must_embed_is_not_blocked_by_a_writer(tmp_path: Path) -> None:
    """Records without vectors (a model change, an import that did not embed) are embedded
    when recall first loads their shard, and stored. With another connection holding the
    write lock, the load waited the busy timeout (30 s) and raised "database is locked";
    it now serves them from memory, and the next load stores them."""
    from memlife.erase import erase
    from memlife.ledger import AccessLedger
    from memlife.online.memory import LongTermMemory
    from memlife.stores.sqlite import SqliteStore

    ns = "/users/u1/facts"
    facts = ("Caroline went to the support group.", "Melanie paints sunsets.")
    with SqliteStore(tmp_path / "m.db") as store:
        mem = LongTermMemory(store, ledger=AccessLedger(tmp_path / "ledger"))
        for f in facts:
            mem.remember("u1", ns, None, f)
        # an erasure today: a load that stored anything would sweep for its tombstone
        gone = mem.remember("u1", ns, None, "My PIN is 4411.").record_id
        assert erase(store, "u1", ids=[gone])["erased"] == [gone]
        store.connection.execute("DELETE FROM embeddings")
        fresh = LongTermMemory(store, ledger=AccessLedger(tmp_path / "ledger"))
        hits = _recall_while_another_writes(fresh, tmp_path / "m.db")
        assert hits[0].record.content == facts[0]
        assert fresh.cache.stats.unstored == 2
        # the store shares the connection: its own writes still wait as before
        assert store.connection.execute("PRAGMA busy_timeout").fetchone()[0] == 30000
        count = "SELECT COUNT(*) FROM embeddings"
        assert store.connection.execute(count).fetchone()[0] == 0
        later = LongTermMemory(store, ledger=AccessLedger(tmp_path / "ledger"))
        later.recall("u1", "Who paints sunsets?", k=1)
        assert later.cache.stats.unstored == 0
        assert store.connection.execute(count).fetchone()[0] == 4  # vectors and codes


def test_the_setting_off_reads_no_codes_in_recall_or_the_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memlife.gate import ShadowRecall
    from memlife.ledger import AccessLedger
    from memlife.online.memory import LongTermMemory
    from memlife.stores.sqlite import SqliteStore

    ns = "/users/u1/facts"
    facts = [
        "Nate won his second video game tournament last week.",
        "Nate likes to play video games with his friends.",
        "Joanna wrote a screenplay about a haunted lighthouse.",
    ]
    question = "Which tournament did Nate win?"
    with SqliteStore(tmp_path / "m.db") as store:
        on = LongTermMemory(store, ledger=AccessLedger(tmp_path / "ledger"))
        for f in facts:
            on.remember("u1", ns, None, f)
        with_term = [(h.record.id, h.score) for h in on.recall("u1", question, k=3)]

        monkeypatch.setenv("MEMLIFE_TOKEN_ALIGNMENT", "false")
        off = LongTermMemory(store, ledger=AccessLedger(tmp_path / "ledger"))
        shadow = ShadowRecall(store, off.cache)
        assert off.token_alignment is False and shadow.token_alignment is False

        def no_codes(*_: object, **__: object) -> None:
            raise AssertionError("token codes read with token alignment off")

        monkeypatch.setattr(EmbeddingCache, "token_codes", no_codes)
        without = [(h.record.id, h.score) for h in off.recall("u1", question, k=3)]
        assert shadow.recall(question, "u1", ns, k=3)
        # the same records, scored without the term: every fused score differs
        assert {i for i, _ in without} == {i for i, _ in with_term}
        scores = dict(with_term)
        assert all(abs(scores[i] - s) > 1e-4 for i, s in without)


_RACER = """
import os, sys, time
from pathlib import Path
from memlife.embed import default_embedder
from memlife.embed_cache import EmbeddingCache
db, go, texts = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
cache = EmbeddingCache(default_embedder(), path=db)
default_embedder().embed(["warm up"])
Path(f"{go}.{os.getpid()}").touch()  # ready: loaded, at the line
while not go.exists():
    time.sleep(0.005)
cache.get_or_embed_texts(texts)
cache.close()
"""


def test_two_processes_embedding_one_content_at_once_store_one_vector_and_its_codes(
    tmp_path: Path,
) -> None:
    """Two writers race on the same contents (same file, separate connections): both
    finish, each content ends with one vector row and one codes row, and the stored codes
    are the ones the model gives for it (neither writer's bytes are torn or mixed)."""
    import subprocess
    import sys
    import time

    db, go = tmp_path / "e.db", tmp_path / "go"
    texts = [f"Nate won tournament number {i} with his friend Joanna." for i in range(60)]
    racers = [
        subprocess.Popen([sys.executable, "-c", _RACER, str(db), str(go), *texts]) for _ in range(2)
    ]
    try:
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob("go.*"))) < 2:  # both loaded and waiting: they race
            assert time.monotonic() < deadline and all(p.poll() is None for p in racers)
            time.sleep(0.01)
        go.touch()
        assert [p.wait(timeout=300) for p in racers] == [0, 0]
    finally:
        for p in racers:  # one that failed must not leave the other waiting for ever
            if p.poll() is None:
                p.kill()
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT content_sha256, model_id, COUNT(*) FROM embeddings GROUP BY 1, 2")
    counts = rows.fetchall()
    conn.close()
    shas = {content_sha256(t) for t in texts}
    assert {s for s, m, _ in counts if m.endswith(TOKENS)} == shas
    assert {s for s, m, _ in counts if not m.endswith(TOKENS)} == shas
    assert all(n == 1 for _, _, n in counts)
    cache = EmbeddingCache(default_embedder(), path=db)
    stored = cache.token_codes(texts, store=False)
    assert stored is not None and cache.stats.misses == 0  # all read back, none computed
    _, expected = default_embedder().embed_with_tokens(texts)
    for got, want in zip(stored, expected, strict=True):
        assert np.array_equal(got.bits, want.bits) and np.array_equal(got.pieces, want.pieces)
    cache.close()


def test_codes_cut_at_one_window_are_computed_again_over_every_window(tmp_path: Path) -> None:
    """A long memory's codes written before codes covered every window hold exactly one
    full window: read back, they would hide the memory's tail from token alignment."""
    emb = default_embedder()
    text = "We chatted about the weather and the traffic. " * 40 + "I only drink green tea."
    cache = EmbeddingCache(emb, path=tmp_path / "e.db")
    cache.get_or_embed_texts([text])
    full = cache.token_codes([text], store=False)
    assert full is not None and len(full[0]) > emb.max_tokens
    cut = TokenCodes(pieces=full[0].pieces[:254], bits=full[0].bits[:254])
    db = sqlite3.connect(tmp_path / "e.db")
    db.execute(
        "UPDATE embeddings SET dim = ?, vector = ? WHERE model_id = ?",
        (len(cut), cut.to_bytes(), emb.model_id + TOKENS),
    )
    db.commit()
    db.close()
    misses = cache.stats.misses
    again = cache.token_codes([text], store=False)
    assert again is not None and len(again[0]) == len(full[0])
    assert cache.stats.misses == misses + 1  # computed, not served
    cache.close()
