"""Question and memory read together by the shipped model, zero-shot; held out (issue 19, 25th round).

Every round since the sixth ended on the same line: the candidates the top 5 misses are
in the pool (0.971 of questions at 50), and what would lift them is a model that reads
question and memory together; no cross-encoder ships in a PyPI package. MiniLM itself can
be *run* on the pair, ``[CLS] question [SEP] memory [SEP]`` with BERT's segment ids, so
that each side's token states attend to the other's. It was never trained that way (its
training encodes each sentence alone), so whether its joint states carry relevance is an
empirical question; this script asks it. The best 20 candidates of the shipped ranking
(default weights) are read in pairs, and four signals of the joint pass are tried, each
min-max scaled over the query's candidates and added over the pool with a weight chosen
per training fold (0 = off, the grid fixed before the run):

- ``cross_mean``: cosine of the question's and the memory's mean token states;
- ``maxsim``: each question content token's best cosine among the memory's tokens, averaged;
- ``pair_vs_q``: the pair's mean state against the question's own sentence vector;
- ``shift``: the pair's mean state against the memory's own sentence vector.

About 26,000 pairs (18 minutes at a load of 12 on this machine's two cores); ``--pairs FILE`` keeps
them between runs.

    uv run python bench/recall_joint_pass.py ../shared/data/locomo10.json [--embed-cache FILE] [--pairs FILE]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import locomo_replica as replica
import numpy as np
import recall_bootstrap as bootstrap
import recall_locomo as bench
import recall_pool_terms as pool_terms
from locomo_cache import VectorCache
from locomo_replica import Prepared, held_out

from memlife.embed import MiniLMEmbedder, default_embedder
from memlife.retrieval import CONTEXT_POOL

CANDIDATES = 20  # read in pairs per question, from the shipped ranking's top
SIGNALS = ("cross_mean", "maxsim", "pair_vs_q", "shift")
WEIGHTS = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3)  # fixed before the run
SEP = 102  # [SEP] in MiniLM's vocabulary


def shipped_top(p: Prepared, k: int = CANDIDATES) -> np.ndarray:
    """Q x k: each question's best ``k`` under the shipped default weights."""
    w = dict(bench.DEFAULTS)
    f = replica.fused(p, w)
    idx = np.argsort(-f, axis=1, kind="stable")[:, :CONTEXT_POOL]
    s = np.take_along_axis(f, idx, 1) + np.float32(w["token"]) * replica.token_term(p, idx)
    near = p.near[idx[:, :, None], idx[:, None, :]]
    nb = np.where(near, s[:, None, :], -np.inf).max(axis=2)
    s = s + np.float32(w["context"]) * np.where(np.isfinite(nb), nb, s)
    return np.take_along_axis(idx, np.argsort(-s, axis=1, kind="stable")[:, :k], 1)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-9)


def joint_signals(p: Prepared, emb: MiniLMEmbedder) -> dict[str, np.ndarray]:
    """Q x N per signal: the joint pass's value for each question's candidates, NaN elsewhere."""
    c = p.conv
    sess, tok, content = emb._session(), emb._tokenizer(), emb.content_pieces()
    questions = [q["question"] for q in c.queries]
    out = {s: np.full((len(questions), len(c.texts)), np.nan, np.float32) for s in SIGNALS}
    pairs = [(qi, int(m)) for qi, row in enumerate(shipped_top(p)) for m in row]
    for lo in range(0, len(pairs), 64):
        chunk = pairs[lo : lo + 64]
        enc = tok.encode_batch([(questions[qi], c.texts[m]) for qi, m in chunk])
        width = max(len(e.ids) for e in enc)
        ids, mask, types = (np.zeros((len(enc), width), np.int64) for _ in range(3))
        for i, e in enumerate(enc):
            ids[i, : len(e.ids)], mask[i, : len(e.ids)] = e.ids, e.attention_mask
            types[i, : len(e.ids)] = e.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in emb._inputs:
            feeds["token_type_ids"] = types
        hidden = np.asarray(sess.run(None, feeds)[0])
        for i, (qi, m) in enumerate(chunk):
            n = int(mask[i].sum())
            first_sep = int(np.flatnonzero(ids[i, :n] == SEP)[0])
            q_at, m_at = np.arange(1, first_sep), np.arange(first_sep + 1, n - 1)
            hq, hm = hidden[i, q_at], hidden[i, m_at]
            out["cross_mean"][qi, m] = _unit(hq.mean(0)) @ _unit(hm.mean(0))
            words = content[ids[i, q_at]]
            qc = _unit(hq[words] if words.any() else hq)
            out["maxsim"][qi, m] = (qc @ _unit(hm).T).max(axis=1).mean()
            whole = _unit(hidden[i, :n].mean(0))
            out["pair_vs_q"][qi, m] = whole @ c.qvecs[qi]
            out["shift"][qi, m] = whole @ c.vecs[m]
    return out


def scaled_term(signal: dict[int, np.ndarray], preps: list[Prepared]) -> pool_terms.PoolTerm:
    """A pool term: the signal min-max scaled over the query's read candidates, 0 elsewhere."""

    def term(p: Prepared, idx: np.ndarray, base: np.ndarray) -> np.ndarray:
        v = np.take_along_axis(signal[preps.index(p)], idx, 1)
        ok = np.isfinite(v)
        lo = np.where(ok, v, np.inf).min(axis=1, keepdims=True)
        hi = np.where(ok, v, -np.inf).max(axis=1, keepdims=True)
        return np.where(ok, (v - lo) / np.where(hi > lo, hi - lo, 1), 0).astype(np.float32)

    return term


def print_signals(
    preps: list[Prepared], kept: dict[str, np.ndarray], names: Sequence[str],
    weights: Sequence[float], label: str,
) -> None:  # fmt: skip
    """The headline, then each signal (``kept["{conversation}:{name}"]``, Q x N) added as a
    pool term with its weight chosen per training fold; paired with the headline."""
    grid = dict(bench.GRID)
    shipped = replica.first_hits

    def with_signal(name: str) -> Callable[[], dict]:
        term = scaled_term({i: kept[f"{i}:{name}"] for i in range(len(preps))}, preps)

        def run() -> dict:
            replica.first_hits = pool_terms.first_hits_with({name: term})
            try:
                return held_out(preps, grid | {name: tuple(weights)})
            finally:
                replica.first_hits = shipped

        return run

    runs: list[tuple[str, Callable[[], dict]]] = [
        ("shipped terms (headline)", lambda: held_out(preps, grid))
    ]
    runs += [(f"{label}: {name}", with_signal(name)) for name in names]
    bootstrap.print_rows(
        runs, "held out, observations", bench.KS, width=40, weights_label="weights per fold"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--embed-cache", type=Path)
    ap.add_argument("--pairs", type=Path, help="npz keeping the joint signals between runs")
    args = ap.parse_args(argv)
    cache = VectorCache(args.embed_cache)
    preps = replica.checked(bench.load(args.path, "observations"), cache)
    if preps is None:
        return 1
    if args.pairs is not None and args.pairs.exists():
        kept = dict(np.load(args.pairs))
    else:
        emb = default_embedder()
        kept = {
            f"{i}:{name}": values
            for i, p in enumerate(preps)
            for name, values in joint_signals(p, emb).items()
        }
        if args.pairs is not None:
            np.savez(args.pairs, **kept)  # type: ignore[arg-type]
    print_signals(preps, kept, SIGNALS, WEIGHTS, "joint pass")
    cache.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
