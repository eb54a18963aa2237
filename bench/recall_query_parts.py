"""Four more ranking terms for LoCoMo recall, each held out (issue 19, 23rd round).

Each term gets its own weight grid (0 = off), fixed before the run, and is judged like
bench/recall_locomo.py's headline: every weight chosen on conversations 0-4 by coordinate
ascent on recall@5 and scored on 5-9, then the reverse; the mean of the two held-out
scores, compared question by question with the headline (``recall_bootstrap.paired``).

- **question parts**: a multi-hop question often joins two asks ("What did Melanie paint
  and where did she show it?"). The question is cut at " and ", ", ", " or " and ";" into
  parts of at least two content words each (``memlife.lexical.tokenize``; a shorter piece
  joins the part before it, or the next one); each part is embedded with the shipped
  embedder, and the term is the best part's cosine with the shipped centroid correction
  (``cos - centroid * (v.mu - mu.mu)``, the fold's own centroid weight). A question of
  one part gets its whole cosine, so that the term means the same for every question.
- **content-words vector**: the question with its stopwords and wh-words dropped (order
  kept) embedded as a second query vector, its cosine ADDED as a term (the second round
  tried the stripped question only in place of the question).
- **specificity prior** (query independent), two rows: (a) a memory's mean idf over its
  distinct terms, idf over the conversation's memories; (b) how many numbers and
  capitalised words not opening a sentence it holds ("I" aside). Each min-max scaled to
  [0, 1] per conversation.
- **recency for "now" questions**: a question holding currently / now / latest /
  recently / still / anymore / most recent gives each memory a bonus in [0, 1] by its
  creation time's rank among the conversation's distinct creation times (newest = 1);
  every other question gets none.

    uv run python bench/recall_query_parts.py ../shared/data/locomo10.json [--embed-cache FILE]
"""

from __future__ import annotations

import math
import re
import sys
from collections import Counter
from collections.abc import Callable

import locomo_replica as replica
import numpy as np
import recall_bootstrap as bootstrap
import recall_locomo as bench
from locomo_replica import Prepared, held_out, held_out_with

from memlife.lexical import tokenize
from memlife.text import STOPWORDS

# Weight grids, fixed before the run (0 = off; the dense term itself has weight 1).
COSINE_GRID = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
PRIOR_GRID = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)

