"""Recall over an actor's namespaces: ``rank_sets`` over several sets against one set.

Recall: LoCoMo's observations (as bench/recall_locomo.py loads them), each conversation's
split into one namespace per speaker (the speaker under whom ``observation`` lists it, in
order of first appearance), as the lifecycle bench imports them. Every question is ranked
three ways, shipped weights, threshold -1 as the recall bench uses, recall@1/5/10:

- one namespace per conversation: ``rank`` over all its observations (the recall bench's
  ``first_hits`` with ``DEFAULTS``);
- the speaker namespaces ranked as one set: ``rank_sets`` over them (recall since session
  24), and how many questions' first-hit positions agree with the row above;
- each namespace ranked alone and the lists merged: ``rank_sets`` over one set at a time,
  the best k by score across the sets (ties by set order). An emulation of ``rank_sets``
  before session 24 (its own centroid, BM25 statistics and best pool per namespace), not
  the old code itself.

Latency: synthetic memories (seeded random 384-d unit vectors, 12 random words each,
created 10 minutes apart), 200 queries (a memory's vector plus noise, 6 random words),
threshold DEFAULT_THRESHOLD, no token codes nor sign codes. Timed on the same query in
one loop: ``rank`` over N as one set, ``rank_sets`` over one set of N, over two sets of
N/2, and the per-set-then-merge emulation over the two. Raw baseline: a plain
``vectors @ q`` and ``argpartition`` top-k over the N rows; ``x raw`` is each p50/p95
over the baseline's.

    uv run python bench/recall_namespaces.py ../shared/data/locomo10.json
        [--embed-cache FILE] [--recall-only | --latency-only] [--memories N]
        [--queries N] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import recall_locomo as bench
from locomo_cache import VectorCache

from memlife.lexical import LexicalIndex
from memlife.retrieval import DEFAULT_THRESHOLD, Ranked, rank, rank_sets
from memlife.token_match import QueryTokens, TokenCodes

KS = bench.KS
K = max(KS)


@dataclass
class Namespace:
    """One namespace's rows as ``rank_sets`` reads them (a ``RankSet``); ids are the
    conversation's row numbers, zero-padded so that ties by id are ties by row."""

    ids: list[str]
    vectors: np.ndarray
    lexical: LexicalIndex
    created: np.ndarray
    centroid: np.ndarray
    codes: list[TokenCodes] | None = None

    def token_codes(self, rows: np.ndarray) -> list[TokenCodes | None]:
        if self.codes is None:
            return [None] * len(rows)
        return [self.codes[int(r)] for r in rows]


def namespace(
    rows: Sequence[int],
    vecs: np.ndarray,
    texts: Sequence[str],
    created: np.ndarray,
    codes: Sequence[TokenCodes] | None = None,
) -> Namespace:
    v = np.ascontiguousarray(vecs[list(rows)])
    return Namespace(
        [f"{r:06d}" for r in rows],
        v,
        LexicalIndex([texts[r] for r in rows]),
        created[list(rows)],
        v.mean(axis=0),
        None if codes is None else [codes[r] for r in rows],
    )


def speakers_of(raw: dict[str, Any]) -> list[str]:
    """Per observation, in bench.load's order: the speaker it is listed under."""
    return [who for s in raw["observation"].values() for who, items in s.items() for _ in items]


def split(c: bench.Conversation, speakers: Sequence[str]) -> list[Namespace]:
    """One namespace per speaker, in order of first appearance."""
    if len(speakers) != len(c.texts):
        raise ValueError(f"{len(speakers)} speakers for {len(c.texts)} memories")
    order = list(dict.fromkeys(speakers))
    rows = [[i for i, s in enumerate(speakers) if s == who] for who in order]
    return [namespace(r, c.vecs, c.texts, c.created, c.codes or None) for r in rows]


def merged(
    qv: np.ndarray,
    text: str,
    sets: Sequence[Namespace],
    k: int,
    threshold: float,
    query_tokens: QueryTokens | None = None,
) -> list[Ranked]:
    """The emulated old merge: each set ranked alone, the best k by score across them
    (ties: the earlier set, then its own order)."""
    got = [
        (r, i)
        for i, s in enumerate(sets)
        for r in rank_sets(qv, text, [s], k=k, threshold=threshold, query_tokens=query_tokens)
    ]
    got.sort(key=lambda ri: (-ri[0].score, ri[1]))  # stable: each set's order kept
    return [r for r, _ in got[:k]]


def _first(rel: np.ndarray, got: Sequence[Ranked]) -> int:
    found = np.flatnonzero(rel[[int(r.id) for r in got]]) if got else np.zeros(0, np.int64)
    return int(found[0]) + 1 if len(found) else 0


def recall(
    convs: Sequence[bench.Conversation], speakers: Sequence[Sequence[str]]
) -> dict[str, Any]:
    """First-hit ranks of every question, three ways (module doc), and their recall."""
    ranks: dict[str, list[int]] = {"one namespace": [], "union of speakers": [], "merged": []}
    for c, who in zip(convs, speakers, strict=True):
        sets = split(c, who)
        ranks["one namespace"] += bench.first_hits(c, bench.DEFAULTS, K)
        qtokens: list[QueryTokens | None] = list(c.qtokens) or [None] * len(c.queries)
        for q, qv, qt, rel in zip(c.queries, c.qvecs, qtokens, c.relevant, strict=True):
            got = rank_sets(qv, q["question"], sets, k=K, threshold=-1.0, query_tokens=qt)
            ranks["union of speakers"].append(_first(rel, got))
            ranks["merged"].append(_first(rel, merged(qv, q["question"], sets, K, -1.0, qt)))
    n = len(ranks["one namespace"])
    one, union = np.array(ranks["one namespace"]), np.array(ranks["union of speakers"])
    return {
        "queries": n,
        "namespaces": sum(len(set(w)) for w in speakers),
        "recall": {
            name: {f"recall@{k}": round(float(np.mean((r > 0) & (r <= k))), 4) for k in KS}
            for name, r in ((m, np.array(v)) for m, v in ranks.items())
        },
        "union_first_hit_agrees_with_one_namespace": int((one == union).sum()),
    }


