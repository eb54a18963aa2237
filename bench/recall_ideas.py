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
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import locomo_replica as replica
import numpy as np
import recall_bootstrap as bootstrap
import recall_locomo as bench
from locomo_cache import VectorCache
from locomo_replica import Post, Prepared, held_out, prepare

from memlife.embed import default_embedder
from memlife.lexical import tokenize
from memlife.timeref import _month, _month_end, query_date_ranges

WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.5)


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


_EARLY = re.compile(r"\b(first|initially|originally|start(ed)?|begin|began|used to|before)\b", re.I)
_LATE = re.compile(
    r"\b(recent(ly)?|latest|currently|now|still|these days|lately|new|last time)\b", re.I
)


def order_words(c: bench.Conversation) -> np.ndarray:
    """Round 13: a question asking for the first (the latest) time favours the earliest
    (latest) sessions: the memory's session position 0..1, flipped for "first"."""
    days = np.unique(c.created)
    pos = (np.searchsorted(days, c.created) / max(len(days) - 1, 1)).astype(np.float32)
    out = np.zeros((len(c.queries), len(c.texts)), np.float32)
    for i, q in enumerate(c.queries):
        early, late = bool(_EARLY.search(q["question"])), bool(_LATE.search(q["question"]))
        if early != late:
            out[i] = 1 - pos if early else pos
    return out


_NUM_Q = re.compile(r"\b(how (many|much|long|old|often)|what year|how far)\b", re.I)
_NUM_M = re.compile(
    r"\b(\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
    r"hundred|dozen|several|few|couple|once|twice|years?|months?|weeks?|days?)\b",
    re.I,
)
_PLACE_M = re.compile(
    r"\b(in|at|to|from|near|visited?|trip|travel\w*|went)\s+(the\s+)?[A-Z]\w+|\b(beach|park|"
    r"city|country|museum|lake|mountains?|home|school|store|shop|restaurant|cafe|library|"
    r"church|festival)\b"
)
_NAME = re.compile(r"\b[A-Z][a-z]+\b")
_INNER_NAME = re.compile(r"(?<!^)(?<![.!?]\s)\b[A-Z][a-z]+\b")


def answer_type(
    c: bench.Conversation, kinds: Sequence[str] = ("num", "where", "who")
) -> np.ndarray:
    """Round 13: a memory that holds the kind of answer the question asks for: a number
    or a span of time ("how many", "how long"), a place ("where"), a name the question
    does not give ("who")."""
    num = np.array([bool(_NUM_M.search(t)) for t in c.texts], np.float32)
    place = np.array([bool(_PLACE_M.search(t)) for t in c.texts], np.float32)
    out = np.zeros((len(c.queries), len(c.texts)), np.float32)
    for i, q in enumerate(c.queries):
        s = q["question"]
        if "num" in kinds and _NUM_Q.search(s):
            out[i] = num
        elif "where" in kinds and re.search(r"\bwhere\b", s, re.I):
            out[i] = place
        elif "who" in kinds and re.search(r"\bwho\b", s, re.I):
            given = set(_NAME.findall(s))
            out[i] = [float(bool(set(_INNER_NAME.findall(t)) - given)) for t in c.texts]
    return out


def float_token_best(p: Prepared) -> np.ndarray:
    """Round 13: token alignment's best match per question token and memory over the
    memories' unit float token states, in place of their sign bits (8x the storage)."""
    emb, texts = default_embedder(), p.conv.texts
    states: list[np.ndarray] = [np.zeros((0, 0))] * len(texts)
    for idx in emb._batches(texts):
        hidden, ids, mask, starts = emb._forward([texts[i] for i in idx])
        for j, i in enumerate(idx):
            s, _ = emb._tokens_of(j, hidden, ids, mask, starts)
            states[i] = s / np.maximum(np.linalg.norm(s, axis=1, keepdims=True), 1e-12)
    every = np.concatenate(states)
    starts = np.concatenate([[0], np.cumsum([len(s) for s in states])[:-1]])
    assert p.tok_best is not None
    best = np.zeros_like(p.tok_best)
    for i, q in enumerate(p.conv.qtokens or []):
        if len(q):
            best[i, : len(q)] = np.maximum.reduceat(q.states @ every.T, starts, axis=1)
    return best


