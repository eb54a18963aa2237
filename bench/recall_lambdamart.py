"""LoCoMo recall with a nonlinear learned reranker, held out (issue 19, round 15; not shipped).

Per fold, the grid weights are chosen on the training conversations as the headline's
are, the pool is that ranking's best 50, and LightGBM reorders the pool from the shipped
terms and simple question and memory features: trained on the training conversations
only, scored on the other five. The variants and their settings were fixed before any
run. Each is paired with the headline on the same questions (bench/recall_bootstrap.py).
Results and conclusions: BENCHMARKS.md, "Issue 19, fifteenth round".

    uv run --with lightgbm==4.7.0 python bench/recall_lambdamart.py \\
        ../shared/data/locomo10.json [--embed-cache FILE]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

import lightgbm as lgb
import numpy as np
import recall_bootstrap as bootstrap
import recall_locomo as bench
from locomo_cache import VectorCache
from locomo_replica import Prepared, check_replica, choose, first_hits, fused, prepare, token_term

from memlife.retrieval import CONTEXT_POOL
from memlife.speakers import query_names
from memlife.timeref import query_date_ranges

QUESTION_WORDS = ("when", "what", "how", "who", "where", "which", "why", "did", "does", "is")
FEATURES = (
    "final score", "fused", "cosine", "centroid", "bm25", "date", "speaker", "token",
    "best neighbour", "rank final", "rank cosine", "rank bm25", "rank token", "gap to best",
    "token gap to best", "memory tokens", "session position", "neighbours in pool",
    "question word", "question tokens", "question dates", "question names",
)  # fmt: skip
BASE = {
    "objective": "lambdarank", "metric": "ndcg", "eval_at": [5], "learning_rate": 0.05,
    "num_leaves": 15, "min_data_in_leaf": 40, "feature_fraction": 0.8,
    "bagging_fraction": 0.8, "bagging_freq": 1, "lambdarank_truncation_level": 10,
    "verbose": -1, "num_threads": 2, "deterministic": True, "force_row_wise": True,
}  # fmt: skip
ROUNDS = 300
INIT_SCALE = 10.0  # the shipped score's scale as a starting margin
VARIANTS: dict[str, dict] = {
    "lambdamart": {"seeds": [0]},
    "lambdamart, boosted from the shipped score": {"seeds": [0], "init": True},
    "lambdamart, 5 seeds averaged": {"seeds": list(range(5))},
    "lambdamart, 7 leaves of 100+, 20 seeds averaged": {
        "seeds": list(range(20)),
        "params": {"num_leaves": 7, "min_data_in_leaf": 100},
    },
    "pointwise (log loss), 5 seeds averaged": {
        "seeds": list(range(5)),
        "params": {"objective": "binary", "metric": "auc"},
    },
}


def _question_word(question: str) -> int:
    opening = re.findall(r"[a-z]+", question.lower())[:3]
    return next((i for i, w in enumerate(QUESTION_WORDS) if w in opening), len(QUESTION_WORDS))


def _ranks(x: np.ndarray) -> np.ndarray:
    return np.argsort(np.argsort(-x, axis=1, kind="stable"), axis=1).astype(np.float32)


def pool_features(p: Prepared, w: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The pool first_hits reorders, its final scores, (Q, P, F) features and labels."""
    f = fused(p, w)
    idx = np.argsort(-f, axis=1, kind="stable")[:, : min(CONTEXT_POOL, f.shape[1])]
    s0 = np.take_along_axis(f, idx, 1)
    tok = token_term(p, idx)
    s = s0 + np.float32(w["token"]) * tok
    near = p.near[idx[:, :, None], idx[:, None, :]]
    best = np.where(near, s[:, None, :], -np.inf).max(axis=2)
    nb = np.where(np.isfinite(best), best, s)
    final = s + np.float32(w["context"]) * nb
    take: Callable[[np.ndarray], np.ndarray] = lambda m: np.take_along_axis(  # noqa: E731
        np.broadcast_to(m, p.cos.shape), idx, 1
    )
    lengths = np.array([len(c) for c in p.conv.codes], np.float32)
    created = p.conv.created
    position = np.argsort(np.argsort(created, kind="stable")) / max(len(created) - 1, 1)
    questions = [q["question"] for q in p.conv.queries]
    per_question = [
        [_question_word(q) for q in questions],
        [len(t) for t in p.conv.qtokens],
        [bool(query_date_ranges(q)) for q in questions],
        [len(query_names(q).sure) for q in questions],
    ]
    cos = take(p.cos)
    columns = [final, s0, cos, take(p.cent), take(p.bm25), take(p.date), take(p.speaker), tok, nb]
    columns += [_ranks(final), _ranks(cos), _ranks(take(p.bm25)), _ranks(tok)]
    columns += [final - final.max(axis=1, keepdims=True), tok - tok.max(axis=1, keepdims=True)]
    columns += [lengths[idx], position[idx], near.sum(axis=2)]
    columns += [
        np.broadcast_to(np.asarray(v, np.float32)[:, None], idx.shape) for v in per_question
    ]
    feats = np.stack(columns, axis=2).astype(np.float32)
    return idx, final, feats, np.take_along_axis(p.relevant, idx, 1)


