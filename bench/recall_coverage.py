"""Coverage of the question by the top 5 as a set, and word proximity (issue 19, 27th round).

Every round so far scores each memory alone and cuts. These ideas are each held out like
bench/recall_locomo.py's headline: every weight (the shipped ones and the idea's, from a
grid fixed before the run, 0 = off = the headline) chosen on conversations 0-4 by
coordinate ascent on recall@5 and scored on 5-9, then the reverse; the mean of the two
held-out scores, compared question by question with the headline
(``recall_bootstrap.paired``). No term reads a label.

- **coverage selection** (submodular, greedy): the top 10 are picked one at a time from the
  pool of 50, each step taking the candidate with the largest ``s(m) + lam * gain(m | S)``,
  ``s`` the shipped final score (token and context terms included) and ``gain`` how much
  ``m`` adds to the selected set's coverage of the *question* (not MMR's diversity among
  memories). ``lam = 0`` is the headline's cut exactly. Three forms of coverage:

  - *token alignment*: per question content token, the best token-alignment similarity
    (the token term's own per-token table, clipped at 0) among the selected memories;
    coverage is their idf-weighted mean, idf over the pool as the token term has it;
  - *lexical stems*: the idf-weighted share (BM25 idf over the conversation) of the
    question's stems (``memlife.lexical.tokenize``) that some selected memory holds;
  - *set vector* (this round's own idea): the cosine of the question's vector with the
    normalised sum of the selected memories' vectors: a multi-hop question's vector is
    nearer the sum of its two evidence memories than either alone.

  Each form twice: the greedy from an empty set (the first pick gets ``lam`` times its
  coverage alone, so recall@1 can move), and *anchored*: the first pick is the headline's
  first, coverage fills places 2-10.
- **proximity** (adjacent pairs): the idf-weighted count (a pair weighs the sum of its two
  stems' idf) of the question's adjacent content-stem pairs that occur, in either order,
  within ``window`` stems of each other in the memory (window 1: adjacent; and 3),
  max-normalised over the conversation per question, added over the pool after the token
  term with its own weight (as bench/recall_pool_terms.py adds its terms).

Every idea twice: *cold*, its weight chosen by the ascent together with the shipped ones
(the headline's procedure), and *warm*, the shipped weights held at what each fold chose
for the headline and only the idea's weight chosen (added after the first run, to read the
idea apart from the shipped weights it moves). Each row prints the weights that differ
from the headline's per fold. Last (``fixed``), a sensitivity read, not a choice: the
anchored token-alignment cut, warm, at each weight of its grid on both folds.

    uv run python bench/recall_coverage.py ../shared/data/locomo10.json [--embed-cache FILE] \
        [--only cover-token cover-lex cover-vec proximity fixed]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import locomo_replica as replica
import numpy as np
import recall_bootstrap as bootstrap
import recall_locomo as bench
import recall_pool_terms as pool_terms
from locomo_cache import VectorCache
from locomo_replica import Prepared

from memlife.lexical import tokenize
from memlife.retrieval import CONTEXT_POOL

# Grids fixed before the run. The token form's gain is on the token term's scale (the
# shipped token weight is 5); the lexical form's is a share in [0, 1] (BM25's weight 0.3);
# the set vector's is a difference of cosines.
TOKEN_LAMS = (0.0, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0)
LEX_LAMS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
VEC_LAMS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
PROX_WEIGHTS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)
FORMS = ("token", "lex", "vec")

Weights = dict[str, float]
Grid = dict[str, tuple[float, ...]]
Result = dict[str, Any]


def _idf(df: int, n: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def stem_tables(c: bench.Conversation) -> tuple[np.ndarray, np.ndarray]:
    """(Q, T, N) whether each memory holds each of the question's stems, and (Q, T) their
    idf weights summing to 1 per question (0 where the question has none in the memories)."""
    docs = [set(tokenize(t)) for t in c.texts]
    df = Counter(t for d in docs for t in d)
    n = len(docs)
    stems = [[t for t in dict.fromkeys(tokenize(q["question"])) if t in df] for q in c.queries]
    width = max([len(s) for s in stems] + [1])
    held = np.zeros((len(stems), width, n), np.float32)
    wt = np.zeros((len(stems), width), np.float32)
    for qi, terms in enumerate(stems):
        idf = np.array([_idf(df[t], n) for t in terms], np.float32)
        if idf.sum() > 0:
            wt[qi, : len(terms)] = idf / idf.sum()
        for ti, t in enumerate(terms):
            held[qi, ti] = [t in d for d in docs]
    return held, wt


def proximity(c: bench.Conversation, window: int) -> np.ndarray:
    """(Q, N) the proximity term (module doc), max-normalised per question."""
    seqs = [tokenize(t) for t in c.texts]
    df = Counter(t for s in seqs for t in set(s))
    n = len(seqs)
    where: list[dict[str, list[int]]] = []
    for s in seqs:
        pos: dict[str, list[int]] = {}
        for i, t in enumerate(s):
            pos.setdefault(t, []).append(i)
        where.append(pos)
    out = np.zeros((len(c.queries), n), np.float32)
    for qi, q in enumerate(c.queries):
        terms = [t for t in tokenize(q["question"]) if t in df]
        pairs = {(a, b) for a, b in zip(terms, terms[1:], strict=False) if a != b}
        if not pairs:
            continue
        for mi, pos in enumerate(where):
            score = 0.0
            for a, b in pairs:
                pa, pb = pos.get(a), pos.get(b)
                if pa and pb and min(abs(i - j) for i in pa for j in pb) <= window:
                    score += _idf(df[a], n) + _idf(df[b], n)
            out[qi, mi] = score
        top = out[qi].max()
        if top > 0:
            out[qi] /= top
    return out


class Coverage:
    """Per conversation, what the greedy cut needs beside the pool (filled lazily)."""

    def __init__(self) -> None:
        self.stems: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def tables(
        self, p: Prepared, form: str, idx: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """(Q, T, P) each candidate's coverage of each question unit and (Q, T) the
        units' weights; None for the set-vector form (its gain is not per unit)."""
        if form == "token":
            assert p.tok_best is not None and p.tok_held is not None and p.tok_mask is not None
            best = np.maximum(np.take_along_axis(p.tok_best, idx[:, None, :], 2), 0)
            df = np.take_along_axis(p.tok_held, idx[:, None, :], 2).sum(axis=2)
            n = idx.shape[1]
            idf = (np.log((n + 1) / (df + 1)) + 1.0) * p.tok_mask
            denom = idf.sum(axis=1, keepdims=True)
            return best, (idf / np.where(denom > 0, denom, 1.0)).astype(np.float32)
        if form == "lex":
            if id(p) not in self.stems:
                self.stems[id(p)] = stem_tables(p.conv)
            held, wt = self.stems[id(p)]
            return np.take_along_axis(held, idx[:, None, :], 2), wt
        return None


