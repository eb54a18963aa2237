"""LongTermMemory.recall latency for one actor: p50/p95 end to end (query embedding included).

Builds a temporary SQLite store per size with synthetic memories of one actor (content
from bench/recall_latency.py's generator; their vectors are seeded into the embedding
cache from a pool of real MiniLM vectors plus noise, so setup does not spend minutes
embedding), loads the actor's index once (reported apart), then times ``recall`` for
real queries: query embedding, staleness check, hybrid ranking, record fetch, ledger
append. A second figure times recall right after a ``remember`` (index kept in step).

    uv run python bench/recall_memory.py [--sizes 1000 10000] [--queries 200] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from recall_latency import creation_times, questions, sentences  # noqa: E402

from memlife.backends import embedding_cache
from memlife.embed import default_embedder  # noqa: E402
from memlife.embed_cache import TOKENS  # noqa: E402
from memlife.ledger import AccessLedger  # noqa: E402
from memlife.model import MemoryRecord, MemoryType, content_sha256  # noqa: E402
from memlife.online.memory import LongTermMemory  # noqa: E402
from memlife.stores.sqlite import SqliteStore  # noqa: E402

NS = "/users/bench/facts"


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000, p))


def run_size(size: int, pool: np.ndarray, qs: list[str], rng: random.Random, k: int) -> dict:
    emb = default_embedder()
    nprng = np.random.default_rng(size)
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "m.db")
        texts = sentences(size, rng)
        created = [datetime.fromtimestamp(t, UTC) for t in creation_times(size)]
        store.put_many(
            [
                MemoryRecord(
                    id=f"b-{i:07d}",
                    actor_id="bench",
                    namespace=NS,
                    memory_type=MemoryType.semantic,
                    content=t,
                    created_at=created[i],
                )
                for i, t in enumerate(texts)
            ]
        )
        vecs = pool[np.arange(size) % len(pool)] + nprng.normal(0, 0.02, (size, pool.shape[1]))
        vecs = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)
        cache = embedding_cache(store, emb)
        codes = emb.embed_with_tokens(texts[: len(pool)])[1]  # as remember stores them
        cache._store(
            [
                (content_sha256(t), emb.model_id, emb.dim, v.tobytes())
                for t, v in zip(texts, vecs, strict=True)
            ]
            + [
                (content_sha256(t), emb.model_id + TOKENS, len(c), c.to_bytes())
                for t, c in ((t, codes[i % len(codes)]) for i, t in enumerate(texts))
            ]
        )
        mem = LongTermMemory(store, embedder=emb, cache=cache, ledger=AccessLedger(Path(tmp) / "l"))
        t0 = time.perf_counter()
        mem.recall("bench", qs[0], k=k)  # first use loads the shard
        load_ms = (time.perf_counter() - t0) * 1000
        embed_only = []
        for q in qs:
            t0 = time.perf_counter()
            emb.embed([q])
            embed_only.append(time.perf_counter() - t0)
        times = []
        for q in qs:
            t0 = time.perf_counter()
            mem.recall("bench", q, k=k)
            times.append(time.perf_counter() - t0)
        after_write = []
        for i, q in enumerate(qs[:50]):
            mem.remember("bench", NS, None, f"Bench fact number {i}: I collect {q.lower()}")
            t0 = time.perf_counter()
            mem.recall("bench", q, k=k)
            after_write.append(time.perf_counter() - t0)
        assert mem.load_count == 1, "the index must never be reloaded here"
        mem.close()
        store.close()
    return {
        "memories": size,
        "load_ms": round(load_ms, 1),
        "embed_only_p50_ms": round(pct(embed_only, 50), 2),
        "recall_p50_ms": round(pct(times, 50), 2),
        "recall_p95_ms": round(pct(times, 95), 2),
        "after_remember_p50_ms": round(pct(after_write, 50), 2),
        "after_remember_p95_ms": round(pct(after_write, 95), 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--pool", type=int, default=1000)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    rng = random.Random(7)
    emb = default_embedder()
    pool = emb.embed(sentences(args.pool, rng))
    qs = questions(args.queries, rng)
    emb.embed(qs[:5])  # warm-up
    results = [run_size(s, pool, qs, rng, args.k) for s in args.sizes]
    out = {
        "threads": emb.intra_op_threads,
        "k": args.k,
        "queries": args.queries,
        "results": results,
    }
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(
            f"LongTermMemory.recall, k={args.k}, {args.queries} queries, "
            f"{emb.intra_op_threads} embed threads"
        )
        print(
            f"{'memories':>9} {'load ms':>8} {'embed p50':>9} {'p50 ms':>7} {'p95 ms':>7} {'p50 after write':>16} {'p95':>7}"
        )
        for r in results:
            print(
                f"{r['memories']:>9} {r['load_ms']:>8} {r['embed_only_p50_ms']:>9} "
                f"{r['recall_p50_ms']:>7} "
                f"{r['recall_p95_ms']:>7} {r['after_remember_p50_ms']:>16} "
                f"{r['after_remember_p95_ms']:>7}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