def _first_hits(score: np.ndarray, relevant: np.ndarray) -> np.ndarray:
    top = np.take_along_axis(relevant, np.argsort(-score, axis=1, kind="stable")[:, :10], 1)
    return np.where(top.any(axis=1), top.argmax(axis=1) + 1, 0)


def held_out(preps: list[Prepared]) -> tuple[list[np.ndarray], dict[str, list[np.ndarray]]]:
    """Per test fold: the headline's first-hit ranks, and each variant's."""
    base, got = [], {name: [] for name in VARIANTS}
    for train, test in bench.FOLDS:
        w = choose([preps[i] for i in train], dict(bench.GRID), None, CONTEXT_POOL)
        tr = [pool_features(preps[i], w) for i in train]
        te = [pool_features(preps[i], w) for i in test]
        x = np.concatenate([f.reshape(-1, f.shape[2]) for _, _, f, _ in tr])
        y = np.concatenate([r.reshape(-1) for *_, r in tr]).astype(int)
        group = np.concatenate([np.full(len(r), r.shape[1]) for *_, r in tr])
        init = np.concatenate([s.reshape(-1) for _, s, _, _ in tr]) * INIT_SCALE
        base.append(np.concatenate([first_hits(preps[i], w) for i in test]))
        for name, v in VARIANTS.items():
            scores = [np.zeros(r.shape) for *_, r in te]
            for seed in v["seeds"]:
                data = lgb.Dataset(
                    x, y, group=group, init_score=init if v.get("init") else None,
                    feature_name=[n.replace(" ", "_") for n in FEATURES],
                    categorical_feature=["question_word"],
                )  # fmt: skip
                model = lgb.train(BASE | v.get("params", {}) | {"seed": seed}, data, ROUNDS)
                for k, (_, s, f, _) in enumerate(te):
                    scores[k] += model.predict(f.reshape(-1, f.shape[2])).reshape(s.shape)
                    scores[k] += s * INIT_SCALE if v.get("init") else 0.0
            hits = [_first_hits(sc, r) for sc, (*_, r) in zip(scores, te, strict=True)]
            got[name].append(np.concatenate(hits))
    return base, got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path, help="locomo10.json")
    ap.add_argument("--embed-cache", type=Path)
    args = ap.parse_args(argv)
    convs = bench.load(args.path, "observations")
    bench.prepare(convs, VectorCache(args.embed_cache))
    preps = [prepare(c) for c in convs]
    agree = check_replica(preps, bench.DEFAULTS)
    if agree < 1.0:
        raise SystemExit(f"the replica agrees with rank on {agree:.4f} of queries, not all")
    base, got = held_out(preps)
    print(f"{'observations, held out':52s} r@1    r@5    r@10   r@5 vs headline (won / lost)")
    for name, ranks in ({"headline (shipped ranking)": base} | got).items():
        r = [np.mean([np.mean((x > 0) & (x <= k)) for x in ranks]) for k in bench.KS]
        line = f"{name:52s} " + " ".join(f"{v:.4f}" for v in r)
        if ranks is not base:
            d = bootstrap.paired(ranks, base)
            line += (
                f" {d['diff']:+.4f} [{d['lo']:+.4f}, {d['hi']:+.4f}] ({d['wins']} / {d['losses']})"
            )
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
