"""bench/recall_locomo.py: the held-out headline never sees its test conversations."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from memlife.token_match import QueryTokens, pack

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
import locomo_replica as replica  # noqa: E402
import recall_locomo as bench  # noqa: E402


def _conversation(i: int, helps: bool) -> bench.Conversation:
    """12 memories, one relevant. Where ``helps``, only the relevant memory shares the
    query's rare word (BM25 lifts it); elsewhere five distractors share it instead."""
    texts = [f"filler memory number {j} about nothing" for j in range(12)]
    word = "zanzibar"
    if helps:
        texts[0] = f"the {word} trip happened"
    else:
        texts[0] = "the island trip happened"
        for j in range(1, 6):
            texts[j] = f"{word} filler {j}"
    rng = np.random.default_rng(i)
    vecs = rng.normal(size=(12, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    q = vecs[1:6].mean(0) if helps else 0.5 * vecs[0] + 0.5 * vecs[1:6].mean(0)
    q = (q / np.linalg.norm(q)).astype(np.float32)
    query = {"question": f"When was the {word} trip?", "evidence": ["D1:0"], "category": 4}
    c = bench.Conversation(
        texts, [{f"D1:{j}"} for j in range(12)], np.arange(12) * 86400.0 * 30, [query]
    )
    c.vecs, c.qvecs = vecs, q[None, :]
    c.lexical = bench._MemoLexical(texts)
    c.relevant = [np.arange(12) == 0]
    return c


def test_weights_are_chosen_on_the_training_fold_only(monkeypatch: pytest.MonkeyPatch) -> None:
    convs = [_conversation(i, helps=i < 5) for i in range(10)]
    seen: list[tuple[set[int], set[int]]] = []
    real_choose, real_score = bench.choose, bench.score
    chosen_on: list[set[int]] = []
    choosing = [False]

    def spy_choose(groups, tuned, grid=None):  # type: ignore[no-untyped-def]
        chosen_on.append({id(c) for g in groups for c in g})
        choosing[0] = True
        try:
            return real_choose(groups, tuned, grid)
        finally:
            choosing[0] = False

    def spy_score(cs, w):  # type: ignore[no-untyped-def]
        cs = list(cs)
        if not choosing[0]:  # a held-out score, made after the weights were chosen
            seen.append((chosen_on[-1], {id(c) for c in cs}))
        return real_score(cs, w)

    monkeypatch.setattr(bench, "choose", spy_choose)
    monkeypatch.setattr(bench, "score", spy_score)
    out = bench.held_out({"observations": convs}, ("centroid", "lexical"))["observations"]
    monkeypatch.undo()
    # choose() saw exactly the training half, and nothing it saw was scored afterwards.
    train_ids = [{id(c) for c in convs[:5]}, {id(c) for c in convs[5:]}]
    assert chosen_on == train_ids
    assert len(seen) == 2 and all(not (trained & scored) for trained, scored in seen)
    # The folds disagree: BM25 helps on 0-4 and hurts on 5-9, so each fold's choice is
    # wrong for the other half. A leak of the test fold would score 1.0 on both.
    w_a, w_b = (f["weights"]["lexical"] for f in out["folds"])
    assert w_a > 0 and w_b == 0
    assert out["mean"]["recall@5"] < 1.0
    tuned = bench.choose([convs[5:]], ("centroid", "lexical"))
    assert bench._recall5(convs[5:], tuned) == 1.0  # what a leak would have reported


def test_a_second_model_is_mixed_at_the_share_chosen_on_training_data() -> None:
    """--second-vectors: unit vectors whose cosine is the share-weighted mean, and a share
    chosen like any weight (here only the second model finds the relevant memory)."""
    convs = []
    for i in range(10):
        c = _conversation(i, helps=False)
        rng = np.random.default_rng(100 + i)
        second = rng.normal(size=(12, 16)).astype(np.float32)
        second /= np.linalg.norm(second, axis=1, keepdims=True)
        c.second = (second, second[:1].copy())  # the query is memory 0 itself ...
        q = c.vecs[1:6].mean(0)  # ... while for the first model it is among distractors
        c.qvecs = (q / np.linalg.norm(q))[None, :].astype(np.float32)
        convs.append(c)
    vecs, qvecs = convs[0].vectors(0.5)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    cos_first, cos_second = (
        convs[0].vecs @ convs[0].qvecs[0],
        convs[0].second[0] @ convs[0].second[1][0],
    )
    assert np.allclose(vecs @ qvecs[0], 0.5 * cos_first + 0.5 * cos_second, atol=1e-5)
    assert convs[0].vectors(0.0)[0] is convs[0].vecs
    grid = {name: (0.0,) for name in bench.GRID} | {"second": bench.SECOND_GRID}
    w = bench.choose([convs[:5]], ("centroid", "second"), grid)
    assert w["second"] > 0
    assert bench._recall5(convs[5:], w) > bench._recall5(convs[5:], {**w, "second": 0.0})


def _random_conversation(seed: int) -> bench.Conversation:
    """40 memories in 4 sessions (so the context term has neighbours), 15 queries, some
    naming a session's date (so the date term fires), random vectors and words."""
    rng = np.random.default_rng(seed)
    words = "tea coffee hike paint dog car trip book song cake park race".split()
    sessions = [datetime(2023, 5, d, 13, 0, tzinfo=UTC).timestamp() for d in (1, 8, 20, 28)]
    created = np.repeat(sessions, 10).astype(np.float64)
    names = ("Ann", "Bob", "Cy")  # speakers of two memories in three, named by most questions
    texts = [
        (f"{names[i % 3]}: " if i % 3 else "") + " ".join(rng.choice(words, size=4))
        for i in range(40)
    ]
    queries = []
    for j in range(15):
        day = (1, 8, 20, 28)[j % 4]
        when = f" on {day} May, 2023" if j % 3 == 0 else ""
        who = f" did {names[j % 3]}" if j % 5 else ""
        question = f"What about the {' '.join(rng.choice(words, size=2))}{who}{when}?"
        queries.append({"question": question, "evidence": [f"D1:{j}"], "category": 1 + j % 4})
    c = bench.Conversation(texts, [{f"D1:{i}"} for i in range(40)], created, queries)
    c.vecs = rng.normal(size=(40, 16)).astype(np.float32)
    c.vecs /= np.linalg.norm(c.vecs, axis=1, keepdims=True)
    c.qvecs = rng.normal(size=(15, 16)).astype(np.float32)
    c.qvecs /= np.linalg.norm(c.qvecs, axis=1, keepdims=True)
    c.lexical = bench._MemoLexical(texts)
    c.relevant = [
        np.fromiter((bool(d & set(q["evidence"])) for d in c.dia), bool, 40) for q in queries
    ]
    tok = np.random.default_rng(500 + seed)  # token states: pieces from a small vocabulary
    c.codes = []
    for _ in range(40):
        n = int(tok.integers(1, 6))
        c.codes.append(pack(tok.normal(size=(n, 16)), tok.integers(0, 8, n)))
    c.qtokens = []
    for j in range(15):
        t = 0 if j == 4 else int(tok.integers(1, 4))  # one question without content tokens
        states = tok.normal(size=(t, 16)).astype(np.float32)
        states /= np.maximum(np.linalg.norm(states, axis=1, keepdims=True), 1e-12)
        c.qtokens.append(QueryTokens(states=states, pieces=tok.integers(0, 8, t)))
    return c


def test_the_ideas_replica_ranks_exactly_like_retrieval_rank() -> None:
    """bench/locomo_replica.py is a vectorised copy of rank(): it must put the first
    relevant memory where rank() does, for every term on and off."""
    convs = [_random_conversation(s) for s in range(6)]
    preps = [replica.prepare(c) for c in convs]
    assert any(p.date.any() for p in preps) and all(p.near.any() for p in preps)
    assert all(p.speaker.any() for p in preps)
    for w in (
        bench.DEFAULTS,
        {"centroid": 0.0, "lexical": 0.0, "date": 0.0, "context": 0.0},
        {"centroid": 0.5, "lexical": 0.6, "date": 0.3, "context": 0.0},
        {"centroid": 1.25, "lexical": 0.1, "date": 0.0, "context": 0.6},
        {"centroid": 1.0, "lexical": 0.2, "date": 0.3, "context": 0.4, "token": 2.0},
        {"centroid": 0.5, "lexical": 0.0, "date": 0.0, "context": 0.0, "token": 5.0},
        {"centroid": 0.0, "lexical": 0.0, "date": 0.0, "context": 0.0, "speaker": 0.3},
        {"centroid": 0.75, "lexical": 0.3, "date": 0.5, "context": 0.4, "speaker": 0.5},
    ):
        for p in preps:
            assert replica.first_hits(p, w).tolist() == bench.first_hits(p.conv, w), w
    assert replica.check_replica(preps, bench.DEFAULTS) == 1.0
    # ... and the check notices a replica that drifts from rank().
    wrong = [replica.prepare(c) for c in convs]
    for p in wrong:
        p.bm25 = -p.bm25
    assert replica.check_replica(wrong, bench.DEFAULTS) < 1.0
    only_tokens = {"centroid": 0.0, "lexical": 0.0, "date": 0.0, "context": 0.0, "token": 5.0}
    drifted = [replica.prepare(c) for c in convs]
    for p in drifted:
        assert p.tok_best is not None
        p.tok_best = -p.tok_best
    assert replica.check_replica(drifted, only_tokens) < 1.0
    only_speakers = {"centroid": 0.0, "lexical": 0.0, "date": 0.0, "context": 0.0, "speaker": 0.3}
    unheard = [replica.prepare(c) for c in convs]
    for p in unheard:
        p.speaker = np.zeros_like(p.speaker)
    assert replica.check_replica(unheard, only_speakers) < 1.0


def test_an_idea_is_weighed_on_the_training_folds_only() -> None:
    """An added term that finds the relevant memory only in conversations 5-9 is switched on
    by the fold trained there and left off by the other (a leak would switch on both)."""
    convs = [_random_conversation(s) for s in range(10)]
    preps = [replica.prepare(c) for c in convs]
    for i, p in enumerate(preps):
        p.extra = {"oracle": p.relevant.astype(np.float32) * (i >= 5)}
    r = replica.held_out(preps, dict(bench.GRID) | {"oracle": (0.0, 1.0)})
    assert r["idea_weights"][0] == "0"  # trained on 0-4: the term never helps there
    assert r["idea_weights"][1] == {"oracle": 1.0}


def test_a_model_share_is_chosen_on_the_training_folds_only() -> None:
    """bench/recall_models.py: a second model that finds the relevant memory only in
    conversations 5-9 gets a share from the fold trained there and none from the other."""
    import recall_models as models

    convs = [_random_conversation(s) for s in range(10)]
    for i, c in enumerate(convs):
        rng = np.random.default_rng(1000 + i)
        vecs = rng.normal(size=(40, 16)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        first = [int(np.flatnonzero(r)[0]) if r.any() else 0 for r in c.relevant]
        # the query is its relevant memory itself (5-9) or an unrelated one (0-4)
        qvecs = vecs[first] if i >= 5 else vecs[[(j + 7) % 40 for j in first]]
        c.second = (vecs, np.ascontiguousarray(qvecs))
    by_share = {s: models.mixed(convs, s) for s in bench.SECOND_GRID}
    r = models.held_out_shares(by_share)
    assert r["chosen"][0]["share"] == 0.0  # trained on 0-4, where the model is noise
    assert r["chosen"][1]["share"] > 0.0  # trained on 5-9, where it is an oracle
    # alone, the model's vectors replace MiniLM's; rank() agrees with the replica on them
    alone = models.mixed(convs, 1.0)
    assert alone[7].conv.vecs is convs[7].second[0]
    assert replica.check_replica(alone, bench.DEFAULTS) == 1.0


def test_each_granularity_keeps_every_turn_once_and_its_session_date(tmp_path: Path) -> None:
    """A tiny conversation in LoCoMo's shape (made up here; the real file is never copied):
    every granularity's memories carry each turn's dia id exactly once, at its session's
    date, and a question is kept only when some memory carries its evidence."""
    turns = {
        n: [{"speaker": "Ann", "dia_id": f"D{n}:{i}", "text": f"s{n} t{i}"} for i in range(k)]
        for n, k in ((1, 3), (2, 10))
    }
    raw = {
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": turns[1],
            "session_2_date_time": "10:00 am on 9 June, 2023",
            "session_2": turns[2],
        },
        "observation": {
            "session_1_observation": {"Ann": [["Ann said t0", "D1:0"]]},
            "session_2_observation": {"Ann": [["Ann said t9", ["D2:9", "D2:8"]]]},
        },
        "session_summary": {"session_1_summary": "first", "session_2_summary": "second"},
        "qa": [
            {"question": "q1", "evidence": ["D2:9"], "category": 4},
            {"question": "q2", "evidence": ["D2:5"], "category": 1},
            {"question": "q3", "evidence": ["D1:0"], "category": 5},
        ],
    }
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([raw]))
    may8 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC).timestamp()
    june9 = datetime(2023, 6, 9, 10, 0, tzinfo=UTC).timestamp()
    every_turn = sorted(t["dia_id"] for n in (1, 2) for t in turns[n])
    sizes = {"turns": 13, "excerpts": 3, "sessions": 2, "summaries": 2}
    for granularity, n in sizes.items():
        (c,) = bench.load(path, granularity)
        assert len(c.texts) == n, granularity
        assert sorted(d for ids in c.dia for d in ids) == every_turn, granularity
        for ids, at in zip(c.dia, c.created, strict=True):
            assert at == (may8 if next(iter(ids)).startswith("D1:") else june9)
        assert [q["question"] for q in c.queries] == ["q1", "q2"], granularity
    (s,) = bench.load(path, "summaries")
    assert s.texts == ["first", "second"]
    (x,) = bench.load(path, "excerpts")
    assert [len(d) for d in x.dia] == [3, bench.CHUNK_TURNS, 10 - bench.CHUNK_TURNS]
    (o,) = bench.load(path, "observations")
    assert o.texts == ["Ann said t0", "Ann said t9"] and [q["question"] for q in o.queries] == [
        "q1"
    ]


