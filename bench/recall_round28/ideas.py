# ruff: noqa
"""Round 28 ideas, held out on the replica (weights chosen per training fold)."""

import argparse, math, re, sys
import os
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pathlib import Path
import numpy as np
import recall_locomo as bench, locomo_replica as rep, recall_bootstrap as bootstrap
from locomo_cache import VectorCache
from memlife.lexical import tokenize
from memlife.timeref import query_date_ranges
from memlife import retrieval

ap = argparse.ArgumentParser()
ap.add_argument("--granularity", default="observations")
ap.add_argument("--only", nargs="*")
args = ap.parse_args()
cache = VectorCache(Path(os.environ.get("EMBED_CACHE", "/tmp/round28_emb.npz")))
convs = bench.load(Path("../shared/data/locomo10.json"), args.granularity)
preps = rep.checked(convs, cache)
grid = dict(bench.GRID)
SMALL = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3)


def ideal(lex, q):
    n = len(lex)
    tot = 0.0
    for t in dict.fromkeys(tokenize(q)):
        df = lex.df(t)
        tot += math.log(1.0 + (n - df + 0.5) / (df + 0.5))
    return tot


def bm_norm(kind):
    def run():
        saved = [p.bm25 for p in preps]
        try:
            for p in preps:
                raw = np.stack([p.lexical.scores(q["question"]) for q in p.conv.queries])
                top = raw.max(axis=1, keepdims=True)
                ide = np.array([[ideal(p.lexical, q["question"])] for q in p.conv.queries])
                if kind == "ideal":
                    den = ide
                else:
                    den = np.sqrt(top * ide)
                p.bm25 = np.where(den > 0, raw / np.where(den > 0, den, 1), 0).astype(np.float32)
            return rep.held_out(preps, grid)
        finally:
            for p, b in zip(preps, saved):
                p.bm25 = b

    return run


ASK = re.compile(
    r"\b(asked|asks|inquired|inquires|inquiring|curious|wonders|wondered|wants to know|wanted to know)\b",
    re.I,
)


def ask_penalty(c):
    v = np.array([-1.0 if ASK.search(t) else 0.0 for t in c.texts], np.float32)
    return np.broadcast_to(v, (len(c.queries), len(c.texts))).copy()


def late_dates(c):
    out = np.zeros((len(c.queries), len(c.texts)), np.float32)
    for qi, q in enumerate(c.queries):
        for lo, hi in query_date_ranges(q["question"]):
            a = retrieval.day_start(hi) + (1 + retrieval.DATE_GRACE_DAYS) * 86400.0
            out[qi] = np.maximum(
                out[qi], ((c.created >= a) & (c.created < a + 38 * 86400.0)).astype(np.float32)
            )
    return out


def char_ngrams(n):
    def make(c):
        def grams(s):
            s = " " + re.sub(r"[^a-z0-9]+", " ", s.lower()).strip() + " "
            return [s[i : i + n] for i in range(len(s) - n + 1)]

        from collections import Counter

        docs = [Counter(grams(t)) for t in c.texts]
        df = Counter(g for d in docs for g in d)
        N = len(docs)
        idf = {g: math.log((N + 1) / (v + 1)) + 1 for g, v in df.items()}

        def vec(cnt):
            v = {g: (1 + math.log(x)) * idf.get(g, math.log(N + 1) + 1) for g, x in cnt.items()}
            nrm = math.sqrt(sum(x * x for x in v.values())) or 1.0
            return {g: x / nrm for g, x in v.items()}

        dv = [vec(d) for d in docs]
        out = np.zeros((len(c.queries), N), np.float32)
        for qi, q in enumerate(c.queries):
            qv = vec(Counter(grams(q["question"])))
            for j, d in enumerate(dv):
                out[qi, j] = sum(x * d.get(g, 0.0) for g, x in qv.items())
        return out

    return make


def interaction(c_idx):
    # both views agree: cosine x max-normalised BM25 (AND-like fusion)
    p = preps[c_idx]
    return (np.clip(p.cos, 0, None) * p.bm25).astype(np.float32)


runs = [("shipped terms (headline)", lambda: rep.held_out(preps, grid))]
runs.append(("BM25 / the question's ideal score (in place of max)", bm_norm("ideal")))
runs.append(("BM25 / sqrt(max x ideal)", bm_norm("geo")))
runs.append(
    (
        "interrogative memories penalised",
        lambda: rep.held_out_with(preps, grid, "ask", lambda i, c: ask_penalty(c), SMALL),
    )
)
runs.append(
    (
        "date bonus 8-45 days after the period",
        lambda: rep.held_out_with(
            preps, grid, "late", lambda i, c: late_dates(c), (0, 0.05, 0.1, 0.2, 0.3)
        ),
    )
)
runs.append(
    (
        "char 4-gram tf-idf cosine",
        lambda: rep.held_out_with(
            preps, grid, "c4", lambda i, c: char_ngrams(4)(c), (0, 0.05, 0.1, 0.2, 0.3, 0.5)
        ),
    )
)
runs.append(
    (
        "cosine x BM25 interaction",
        lambda: rep.held_out_with(
            preps, grid, "inter", lambda i, c: interaction(i), (0, 0.1, 0.2, 0.3, 0.5, 1.0)
        ),
    )
)
chosen = [
    (l, f)
    for n, (l, f) in enumerate(runs)
    if n == 0 or not args.only or any(o in l for o in args.only)
]


def clear():
    for p in preps:
        p.extra = {}


bootstrap.print_rows(chosen, f"held out, {args.granularity}", bench.KS, before=clear)
