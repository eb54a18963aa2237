"""Ranking ideas for LoCoMo recall, each measured held out (issue 19, second round).

Every idea is a term added to the shipped fusion (``memlife.retrieval.rank``) or a change
to its inputs, given its own weight grid (0 = off), and judged exactly like
bench/recall_locomo.py's headline: all weights chosen on conversations 0-4 by coordinate
ascent on recall@5, scored on 5-9, then the reverse; the mean of the two held-out scores.
None is shipped: results and conclusions are in BENCHMARKS.md, "LoCoMo recall, held out".

The grid search runs on a vectorised replica of ``rank`` (all queries of a conversation
at once: about 5 s per held-out figure instead of about 2 minutes). The replica is
checked against ``rank`` itself on every conversation before anything is measured, and
the run stops if they disagree.

    uv run python bench/recall_ideas.py ../shared/data/locomo10.json \\
        [--granularity turns] [--embed-cache FILE] [--embed-variants] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import recall_locomo as bench

from memlife import retrieval, token_match
from memlife.retrieval import CONTEXT_POOL, CONTEXT_WINDOW_S, LexicalIndex, tokenize
from memlife.timeref import _month, _month_end, query_date_ranges
from memlife.token_match import QueryTokens, TokenCodes

WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.5)


@dataclass
class Prepared:
    """One conversation, every query at once: Q x N matrices of the fused terms."""

    conv: bench.Conversation
    cos: np.ndarray
    cent: np.ndarray
    bm25: np.ndarray
    date: np.ndarray
    near: np.ndarray  # N x N: created within CONTEXT_WINDOW_S of each other
    relevant: np.ndarray  # Q x N
    category: np.ndarray
    lexical: LexicalIndex
    extra: dict[str, np.ndarray] = field(default_factory=dict)  # idea -> Q x N term
    # token alignment: per query and content token, its best match in every memory (Q, T, N),
    # whether the memory holds that piece (Q, T, N), and which of the T slots are real (Q, T)
    tok_best: np.ndarray | None = None
    tok_held: np.ndarray | None = None
    tok_mask: np.ndarray | None = None


def prepare(
    c: bench.Conversation,
    index_texts: Sequence[str] | None = None,
    dates: Callable[[str, np.ndarray], list[tuple[date, date]]] | None = None,
) -> Prepared:
    """The shipped terms for every query (``index_texts``: BM25 over other texts;
    ``dates``: another reading of the query's dates)."""
    vecs, qvecs = c.vecs, c.qvecs
    mu = vecs.mean(axis=0)
    lexical = LexicalIndex(index_texts if index_texts is not None else c.texts)
    bm = np.stack([lexical.scores(q["question"]) for q in c.queries])
    top = bm.max(axis=1, keepdims=True)
    dated = []
    for q in c.queries:
        ranges = dates(q["question"], c.created) if dates else query_date_ranges(q["question"])
        inside = np.zeros(len(c.created), bool)
        for lo, hi in ranges:
            end = retrieval.day_start(hi) + (1 + retrieval.DATE_GRACE_DAYS) * 86400.0
            inside |= (c.created >= retrieval.day_start(lo)) & (c.created < end)
        dated.append(inside.astype(np.float32))
    near = np.abs(c.created[:, None] - c.created[None, :]) <= CONTEXT_WINDOW_S
    np.fill_diagonal(near, False)
    tok_best = tok_held = tok_mask = None
    if c.codes and c.qtokens:
        tok_best, tok_held, tok_mask = token_tables(c.codes, c.qtokens)
    return Prepared(
        conv=c,
        cos=qvecs @ vecs.T,
        cent=-(vecs @ mu - mu @ mu)[None, :],
        bm25=np.where(top > 0, bm / np.where(top > 0, top, 1), 0).astype(np.float32),
        date=np.stack(dated),
        near=near,
        relevant=np.stack(c.relevant),
        category=np.array([q["category"] for q in c.queries]),
        lexical=lexical,
        tok_best=tok_best,
        tok_held=tok_held,
        tok_mask=tok_mask,
    )


def token_tables(
    codes: Sequence[TokenCodes], queries: Sequence[QueryTokens]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """token_match.alignment's inputs for every query and memory at once (Prepared)."""
    dim = queries[0].states.shape[1] if queries else 384
    signs = token_match.sign_rows(np.concatenate([c.bits for c in codes]), dim)
    starts = np.concatenate([[0], np.cumsum([len(c) for c in codes])[:-1]])
    width = max([len(q) for q in queries] + [1])
    best = np.zeros((len(queries), width, len(codes)), np.float32)
    held = np.zeros((len(queries), width, len(codes)), bool)
    mask = np.zeros((len(queries), width), bool)
    for i, q in enumerate(queries):
        if not len(q):
            continue
        scaled = token_match.scaled_states(q)
        best[i, : len(q)] = np.maximum.reduceat(scaled @ signs.T, starts, axis=1)
        held[i, : len(q)] = np.stack([np.isin(q.pieces, c.pieces) for c in codes], axis=1)
        mask[i, : len(q)] = True
    return best, held, mask


def token_term(p: Prepared, idx: np.ndarray) -> np.ndarray:
    """token_match.alignment over each query's pool ``idx`` (Q, P): idf over the pool."""
    assert p.tok_best is not None and p.tok_held is not None and p.tok_mask is not None
    best = np.take_along_axis(p.tok_best, idx[:, None, :], 2)
    df = np.take_along_axis(p.tok_held, idx[:, None, :], 2).sum(axis=2)
    n = idx.shape[1]
    idf = (np.log((n + 1) / (df + 1)) + 1.0) * p.tok_mask
    denom = idf.sum(axis=1)
    score = np.einsum("qt,qtp->qp", idf, best) / np.where(denom > 0, denom, 1.0)[:, None]
    return score.astype(np.float32)


Post = Callable[[Prepared, np.ndarray, dict], np.ndarray]


def fused(p: Prepared, w: dict[str, float], post: Post | None = None) -> np.ndarray:
    f = p.cos + w["centroid"] * p.cent + w["lexical"] * p.bm25 + w["date"] * p.date
    for name, term in p.extra.items():
        if w.get(name):
            f = f + w[name] * term
    f = f.astype(np.float32)
    return post(p, f, w) if post is not None else f


def first_hits(
    p: Prepared, w: dict[str, float], post: Post | None = None, pool: int = CONTEXT_POOL
) -> np.ndarray:
    """Per query: 1-based rank of the first relevant memory in the top 10 (0 = none)."""
    f = fused(p, w, post)
    pool = min(pool, f.shape[1])
    idx = np.argsort(-f, axis=1, kind="stable")[:, :pool]  # ties: lower index, as rank
    s = np.take_along_axis(f, idx, 1)
    if w.get("token") and p.tok_best is not None:
        s = s + np.float32(w["token"]) * token_term(p, idx)
    if w["context"] and f.shape[1] > 1:
        near = p.near[idx[:, :, None], idx[:, None, :]]
        nb = np.where(near, s[:, None, :], -np.inf).max(axis=2)
        s = s + np.float32(w["context"]) * np.where(np.isfinite(nb), nb, s)
    if w.get("diversity"):
        top = _session_diverse(p, idx, s, w["diversity"])
    else:
        top = np.take_along_axis(idx, np.argsort(-s, axis=1, kind="stable")[:, :10], 1)
    rel = np.take_along_axis(p.relevant, top, 1)
    return np.where(rel.any(axis=1), rel.argmax(axis=1) + 1, 0)


def _session_diverse(p: Prepared, idx: np.ndarray, s: np.ndarray, penalty: float) -> np.ndarray:
    """Greedy top 10 where each pick costs ``penalty`` to the rest of its session (evidence
    of a multi-hop question sits in different sessions)."""
    out = np.empty((len(idx), 10), np.int64)
    for qi in range(len(idx)):
        left = s[qi].astype(np.float64)
        session = p.conv.created[idx[qi]]
        for r in range(10):
            j = int(np.argmax(left))
            out[qi, r] = idx[qi, j]
            left[j] = -np.inf
            left[session == session[j]] -= penalty
    return out


def check_replica(preps: Sequence[Prepared], w: dict[str, float]) -> float:
    """Share of queries whose first hit the replica and ``rank`` put at the same place."""
    same = total = 0
    for p in preps:
        got, want = first_hits(p, w), bench.first_hits(p.conv, w)
        same += int((got == np.asarray(want)).sum())
        total += len(want)
    return same / total


def _score(preps: Sequence[Prepared], w: dict, post: Post | None, pool: int) -> dict:
    hits = {k: Counter() for k in bench.KS}
    total: Counter = Counter()
    for p in preps:
        for cat, r in zip(p.category, first_hits(p, w, post, pool), strict=True):
            total[cat] += 1
            for k in bench.KS:
                hits[k][cat] += bool(0 < r <= k)
    return {"hits": hits, "total": total}


def _recall5(preps: Sequence[Prepared], w: dict, post: Post | None, pool: int) -> float:
    s = _score(preps, w, post, pool)
    return sum(s["hits"][5].values()) / max(sum(s["total"].values()), 1)


def choose(preps: Sequence[Prepared], grid: dict, post: Post | None, pool: int) -> dict:
    """bench.choose's coordinate ascent (same start, order, ties, at most 4 sweeps)."""
    w = {name: values[0] for name, values in grid.items()}
    best = _recall5(preps, w, post, pool)
    for _ in range(4):
        changed = False
        for name, values in grid.items():
            for v in values:
                if v == w[name]:
                    continue
                trial = {**w, name: v}
                r = _recall5(preps, trial, post, pool)
                if r > best + 1e-12:
                    best, w, changed = r, trial, True
        if not changed:
            break
    return w


def held_out(
    preps: Sequence[Prepared], grid: dict, post: Post | None = None, pool: int = CONTEXT_POOL
) -> dict:
    pooled = {"hits": {k: Counter() for k in bench.KS}, "total": Counter()}
    means: dict[int, list[float]] = {k: [] for k in bench.KS}
    weights = []
    for train, test in bench.FOLDS:
        w = choose([preps[i] for i in train], grid, post, pool)
        weights.append({k: v for k, v in w.items() if k not in bench.GRID and v} or "0")
        s = _score([preps[i] for i in test], w, post, pool)
        n = sum(s["total"].values())
        for k in bench.KS:
            means[k].append(sum(s["hits"][k].values()) / n)
            pooled["hits"][k].update(s["hits"][k])
        pooled["total"].update(s["total"])
    return {
        "mean": {k: float(np.mean(v)) for k, v in means.items()},
        "pooled": bench.summarise(pooled),
        "idea_weights": weights,
    }


# ---- the ideas ---------------------------------------------------------------------


def dense_prf(k: int, centred: bool) -> Post:
    """Query + beta x mean of the top-k vectors (minus the centroid when ``centred``)."""

    def post(p: Prepared, f: np.ndarray, w: dict) -> np.ndarray:
        if not w.get("prf"):
            return f
        vecs = p.conv.vecs
        top = np.argpartition(-f, k - 1, axis=1)[:, :k]
        m = vecs[top].mean(axis=1)
        if centred:
            m = m - vecs.mean(axis=0)
        return f + np.float32(w["prf"]) * (m @ vecs.T)

    return post


def lexical_prf(k: int, terms: int) -> Post:
    """RM3-style fan-out: the top-k memories' rarest terms (tf/len x idf) form a second
    BM25 query, max-normalised and added with its own weight."""

    def post(p: Prepared, f: np.ndarray, w: dict) -> np.ndarray:
        if not w.get("rm3"):
            return f
        lex = p.lexical
        n = len(lex)
        out = f.copy()
        top = np.argsort(-f, axis=1)[:, :k]
        for qi, q in enumerate(p.conv.queries):
            own = set(tokenize(q["question"]))
            weight: dict[str, float] = {}
            for j in top[qi]:
                doc = lex._docs[j]
                length = sum(doc.values()) or 1
                for t, tf in doc.items():
                    if t not in own:
                        df = len(lex._postings[t])
                        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                        weight[t] = weight.get(t, 0.0) + tf / length * idf
            s = np.zeros(n, np.float32)
            for t in sorted(weight, key=lambda t: -weight[t])[:terms]:
                hit = lex._posting(t)
                if hit is not None:
                    s[hit[0]] += hit[1] * weight[t]
            if s.max() > 0:
                out[qi] += np.float32(w["rm3"]) * s / s.max()
        return out

    return post


def session_score(kind: str) -> Post:
    """Hierarchical: add the mean / max / top-3 mean of the fused scores of the record's
    conversation neighbours (created within CONTEXT_WINDOW_S), over every record."""

    def post(p: Prepared, f: np.ndarray, w: dict) -> np.ndarray:
        if not w.get("session"):
            return f
        count = p.near.sum(axis=1)
        if kind == "mean":
            agg = (f @ p.near.T.astype(np.float32)) / np.maximum(count, 1)
        else:
            m = np.where(p.near[None], f[:, None, :], -np.inf)
            agg = m.max(axis=2) if kind == "max" else -np.sort(-m, axis=2)[:, :, :3].mean(2)
        agg = np.where((count > 0) & np.isfinite(agg), agg, f)
        return f + np.float32(w["session"]) * agg

    return post


def with_date_words(c: bench.Conversation) -> list[str]:
    """Each memory's indexed text + its creation date in words ("8 May 2023")."""
    out = []
    for text, at in zip(c.texts, c.created, strict=True):
        d = datetime.fromtimestamp(at, UTC)
        out.append(f"{text} {d.day} {d.strftime('%B')} {d.year}")
    return out


_MON = r"(january|february|march|april|may|june|july|august|september|october|november|december)"
_MONTH_ONLY = re.compile(rf"\b(?:in|during|of|since|until|by|early|late|mid)\s+{_MON}\b(?!,?\s+\d)")
_SEASON = re.compile(r"\b(summer|winter|spring|fall|autumn)\b(?:\s+(?:of\s+)?((?:19|20)\d\d))?")
_SEASONS = {"spring": (3, 5), "summer": (6, 8), "fall": (9, 11), "autumn": (9, 11)}
_RELATIVE = re.compile(
    r"\b(yesterday|(last|this|past)\s+(week|weekend|month|year)|(\d+|a|one|two|three)\s+"
    r"(day|week|month|year)s?\s+ago)\b"
)
_NUM = {"a": 1, "one": 1, "two": 2, "three": 3}


def month_and_season_dates(text: str, created: np.ndarray) -> list[tuple[date, date]]:
    """Named dates + "in June" / "summer" (+ year) read in every year the memories span."""
    out = query_date_ranges(text)
    lo = datetime.fromtimestamp(created.min(), UTC).year
    years = range(lo, datetime.fromtimestamp(created.max(), UTC).year + 1)
    low = text.lower()
    for m in _MONTH_ONLY.finditer(low):
        out += [(date(y, _month(m[1]), 1), _month_end(y, _month(m[1]))) for y in years]
    for m in _SEASON.finditer(low):
        for y in [int(m[2])] if m[2] else years:
            if m[1] == "winter":
                out.append((date(y, 12, 1), _month_end(y + 1, 2)))
            else:
                a, b = _SEASONS[m[1]]
                out.append((date(y, a, 1), _month_end(y, b)))
    return out


def relative_dates(text: str, created: np.ndarray) -> list[tuple[date, date]]:
    """Named dates + "last week", "yesterday", "two months ago" against a reference time:
    the day after the conversation's last session (when its questions are asked)."""
    now = datetime.fromtimestamp(created.max(), UTC).date() + timedelta(days=1)
    out = query_date_ranges(text)
    for m in _RELATIVE.finditer(text.lower()):
        if m[1] == "yesterday":
            out.append((now - timedelta(1), now - timedelta(1)))
        elif m[3]:
            back = m[2] != "this"
            if m[3] in ("week", "weekend"):
                start = now - timedelta(now.weekday() + 7 * back)
                out.append((start, start + timedelta(6)))
            elif m[3] == "month":
                y, mo = (
                    (now.year - 1, 12) if back and now.month == 1 else (now.year, now.month - back)
                )
                out.append((date(y, mo, 1), _month_end(y, mo)))
            else:
                out.append((date(now.year - back, 1, 1), date(now.year - back, 12, 31)))
        else:
            n = int(m[4]) if m[4].isdigit() else _NUM[m[4]]
            days = {"day": 1, "week": 7, "month": 30, "year": 365}[m[5]] * n
            half = timedelta(days // 4)
            out.append((now - timedelta(days) - half, now - timedelta(days) + half))
    return out


_WH = re.compile(
    r"^\s*(what|when|where|who|whom|which|why|how( long| many| much| often| old)?)"
    r"(\s+(kind|type|sort)s?\s+of)?\s+((is|are|was|were|do|does|did|has|have|had|can|could|"
    r"would|will|might|should)\s+)?",
    re.I,
)


def declarative(question: str) -> str:
    """'What is Dave's favorite activity?' -> "Dave's favorite activity"."""
    s = _WH.sub("", question).rstrip("?").strip()
    return s[:1].upper() + s[1:] if s else question


def hubness_penalty(vecs: np.ndarray, k: int) -> np.ndarray:
    """CSLS-style: minus each record's mean cosine to its k nearest records (centred)."""
    sims = vecs @ vecs.T
    np.fill_diagonal(sims, -np.inf)
    r = -np.sort(-sims, axis=1)[:, :k].mean(axis=1)
    return -(r - r.mean())[None, :].astype(np.float32)


def context_vectors(c: bench.Conversation, cache: bench._VectorCache) -> np.ndarray:
    """Per memory: the embedding of itself with up to two earlier memories of its session
    (known at write time), as a second document vector."""
    texts = []
    for i, t in enumerate(c.texts):
        prev = [c.texts[j] for j in range(max(0, i - 2), i) if c.created[j] == c.created[i]]
        texts.append(" ".join([*prev, t]))
    return cache.embed(texts)


def names_masked_cosine(
    c: bench.Conversation, names: Sequence[str], cache: bench._VectorCache
) -> np.ndarray:
    """Centroid-corrected cosine with the two speakers' names replaced ("Caroline's" ->
    "their", "Caroline" -> "someone") in memories and questions, so that the vector carries
    the topic and BM25 the person. Uses the data set's speaker names: an upper bound for a
    name detector."""
    pat = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")('s)?\b")

    def mask(s: str) -> str:
        return pat.sub(lambda m: "their" if m[2] else "someone", s)

    vecs = cache.embed([mask(t) for t in c.texts])
    qvecs = cache.embed([mask(q["question"]) for q in c.queries])
    return (qvecs @ vecs.T - (vecs @ vecs.mean(axis=0))[None, :]).astype(np.float32)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--granularity", choices=["observations", "turns"], default="observations")
    ap.add_argument("--embed-cache", type=Path)
    ap.add_argument(
        "--embed-variants",
        action="store_true",
        help="also the ideas that embed every memory again (context vectors, names masked)",
    )
    ap.add_argument("--only", nargs="*", help="run only ideas whose label contains one of these")
    args = ap.parse_args(argv)
    convs = bench.load(args.path, args.granularity)
    cache = bench._VectorCache(args.embed_cache)
    bench.prepare(convs, cache)
    preps = [prepare(c) for c in convs]
    agree = check_replica(preps, bench.DEFAULTS)
    print(f"replica agrees with retrieval.rank on {agree:.4f} of queries")
    if agree < 0.999:
        print("replica disagrees with rank(): stopping", file=sys.stderr)
        return 1
    grid = dict(bench.GRID)

    def idea(name: str, weights: Sequence[float] = WEIGHTS) -> dict:
        return grid | {name: tuple(weights)}

    runs: list[tuple[str, Callable[[], dict]]] = [
        ("shipped terms (headline)", lambda: held_out(preps, grid)),
    ]
    for k in (3, 5, 10):
        for centred in (False, True):
            label = f"dense PRF, top {k}{', centred' if centred else ''}"
            runs.append(
                (label, lambda k=k, c=centred: held_out(preps, idea("prf"), dense_prf(k, c)))
            )
    for k, t in ((3, 5), (5, 10), (10, 10)):
        label = f"lexical fan-out (RM3), top {k}, {t} terms"
        runs.append(
            (
                label,
                lambda k=k, t=t: held_out(
                    preps, idea("rm3", (0, 0.05, 0.1, 0.2, 0.3)), lexical_prf(k, t)
                ),
            )
        )
    for kind in ("mean", "max", "top3"):
        runs.append(
            (
                f"session score ({kind}) over all records",
                lambda kind=kind: held_out(preps, idea("session"), session_score(kind)),
            )
        )
    runs.append(
        (
            "session diversity in the top 10 (greedy)",
            lambda: held_out(preps, idea("diversity", (0, 0.05, 0.1, 0.2, 0.3))),
        )
    )
    for pool in (20, 100, 250):
        runs.append(
            (
                f"context pool {pool} (shipped 50)",
                lambda pool=pool: held_out(preps, grid, pool=pool),
            )
        )
    runs.append(
        (
            "date words in the BM25 text",
            lambda: held_out([prepare(c, with_date_words(c)) for c in convs], grid),
        )
    )
    runs.append(
        (
            "month-only and season dates",
            lambda: held_out([prepare(c, dates=month_and_season_dates) for c in convs], grid),
        )
    )
    runs.append(
        (
            "relative dates vs. the last session",
            lambda: held_out([prepare(c, dates=relative_dates) for c in convs], grid),
        )
    )

    def declarative_mix() -> dict:
        for p in preps:
            q2 = cache.embed([declarative(q["question"]) for q in p.conv.queries])
            p.extra = {"qmix": (q2 @ p.conv.vecs.T).astype(np.float32)}
        return held_out(preps, idea("qmix", (0, 0.25, 0.5, 0.75, 1.0)))

    runs.append(("declarative query vector, added", declarative_mix))
    for k in (5, 10, 20):

        def hub(k: int = k) -> dict:
            for p in preps:
                p.extra = {"hub": hubness_penalty(p.conv.vecs, k)}
            return held_out(preps, idea("hub"))

        runs.append((f"hubness penalty (CSLS), {k} neighbours", hub))
    if args.embed_variants:

        def ctx() -> dict:
            for p in preps:
                p.extra = {"ctxvec": (p.conv.qvecs @ context_vectors(p.conv, cache).T)}
            return held_out(preps, idea("ctxvec", (0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)))

        runs.append(("context vector (memory + 2 earlier)", ctx))
        speakers = [
            (raw["conversation"]["speaker_a"], raw["conversation"]["speaker_b"])
            for raw in json.loads(args.path.read_text())
        ]

        def masked() -> dict:
            for p, names in zip(preps, speakers, strict=True):
                p.extra = {"masked": names_masked_cosine(p.conv, names, cache)}
            return held_out(preps, idea("masked", (0, 0.25, 0.5, 0.75, 1.0, 1.5)))

        runs.append(("cosine with the speakers' names masked, added", masked))
    head = f"{'held out, ' + args.granularity:44s} " + " ".join(f"r@{k:<4d}" for k in bench.KS)
    print(head)
    for label, fn in runs:
        if args.only and not any(o in label for o in args.only):
            continue
        for p in preps:
            p.extra = {}
        r = fn()
        m = " ".join(f"{r['mean'][k]:.4f}" for k in bench.KS)
        cats = " ".join(
            f"{c.split()[1]} {v['recall@5']:.3f}" for c, v in r["pooled"]["per_category"].items()
        )
        print(
            f"{label:44s} {m}   idea weight per fold {r['idea_weights']}   r@5: {cats}", flush=True
        )
    cache.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
