"""bench/recall_namespaces.py: the speaker namespaces ranked as one set rank as one namespace
(every question's top 10, ids and order), the emulated per-set merge does not, and the
latency part times every row against its raw baseline."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from memlife.retrieval import rank
from memlife.token_match import QueryTokens, pack

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
import recall_locomo as bench  # noqa: E402
import recall_namespaces as ns  # noqa: E402

DIM = 16
WORDS = "tea coffee hike paint dog car trip book song cake park race".split()
NAMES = ("Ann", "Bob")


def _conversation(seed: int, n: int = 120) -> tuple[bench.Conversation, list[str]]:
    """``n`` memories (past the context pool) said by two speakers in three sessions, 15
    questions naming dates and speakers, random vectors and token codes."""
    rng = np.random.default_rng(seed)
    sessions = [datetime(2023, 5, d, 13, tzinfo=UTC).timestamp() for d in (1, 8, 20)]
    created = np.array([sessions[i * 3 // n] + 60.0 * (i % 20) for i in range(n)])
    who = [NAMES[int(rng.integers(2))] for _ in range(n)]
    texts = [f"{w}: " + " ".join(rng.choice(WORDS, 4)) for w in who]
    queries = [
        {
            "question": f"What about the {' '.join(rng.choice(WORDS, 2))} did {NAMES[j % 2]}"
            + (f" on {(1, 8, 20)[j % 3]} May, 2023?" if j % 3 == 0 else "?"),
            "evidence": [f"D1:{e}" for e in rng.choice(n, 3, replace=False)],
            "category": 1 + j % 4,
        }
        for j in range(15)
    ]
    c = bench.Conversation(texts, [{f"D1:{i}"} for i in range(n)], created, queries)
    unit = lambda x: (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)  # noqa: E731
    c.vecs, c.qvecs = unit(rng.normal(size=(n, DIM))), unit(rng.normal(size=(15, DIM)))
    c.lexical = bench._MemoLexical(texts)
    c.relevant = [np.array([bool(d & set(q["evidence"])) for d in c.dia]) for q in queries]
    sizes = rng.integers(1, 6, n)
    c.codes = [pack(rng.normal(size=(s, DIM)), rng.integers(0, 8, s)) for s in sizes]
    c.qtokens = [
        QueryTokens(unit(rng.normal(size=(2, DIM))), rng.integers(0, 8, 2)) for _ in queries
    ]
    return c, who


def test_the_union_of_speaker_namespaces_ranks_as_one_namespace() -> None:
    pairs = [_conversation(seed) for seed in range(4)]
    convs, speakers = [c for c, _ in pairs], [w for _, w in pairs]
    out = ns.recall(convs, speakers)
    assert out["queries"] == 60 and out["namespaces"] == 8
    assert out["union_first_hit_agrees_with_one_namespace"] == 60
    assert out["recall"]["union of speakers"] == out["recall"]["one namespace"]
    differs = 0
    for c, who in pairs:
        sets = ns.split(c, who)
        assert [len(s.ids) for s in sets] == [who.count(w) for w in dict.fromkeys(who)]
        codes = lambda rows, c=c: [c.codes[int(r)] for r in rows]  # noqa: E731
        for q, qv, qt in zip(c.queries, c.qvecs, c.qtokens, strict=True):
            text = q["question"]
            whole = rank(qv, c.vecs, k=ns.K, threshold=-1.0, query_text=text,
                         lexical=c.lexical, centroid=c.vecs.mean(axis=0), created=c.created,
                         query_tokens=qt, token_codes=codes)  # fmt: skip
            union = ns.rank_sets(qv, text, sets, k=ns.K, threshold=-1.0, query_tokens=qt)
            assert [int(r.id) for r in union] == whole.indices.tolist()
            old = ns.merged(qv, text, sets, ns.K, -1.0, qt)
            differs += [int(r.id) for r in old] != whole.indices.tolist()
    assert differs > 0  # the per-set merge ranks otherwise: the check can fail


def test_latency_times_every_row_against_the_raw_baseline() -> None:
    out = ns.run_latency(memories=400, queries=5)
    rows = out["results"]
    assert list(rows) == [
        "raw top-k (baseline)",
        "rank, one set",
        "rank_sets, one set",
        "rank_sets, two sets",
        "each set alone, merged",
    ]
    assert rows["raw top-k (baseline)"]["p50_over_raw"] == 1.0
    assert all(r["p50_ms"] > 0 and r["p95_ms"] >= r["p50_ms"] for r in rows.values())