def run_recall(path: Path, cache_path: Path | None) -> dict[str, Any]:
    convs = bench.load(path)
    bench.prepare(convs, VectorCache(cache_path))
    speakers = [speakers_of(raw) for raw in json.loads(path.read_text())]
    return {"task": "locomo10 observations, one namespace per speaker"} | recall(convs, speakers)


def _raw_top_k(qv: np.ndarray, vecs: np.ndarray, k: int) -> np.ndarray:
    s = vecs @ qv
    top = np.argpartition(-s, k - 1)[:k]
    return top[np.argsort(-s[top], kind="stable")]


def run_latency(memories: int, queries: int, k: int = K, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(3000)]
    texts = [" ".join(rng.choice(words, 12)) for _ in range(memories)]
    v = rng.standard_normal((memories, 384)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    created = 1672531200.0 + np.arange(memories) * 600.0
    rows = list(range(memories))
    one = namespace(rows, v, texts, created)
    half = memories // 2
    two = [namespace(rows[:half], v, texts, created), namespace(rows[half:], v, texts, created)]
    qs = []
    for i in rng.choice(memories, queries, replace=False):
        q = v[i] + 0.1 * rng.standard_normal(384).astype(np.float32)
        qs.append(((q / np.linalg.norm(q)).astype(np.float32), " ".join(rng.choice(words, 6))))
    thr = DEFAULT_THRESHOLD
    runs: dict[str, Callable[[np.ndarray, str], object]] = {
        "raw top-k (baseline)": lambda q, t: _raw_top_k(q, v, k),
        "rank, one set": lambda q, t: rank(
            q,
            v,
            k=k,
            threshold=thr,
            query_text=t,
            lexical=one.lexical,
            centroid=one.centroid,
            created=created,
        ),  # fmt: skip
        "rank_sets, one set": lambda q, t: rank_sets(q, t, [one], k=k, threshold=thr),
        "rank_sets, two sets": lambda q, t: rank_sets(q, t, two, k=k, threshold=thr),
        "each set alone, merged": lambda q, t: merged(q, t, two, k, thr),
    }
    for q, t in qs[:5]:  # warm-up
        for f in runs.values():
            f(q, t)
    ms: dict[str, list[float]] = {name: [] for name in runs}
    for q, t in qs:  # every figure on the same query, in the same loop
        for name, f in runs.items():
            t0 = time.perf_counter()
            f(q, t)
            ms[name].append((time.perf_counter() - t0) * 1000)
    base = {p: float(np.percentile(ms["raw top-k (baseline)"], p)) for p in (50, 95)}
    out = {}
    for name, got in ms.items():
        p50, p95 = float(np.percentile(got, 50)), float(np.percentile(got, 95))
        out[name] = {
            "p50_ms": round(p50, 3),
            "p95_ms": round(p95, 3),
            "p50_over_raw": round(p50 / base[50], 2),
            "p95_over_raw": round(p95 / base[95], 2),
        }
    return {"memories": memories, "queries": queries, "k": k, "results": out}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path, nargs="?", help="locomo10.json (the recall part)")
    ap.add_argument("--embed-cache", type=Path, help=".npz keeping vectors between runs")
    only = ap.add_mutually_exclusive_group()
    only.add_argument("--recall-only", action="store_true")
    only.add_argument("--latency-only", action="store_true")
    ap.add_argument("--memories", type=int, default=10_000, help="latency: rows in all")
    ap.add_argument("--queries", type=int, default=200, help="latency: timed queries")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.path is None and not args.latency_only:
        ap.error("the recall part needs the path of locomo10.json (or --latency-only)")
    out: dict[str, Any] = {}
    if not args.latency_only:
        out["recall"] = run_recall(args.path, args.embed_cache)
    if not args.recall_only:
        out["latency"] = run_latency(args.memories, args.queries)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    if "recall" in out:
        r = out["recall"]
        print(f"{r['task']}: {r['queries']} queries, {r['namespaces']} namespaces")
        print(f"{'':24s} " + " ".join(f"{'r@' + str(k):>7s}" for k in KS))
        for name, got in r["recall"].items():
            print(f"{name:24s} " + " ".join(f"{got[f'recall@{k}']:7.4f}" for k in KS))
        agree = r["union_first_hit_agrees_with_one_namespace"]
        print(f"union's first hit where one namespace's is: {agree}/{r['queries']}")
    if "latency" in out:
        lat = out["latency"]
        print(f"\nlatency: {lat['memories']} memories, {lat['queries']} queries, k={lat['k']}")
        heads = ("p50 ms", "p95 ms", "p50 x raw", "p95 x raw")
        print(f"{'':24s} " + " ".join(f"{h:>9s}" for h in heads))
        for name, g in lat["results"].items():
            print(
                f"{name:24s} {g['p50_ms']:9.3f} {g['p95_ms']:9.3f}"
                f" {g['p50_over_raw']:9.2f} {g['p95_over_raw']:9.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