def greedy(
    p: Prepared,
    idx: np.ndarray,
    s: np.ndarray,
    lam: float,
    form: str,
    anchored: bool,
    cov: Coverage,
    k: int = 10,
) -> np.ndarray:
    """The top ``k`` of each query's pool ``idx`` (Q, P) by the greedy cut (module doc);
    at ``lam`` 0 the stable order of ``s``, as the headline cuts."""
    q, n = idx.shape
    rows = np.arange(q)
    left = np.ones((q, n), bool)
    out = np.empty((q, k), np.int64)
    tab = cov.tables(p, form, idx)
    if tab is not None:
        unit, wt = tab
        have = np.zeros(wt.shape, np.float32)
    else:
        vec = p.conv.vecs[idx]  # Q x P x D
        qv = p.conv.qvecs
        total = np.zeros((q, vec.shape[2]), np.float32)
        now = np.zeros(q, np.float32)
    for r in range(min(k, n)):
        if r == 0 and anchored:
            gain = np.zeros_like(s)
        elif tab is not None:
            gain = np.einsum("qt,qtp->qp", wt, np.maximum(unit - have[:, :, None], 0))
        else:
            both = total[:, None, :] + vec
            norm = np.linalg.norm(both, axis=2)
            cos = np.einsum("qd,qpd->qp", qv, both) / np.where(norm > 0, norm, 1)
            gain = cos - now[:, None]
        val = np.where(left, s + np.float32(lam) * gain.astype(np.float32), -np.inf)
        j = val.argmax(axis=1)  # ties: the first in pool order, as the stable sort
        out[:, r] = idx[rows, j]
        left[rows, j] = False
        if tab is not None:
            have = np.maximum(have, unit[rows, :, j])
        else:
            total = total + vec[rows, j]
            norm = np.linalg.norm(total, axis=1)
            now = np.einsum("qd,qd->q", qv, total) / np.where(norm > 0, norm, 1)
    return out


def first_hits_covering(form: str, anchored: bool, cov: Coverage) -> Callable[..., np.ndarray]:
    """replica.first_hits with its cut made by :func:`greedy` at weight ``w["cover"]``."""

    def first_hits(
        p: Prepared, w: dict[str, float], post: object = None, pool: int = CONTEXT_POOL
    ) -> np.ndarray:
        f = replica.fused(p, w)
        pool = min(pool, f.shape[1])
        idx = np.argsort(-f, axis=1, kind="stable")[:, :pool]
        s = np.take_along_axis(f, idx, 1)
        if w.get("token") and p.tok_best is not None:
            s = s + np.float32(w["token"]) * replica.token_term(p, idx)
        if w["context"] and f.shape[1] > 1:
            near = p.near[idx[:, :, None], idx[:, None, :]]
            nb = np.where(near, s[:, None, :], -np.inf).max(axis=2)
            s = s + np.float32(w["context"]) * np.where(np.isfinite(nb), nb, s)
        if w.get("cover"):
            top = greedy(p, idx, s, w["cover"], form, anchored, cov)
        else:
            top = np.take_along_axis(idx, np.argsort(-s, axis=1, kind="stable")[:, :10], 1)
        rel = np.take_along_axis(p.relevant, top, 1)
        return np.where(rel.any(axis=1), rel.argmax(axis=1) + 1, 0)

    return first_hits


