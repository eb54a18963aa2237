"""LoCoMo recall benchmark: does memlife's recall find the facts a question needs?

Task (shared/data/README.md): every observation of a conversation is a memory; each QA
of categories 1-4 whose evidence dia_ids are carried by at least one observation is a
query; hit@k = any of the top-k facts carries one of the evidence dia_ids. Ranking is
``memlife.retrieval.rank``, the function online recall uses; nothing here sees the
answer or the evidence before scoring. The data is read from PATH, never copied.

    uv run python bench/recall_locomo.py ../shared/data/locomo10.json [--mode hybrid] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from memlife.embed import default_embedder
from memlife.retrieval import CENTROID_WEIGHT, LEXICAL_WEIGHT, LexicalIndex, rank

KS = (1, 5, 10)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def load(path: Path) -> list[tuple[list[tuple[str, set[str]]], list[dict]]]:
    """Per conversation: (facts as (text, dia_ids)), queries)."""
    convs = []
    for conv in json.loads(path.read_text()):
        facts: list[tuple[str, set[str]]] = []
        for session in conv["observation"].values():
            for items in session.values():
                for text, dia in items:
                    facts.append((text, set(dia) if isinstance(dia, list) else {dia}))
        carried = set().union(*(d for _, d in facts))
        queries = [
            q
            for q in conv["qa"]
            if q.get("category") in CATEGORIES and set(q.get("evidence", [])) & carried
        ]
        convs.append((facts, queries))
    return convs


def run(
    path: Path, mode: str, lexical_weight: float, centroid_weight: float = CENTROID_WEIGHT
) -> dict:
    emb = default_embedder()
    convs = load(path)
    hits = {k: Counter() for k in KS}
    total: Counter = Counter()
    n_embedded, embed_s = 0, 0.0
    for facts, queries in convs:
        texts = [t for t, _ in facts]
        t0 = time.perf_counter()
        vecs = emb.embed(texts)
        qvecs = emb.embed([q["question"] for q in queries])
        embed_s += time.perf_counter() - t0
        n_embedded += len(texts) + len(queries)
        lexical = LexicalIndex(texts)
        centroid = vecs.mean(axis=0)  # as an online shard keeps it (running sum / n)
        for q, qv in zip(queries, qvecs, strict=True):
            if mode == "bm25":  # lexical only: rank by BM25 via a zero query vector
                qv = np.zeros_like(qv)
            res = rank(
                qv,
                vecs,
                k=max(KS),
                query_text=None if mode == "dense" else q["question"],
                lexical=lexical,
                lexical_weight=lexical_weight,
                centroid=centroid,
                centroid_weight=0.0 if mode == "bm25" else centroid_weight,
            )
            evidence = set(q["evidence"])
            found = [bool(facts[i][1] & evidence) for i in res.indices]
            total[q["category"]] += 1
            for k in KS:
                hits[k][q["category"]] += any(found[:k])
    n = sum(total.values())
    return {
        "task": "locomo10 observation recall",
        "mode": mode,
        "model_id": emb.model_id,
        "lexical_weight": lexical_weight if mode != "dense" else 0.0,
        "centroid_weight": centroid_weight if mode != "bm25" else 0.0,
        "queries": n,
        "overall": {f"recall@{k}": round(sum(hits[k].values()) / n, 4) for k in KS},
        "per_category": {
            f"{c} {CATEGORIES[c]}": {
                "queries": total[c],
                **{f"recall@{k}": round(hits[k][c] / total[c], 4) for k in KS},
            }
            for c in sorted(total)
        },
        "embeddings_per_s": round(n_embedded / embed_s, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path, help="locomo10.json")
    ap.add_argument("--mode", choices=["hybrid", "dense", "bm25"], default="hybrid")
    ap.add_argument("--lexical-weight", type=float, default=LEXICAL_WEIGHT)
    ap.add_argument(
        "--centroid-weight", type=float, default=CENTROID_WEIGHT,
        help="query moved away from the facts' mean by this much (0: plain cosine)",
    )  # fmt: skip
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    weight = 1.0 if args.mode == "bm25" else args.lexical_weight
    out = run(args.path, args.mode, weight, args.centroid_weight)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{out['task']}: {out['queries']} queries, mode={out['mode']}, model={out['model_id']}")
    rows = [("overall", out["queries"], out["overall"])]
    rows += [(name, v["queries"], v) for name, v in out["per_category"].items()]
    print(f"{'':18s} {'n':>5s} " + " ".join(f"{'r@' + str(k):>6s}" for k in KS))
    for name, n, r in rows:
        print(f"{name:18s} {n:5d} " + " ".join(f"{r[f'recall@{k}']:6.3f}" for k in KS))
    print(f"embeddings/s: {out['embeddings_per_s']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