def test_the_bootstrap_interval_holds_the_figure_and_a_paired_gain_is_told_from_noise() -> None:
    """bench/recall_bootstrap.py: the interval of the mean over folds contains the figure and
    narrows with more questions; a real gain on the same questions has an interval above
    zero, a reshuffle of wins and losses one around it; unpaired inputs are refused."""
    import recall_bootstrap as boot

    rng = np.random.default_rng(0)
    folds = [np.where(rng.random(n) < 0.84, 1 + rng.integers(0, 5, n), 0) for n in (640, 660)]
    figure = np.mean([((f > 0) & (f <= 5)).mean() for f in folds])
    lo, hi = boot.interval(folds)
    assert lo < figure < hi and 0.02 < hi - lo < 0.06
    lo4, hi4 = boot.interval([np.tile(f, 4) for f in folds])
    assert hi4 - lo4 < (hi - lo) * 0.6  # four times the questions: about half as wide
    better = [f.copy() for f in folds]
    for f in better:
        f[np.flatnonzero(f == 0)[:30]] = 3  # 30 more questions found in each fold
    gain = boot.paired(better, folds)
    assert gain["wins"] == 60 and gain["losses"] == 0 and gain["lo"] > 0
    swapped = [f.copy() for f in folds]
    for f in swapped:
        missed, found = np.flatnonzero(f == 0)[:10], np.flatnonzero((f > 0) & (f <= 5))[:10]
        f[missed], f[found] = 2, 0  # ten found, ten lost
    noise = boot.paired(swapped, folds)
    assert noise["diff"] == 0 and noise["lo"] < 0 < noise["hi"] and noise["wins"] == 20
    with pytest.raises(ValueError, match="same questions"):
        boot.paired([folds[0][:-1], folds[1]], folds)