_SPLIT = re.compile(r"(\s+and\s+|,\s+|\s+or\s+|;\s*)", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’-]*")
_WH = frozenset({"what", "when", "where", "who", "whom", "whose", "which", "why", "how"})
_NOW = re.compile(r"\b(currently|now|latest|recently|still|anymore|most recent)\b", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def question_parts(question: str) -> list[str]:
    """The question cut at its joins into parts of at least two content words each (one
    part, the whole question, when it cannot be cut so)."""
    pieces = _SPLIT.split(question)  # text, join, text, join, ..., text
    parts: list[str] = []
    current = ""
    for i, piece in enumerate(pieces):
        if i % 2 and not current:
            continue  # the join before a new part stays out of it
        current += piece
        if i % 2 == 0 and len(tokenize(current)) >= 2:
            parts.append(current.strip(" ,;"))
            current = ""
    if current and len(tokenize(current)) > 0 and parts:
        parts[-1] = parts[-1] + current.rstrip(" ,;")
    elif current and not parts:
        return [question]
    return parts if len(parts) > 1 else [question]


def content_words(question: str) -> str:
    """The question's words without stopwords and wh-words, in order (the whole question
    when nothing is left)."""
    kept = [w for w in _WORD.findall(question) if w.lower() not in STOPWORDS | _WH]
    return " ".join(kept) or question


def mean_idf(c: bench.Conversation) -> np.ndarray:
    """N: each memory's mean idf over its distinct terms, min-max scaled."""
    docs = [set(tokenize(t)) for t in c.texts]
    df = Counter(t for d in docs for t in d)
    n = len(docs)
    idf = {t: math.log(1 + (n - k + 0.5) / (k + 0.5)) for t, k in df.items()}
    return _scaled(np.array([np.mean([idf[t] for t in d]) if d else 0.0 for d in docs]))


def names_and_numbers(c: bench.Conversation) -> np.ndarray:
    """N: numbers and capitalised words not opening a sentence ("I" aside), min-max scaled."""
    counts = []
    for text in c.texts:
        k = 0
        for sentence in _SENTENCE.split(text):
            for j, w in enumerate(_WORD.findall(sentence)):
                if any(ch.isdigit() for ch in w):
                    k += 1
                elif j > 0 and w[0].isupper() and w != "I":
                    k += 1
        counts.append(k)
    return _scaled(np.array(counts, np.float64))


def _scaled(x: np.ndarray) -> np.ndarray:
    lo, hi = float(x.min()), float(x.max())
    return ((x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)).astype(np.float32)


def recency(c: bench.Conversation) -> np.ndarray:
    """Q x N: for "now" questions, each memory's creation-time rank (newest 1, oldest 0)."""
    times = np.unique(c.created)
    rank = np.searchsorted(times, c.created) / max(len(times) - 1, 1)
    now = np.array([bool(_NOW.search(q["question"])) for q in c.queries])
    return (now[:, None] * rank[None, :]).astype(np.float32)


def per_query(prior: Callable[[bench.Conversation], np.ndarray]) -> Callable:
    def make(c: bench.Conversation) -> np.ndarray:
        return np.broadcast_to(prior(c), (len(c.queries), len(c.texts)))

    return make


def main(argv: list[str] | None = None) -> int:
    loaded = replica.observations_from_argv(argv, __doc__ or "")
    if loaded is None:
        return 1
    cache, preps = loaded
    convs = [p.conv for p in preps]

    # The query-side vectors, every text in one batch through the cache.
    parts = [[question_parts(q["question"]) for q in c.queries] for c in convs]
    words = [[content_words(q["question"]) for q in c.queries] for c in convs]
    texts = [t for ps in parts for qp in ps for t in qp] + [t for ws in words for t in ws]
    cache.embed(texts)
    cache.save()
    parts_cos, words_cos = [], []
    for c, ps, ws, p in zip(convs, parts, words, preps, strict=True):
        best = p.cos.copy()
        for qi, qp in enumerate(ps):
            if len(qp) > 1:
                best[qi] = (cache.embed(qp) @ c.vecs.T).max(axis=0)
        parts_cos.append(best)
        words_cos.append(cache.embed(ws) @ c.vecs.T)
    split = sum(len(qp) > 1 for ps in parts for qp in ps)
    now = sum(bool(_NOW.search(q["question"])) for c in convs for q in c.queries)
    total = sum(len(c.queries) for c in convs)
    print(f"questions cut into parts: {split} of {total}; 'now' questions: {now}")
    examples = [qp for ps in parts for qp in ps if len(qp) > 1][:5]
    for qp in examples:
        print("   parts:", " | ".join(qp))
    for w in [w for ws in words for w in ws][:3]:
        print("   content words:", w)

    grid = dict(bench.GRID)
    by_prep = {id(p): i for i, p in enumerate(preps)}

    def parts_post(p: Prepared, f: np.ndarray, w: dict) -> np.ndarray:
        if not w.get("parts"):
            return f
        term = parts_cos[by_prep[id(p)]] + np.float32(w["centroid"]) * p.cent
        return (f + np.float32(w["parts"]) * term).astype(np.float32)

    def extra_terms(name: str, make: Callable[[int, bench.Conversation], np.ndarray]) -> dict:
        return held_out_with(
            preps, grid, name, make, COSINE_GRID if name == "words" else PRIOR_GRID
        )

    runs: list[tuple[str, Callable[[], dict]]] = [
        ("shipped terms (headline)", lambda: held_out(preps, grid)),
        (
            "question parts: best part's cosine, centred",
            lambda: held_out(preps, grid | {"parts": COSINE_GRID}, post=parts_post),
        ),
        (
            "content-words query vector, cosine added",
            lambda: extra_terms("words", lambda i, c: words_cos[i]),
        ),
        (
            "specificity: mean idf of a memory's terms",
            lambda: extra_terms("idf", lambda i, c: per_query(mean_idf)(c)),
        ),
        (
            "specificity: numbers and capitalised words",
            lambda: extra_terms("names", lambda i, c: per_query(names_and_numbers)(c)),
        ),
        ("recency for 'now' questions", lambda: extra_terms("recent", lambda i, c: recency(c))),
    ]

    bootstrap.print_rows(
        runs, "held out, observations", bench.KS, width=50, weights_label="weights per fold"
    )
    cache.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