def held_out_full(
    preps: list[Prepared], grid: Grid, base: list[Weights] | None = None, warm: bool = False
) -> Result:
    """``locomo_replica.held_out`` that also says, per fold, every weight that differs from
    the headline's choice ``base`` (the idea's included). ``warm``: only the grid's
    non-shipped weights are chosen, the shipped ones held at the headline's per fold."""
    chosen, tests = [], []
    for fold, (train, test) in enumerate(bench.FOLDS):
        g = grid
        if warm and base is not None:
            g = {k: (base[fold][k],) if k in bench.GRID else v for k, v in grid.items()}
        w = replica.choose([preps[i] for i in train], g, None, CONTEXT_POOL)
        chosen.append(w)
        tests.append(replica._score([preps[i] for i in test], w, None, CONTEXT_POOL))
    ref = base or chosen
    shown = [
        {
            k: v
            for k, v in w.items()
            if (k in bench.GRID and v != b[k]) or (k not in bench.GRID and v)
        }
        or "same"
        for w, b in zip(chosen, ref, strict=True)
    ]
    return replica.tally(tests) | {"idea_weights": shown, "weights": chosen}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--embed-cache", type=Path)
    ap.add_argument(
        "--only", nargs="*", default=["cover-token", "cover-lex", "cover-vec", "proximity", "fixed"]
    )
    args = ap.parse_args(argv)
    cache = VectorCache(args.embed_cache)
    preps = replica.checked(bench.load(args.path, "observations"), cache)
    if preps is None:
        return 1
    grid = dict(bench.GRID)
    shipped = replica.first_hits
    cov = Coverage()
    head = held_out_full(preps, grid)
    base: list[Weights] = head["weights"]
    same = all(
        np.array_equal(a, b)
        for a, b in zip(replica.held_out(preps, grid)["ranks"], head["ranks"], strict=True)
    )
    print("headline weights per fold:", base, "| the same ranks as held_out():", same)

    def patched(
        hits: Callable[..., np.ndarray], weights: Grid, warm: bool = False
    ) -> Callable[[], Result]:
        def run() -> Result:
            replica.first_hits = hits
            try:
                return held_out_full(preps, grid | weights, base, warm)
            finally:
                replica.first_hits = shipped

        return run

    def near_term(window: int) -> pool_terms.PoolTerm:
        table = {id(p): proximity(p.conv, window) for p in preps}

        def term(p: Prepared, idx: np.ndarray, s: np.ndarray) -> np.ndarray:
            return np.take_along_axis(table[id(p)], idx, 1)

        return term

    lams = {"token": TOKEN_LAMS, "lex": LEX_LAMS, "vec": VEC_LAMS}
    names = {"token": "token alignment", "lex": "lexical stems", "vec": "set vector"}
    runs: list[tuple[str, Callable[[], Result]]] = [
        ("shipped terms (headline)", lambda: head),
        ("shipped, through this module's cut (cover 0)", patched(
            first_hits_covering("token", False, cov), {"cover": (0.0,)})),
    ]  # fmt: skip
    for warm in (False, True):
        tag = ", warm" if warm else ""
        for form in FORMS:
            if f"cover-{form}" not in args.only:
                continue
            for anchored in (False, True):
                label = f"cover, {names[form]}" + (", anchored" if anchored else "") + tag
                hits = first_hits_covering(form, anchored, cov)
                runs.append((label, patched(hits, {"cover": lams[form]}, warm)))
        if "proximity" in args.only:
            for window in (1, 3):
                hits = pool_terms.first_hits_with({"near": near_term(window)})
                label = f"proximity pairs, window {window}{tag}"
                runs.append((label, patched(hits, {"near": PROX_WEIGHTS}, warm)))
    if "fixed" in args.only:  # sensitivity, not a choice: one weight on both folds
        for lam in TOKEN_LAMS[1:]:
            hits = first_hits_covering("token", True, cov)
            label = f"cover, token alignment, anchored, warm, lam {lam} fixed"
            runs.append((label, patched(hits, {"cover": (lam,)}, True)))

    bootstrap.print_rows(
        runs, "held out, observations", bench.KS, width=50, weights_label="weights per fold"
    )
    cache.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