def weighted_token_term(mode: str) -> Callable[[Prepared, np.ndarray], np.ndarray]:
    """Round 20: token alignment with each question word weighted by how far its best
    matches spread over the pool (a soft idf: a word every candidate matches about as well
    tells them apart little): ``idf*spread`` (the pool's idf times max - mean), ``spread``
    alone, or ``idf*std``. Replaces locomo_replica.token_term while it runs."""

    def term(p: Prepared, idx: np.ndarray) -> np.ndarray:
        assert p.tok_best is not None and p.tok_held is not None and p.tok_mask is not None
        best = np.take_along_axis(p.tok_best, idx[:, None, :], 2)
        df = np.take_along_axis(p.tok_held, idx[:, None, :], 2).sum(axis=2)
        idf = (np.log((idx.shape[1] + 1) / (df + 1)) + 1.0) * p.tok_mask
        spread = (best.max(axis=2) - best.mean(axis=2)) * p.tok_mask
        weight = {"idf*spread": idf * spread, "spread": spread}.get(mode)
        if weight is None:
            weight = idf * best.std(axis=2) * p.tok_mask
        denom = weight.sum(axis=1)
        score = np.einsum("qt,qtp->qp", weight, best) / np.where(denom > 0, denom, 1.0)[:, None]
        return score.astype(np.float32)

    return term


def pool_centroid(p: Prepared, f: np.ndarray, w: dict) -> np.ndarray:
    """Round 20: the centroid correction again, but from the mean of the query's own best
    50 (what the pool has in common: usually the person and the topic), mean-zero over it."""
    if not w.get("pcent"):
        return f
    idx = np.argsort(-f, axis=1, kind="stable")[:, :50]
    v = p.conv.vecs
    t = -(v[idx].mean(axis=1) @ v.T)
    t = t - np.take_along_axis(t, idx, 1).mean(axis=1, keepdims=True)
    return (f + np.float32(w["pcent"]) * t).astype(np.float32)


def context_vectors(c: bench.Conversation, cache: VectorCache) -> np.ndarray:
    """Per memory: the embedding of itself with up to two earlier memories of its session
    (known at write time), as a second document vector."""
    texts = []
    for i, t in enumerate(c.texts):
        prev = [c.texts[j] for j in range(max(0, i - 2), i) if c.created[j] == c.created[i]]
        texts.append(" ".join([*prev, t]))
    return cache.embed(texts)


def names_masked_cosine(
    c: bench.Conversation, names: Sequence[str], cache: VectorCache
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
    ap.add_argument("--granularity", choices=bench.GRANULARITIES, default="observations")
    ap.add_argument("--embed-cache", type=Path)
    ap.add_argument(
        "--embed-variants",
        action="store_true",
        help="also the ideas that embed every memory again (context vectors, names masked)",
    )
    ap.add_argument("--only", nargs="*", help="run only ideas whose label contains one of these")
    args = ap.parse_args(argv)
    convs = bench.load(args.path, args.granularity)
    cache = VectorCache(args.embed_cache)
    preps = replica.checked(convs, cache)
    if preps is None:
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
    small = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3)

    def extra_terms(**make: Callable[[bench.Conversation], np.ndarray]) -> dict:
        for p in preps:
            p.extra = {name: fn(p.conv) for name, fn in make.items()}
        return held_out(preps, grid | {name: small for name in make})

    runs.append(("order words (first / recent)", lambda: extra_terms(order=order_words)))
    runs.append(("answer type (number, place, name)", lambda: extra_terms(atype=answer_type)))
    runs.append(
        (
            "answer type, numbers only",
            lambda: extra_terms(atype=lambda c: answer_type(c, ("num",))),
        )
    )

    def token_weighting(mode: str) -> dict:
        shipped = replica.token_term
        replica.token_term = weighted_token_term(mode)
        try:
            return held_out(preps, grid)
        finally:
            replica.token_term = shipped

    for mode in ("idf*spread", "spread", "idf*std"):
        runs.append((f"token words weighted {mode}", lambda m=mode: token_weighting(m)))
    runs.append(
        (
            "pool centroid (top-50 mean) correction",
            lambda: held_out(
                preps, idea("pcent", (0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)), pool_centroid
            ),
        )
    )
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

        def float_tokens() -> dict:
            signs = [p.tok_best for p in preps]
            for p in preps:
                p.tok_best = float_token_best(p)
            try:
                return held_out(preps, grid)
            finally:
                for p, best in zip(preps, signs, strict=True):
                    p.tok_best = best

        runs.append(("token alignment over float states (not sign bits)", float_tokens))
    chosen = [
        (label, fn)
        for n, (label, fn) in enumerate(runs)
        if n == 0 or not args.only or any(o in label for o in args.only)
    ]

    def clear() -> None:
        for p in preps:
            p.extra = {}

    bootstrap.print_rows(chosen, f"held out, {args.granularity}", bench.KS, before=clear)
    cache.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
