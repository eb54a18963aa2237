"""LoCoMo recall benchmark, held out: does memlife's recall find the facts a question needs?

Task (shared/data/README.md): every observation of a conversation is a memory, created
at its session's date; each QA of categories 1-4 whose evidence dia_ids are carried by at
least one memory is a query; hit@k = any of the top-k memories carries an evidence dia_id.
``--granularity turns`` keeps every raw conversation turn as a memory instead ("Speaker:
text", with the shared photo's caption): longer, chattier memories. ``--granularity
excerpts`` keeps every CHUNK_TURNS consecutive turns of a session as one memory, turns
joined by newlines: long memories, many past the model's 256-token window.
``--granularity sessions`` keeps a whole session's transcript as one memory (past four
windows for 16% of them), and ``--granularity summaries`` the dataset's summary of each
session (a hit when the session holds an evidence turn).

Headline = 2-fold split by conversation. Every ranking weight is chosen on conversations
0-4 (coordinate ascent on recall@5 over a fixed grid) and scored on 5-9, then the reverse;
the headline is the mean of the two held-out scores. The per-category table pools the
held-out queries of both folds. Figures for the shipped defaults (chosen on all ten
conversations) and for weights tuned on all ten are printed apart, labelled "tuned".
Ranking is ``memlife.retrieval.rank``, the function online recall and the gate use;
nothing here sees the answer or the evidence before scoring. The data is read from PATH,
never copied; ``--embed-cache FILE`` keeps the vectors between runs (outside the repo).

``--second-vectors FILE.npz`` (from bench/second_model_vectors.py) adds a second
embedding model as an ensemble: each memory's and query's vector becomes the weighted
concatenation ``[sqrt(1 - s) * minilm, sqrt(s) * second]`` (unit length, so the cosine is
``(1 - s) * cos_minilm + s * cos_second``), with the share ``s`` chosen per training fold
like every other weight (grid "second"). An experiment: memlife ships no second model.

    uv run python bench/recall_locomo.py ../shared/data/locomo10.json [--ablation] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import recall_bootstrap as bootstrap
from locomo_cache import TokenCache, VectorCache

from memlife.embed import default_embedder
from memlife.lexical import LexicalIndex
from memlife.retrieval import (
    CENTROID_WEIGHT,
    CONTEXT_WEIGHT,
    DATE_WEIGHT,
    LEXICAL_WEIGHT,
    SPEAKER_WEIGHT,
    TOKEN_WEIGHT,
    rank,
)
from memlife.token_match import QueryTokens, TokenCodes

KS = (1, 5, 10)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
FOLDS = ((range(0, 5), range(5, 10)), (range(5, 10), range(0, 5)))
# The grid each weight is chosen from on a training fold; 0 turns a term off.
GRID = {
    "centroid": (0.0, 0.25, 0.5, 0.75, 1.0, 1.25),
    "lexical": (0.0, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6),
    "date": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5),
    "context": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6),
    "token": (0.0, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0),
    "speaker": (0.0, 0.05, 0.1, 0.2, 0.3, 0.5),
}
# Share of a second model in an ensemble (--second-vectors); 0 = MiniLM alone.
SECOND_GRID = (0.0, 1 / 3, 0.5, 2 / 3)
DEFAULTS = {
    "centroid": CENTROID_WEIGHT,
    "lexical": LEXICAL_WEIGHT,
    "date": DATE_WEIGHT,
    "context": CONTEXT_WEIGHT,
    "token": TOKEN_WEIGHT,
    "speaker": SPEAKER_WEIGHT,
}
ABLATION = {  # each row adds one idea; the weights it may use are chosen per fold
    "dense + BM25 (previous ranking)": ("centroid", "lexical"),
    "+ query dates": ("centroid", "lexical", "date"),
    "+ conversation context": ("centroid", "lexical", "date", "context"),
    "+ token alignment": ("centroid", "lexical", "date", "context", "token"),
    "+ speakers": ("centroid", "lexical", "date", "context", "token", "speaker"),
}


@dataclass
class Conversation:
    texts: list[str]
    dia: list[set[str]]
    created: np.ndarray  # float64 POSIX seconds, one per memory
    queries: list[dict]
    vecs: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    qvecs: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    lexical: _MemoLexical | None = None
    relevant: list[np.ndarray] = field(default_factory=list)  # per query: bool per memory
    second: tuple[np.ndarray, np.ndarray] | None = None  # a second model's (vecs, qvecs)
    codes: list[TokenCodes] = field(default_factory=list)  # per memory (token alignment)
    qtokens: list[QueryTokens] = field(default_factory=list)  # per query
    _mixed: dict[float, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def vectors(self, share: float) -> tuple[np.ndarray, np.ndarray]:
        """(memory, query) vectors; with a second model, mixed at ``share`` (module doc)."""
        if not share or self.second is None:
            return self.vecs, self.qvecs
        got = self._mixed.get(share)
        if got is None:
            a, b = np.float32(np.sqrt(1.0 - share)), np.float32(np.sqrt(share))
            got = self._mixed[share] = (
                np.ascontiguousarray(np.hstack([a * self.vecs, b * self.second[0]])),
                np.ascontiguousarray(np.hstack([a * self.qvecs, b * self.second[1]])),
            )
        return got


class _MemoLexical:
    """A LexicalIndex that remembers each query's scores (the grid asks the same ones)."""

    def __init__(self, texts: Sequence[str]):
        self._index = LexicalIndex(texts)
        self._memo: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self._index)

    def scores(self, query: str) -> np.ndarray:
        got = self._memo.get(query)
        if got is None:
            got = self._memo[query] = self._index.scores(query)
        return got

    def speaker_share(self, sure: Sequence[str], common: Sequence[str] = ()) -> np.ndarray:
        key = "\x00" + "\x00".join(sure) + "\x01" + "\x00".join(common)
        got = self._memo.get(key)
        if got is None:
            got = self._memo[key] = self._index.speaker_share(sure, common)
        return got


CHUNK_TURNS = 8  # turns per memory at granularity "excerpts" (fixed before any run)
# What one memory is: an observation, a raw turn, CHUNK_TURNS turns, a whole session's
# transcript, or the dataset's summary of a session.
GRANULARITIES = ("observations", "turns", "excerpts", "sessions", "summaries")


def session_time(text: str) -> float:
    """'1:56 pm on 8 May, 2023' -> POSIX seconds (UTC)."""
    when = datetime.strptime(text, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    return when.timestamp()


def _turn(t: dict) -> str:
    text = f"{t['speaker']}: {t['text']}"
    if t.get("blip_caption"):
        text += f" [shares a photo of {t['blip_caption']}]"
    return str(text)


def _sessions(talk: dict) -> list[tuple[str, list[dict]]]:
    """("session_N", its turns) for every session that has turns."""
    return [
        (key, turns)
        for key, turns in talk.items()
        if key.startswith("session_") and isinstance(turns, list) and turns
    ]


def load(path: Path, granularity: str = "observations") -> list[Conversation]:
    convs = []
    for raw in json.loads(path.read_text()):
        talk = raw["conversation"]
        texts: list[str] = []
        dia: list[set[str]] = []
        created: list[float] = []
        if granularity == "observations":
            for key, session in raw["observation"].items():
                at = session_time(talk[f"session_{key.split('_')[1]}_date_time"])
                for items in session.values():
                    for text, ids in items:
                        texts.append(text)
                        dia.append(set(ids) if isinstance(ids, list) else {ids})
                        created.append(at)
        elif granularity == "summaries":
            for key, turns in _sessions(talk):
                texts.append(raw["session_summary"][f"{key}_summary"])
                dia.append({t["dia_id"] for t in turns})
                created.append(session_time(talk[f"{key}_date_time"]))
        else:
            for key, turns in _sessions(talk):
                at = session_time(talk[f"{key}_date_time"])
                lines = [_turn(t) for t in turns]
                size = {"excerpts": CHUNK_TURNS, "sessions": len(turns)}.get(granularity, 1)
                for lo in range(0, len(turns), size):
                    texts.append("\n".join(lines[lo : lo + size]))
                    dia.append({t["dia_id"] for t in turns[lo : lo + size]})
                    created.append(at)
        carried = set().union(*dia)
        queries = [
            q
            for q in raw["qa"]
            if q.get("category") in CATEGORIES and set(q.get("evidence", [])) & carried
        ]
        convs.append(Conversation(texts, dia, np.asarray(created, np.float64), queries))
    return convs


def prepare(convs: list[Conversation], cache: VectorCache) -> None:
    tokens = TokenCache(cache.path)
    for c in convs:
        c.vecs = cache.embed(c.texts)
        c.qvecs = cache.embed([q["question"] for q in c.queries])
        c.codes = tokens.memory_codes(c.texts)
        c.qtokens = tokens.query_tokens([q["question"] for q in c.queries])
        c.lexical = _MemoLexical(c.texts)
        c.relevant = [
            np.fromiter((bool(d & set(q["evidence"])) for d in c.dia), bool, len(c.dia))
            for q in c.queries
        ]
    cache.save()
    tokens.save()


def load_second(path: Path, convs: list[Conversation]) -> None:
    """Attach a second model's vectors (an .npz from bench/second_model_vectors.py)."""
    with np.load(path, allow_pickle=False) as z:
        passages = dict(zip(z["ptexts"].tolist(), z["pvecs"], strict=True))
        questions = dict(zip(z["qtexts"].tolist(), z["qvecs"], strict=True))
    for c in convs:
        c.second = (
            np.stack([passages[t] for t in c.texts]).astype(np.float32),
            np.stack([questions[q["question"]] for q in c.queries]).astype(np.float32),
        )


def first_hits(c: Conversation, w: dict[str, float], k: int = max(KS)) -> list[int]:
    """Per query: 1-based rank of the first relevant memory in the top k (0 = none)."""
    vecs, qvecs = c.vectors(w.get("second", 0.0))
    centroid = vecs.mean(axis=0)  # as an online shard keeps it (running sum / n)
    out = []

    def codes_of(rows: np.ndarray) -> list[TokenCodes | None]:
        return [c.codes[int(r)] for r in rows]

    qtokens: list[QueryTokens | None] = list(c.qtokens) or [None] * len(c.queries)
    for q, qv, qt, rel in zip(c.queries, qvecs, qtokens, c.relevant, strict=True):
        res = rank(
            qv,
            vecs,
            k=k,
            query_text=q["question"],
            lexical=c.lexical,  # type: ignore[arg-type]
            lexical_weight=w["lexical"],
            speaker_weight=w.get("speaker", 0.0),
            centroid=centroid,
            centroid_weight=w["centroid"],
            created=c.created,
            date_weight=w["date"],
            context_weight=w["context"],
            query_tokens=qt,
            token_codes=codes_of if c.codes else None,
            token_weight=w.get("token", 0.0),
        )
        found = np.flatnonzero(rel[res.indices])
        out.append(int(found[0]) + 1 if len(found) else 0)
    return out


def score(convs: Iterable[Conversation], w: dict[str, float]) -> dict:
    hits = {k: Counter() for k in KS}
    total: Counter = Counter()
    ranks: list[int] = []  # every query's first-hit rank, in order (bench/recall_bootstrap.py)
    for c in convs:
        got = first_hits(c, w)
        ranks += got
        for q, first in zip(c.queries, got, strict=True):
            total[q["category"]] += 1
            for k in KS:
                hits[k][q["category"]] += 0 < first <= k
    return {"hits": hits, "total": total, "ranks": np.array(ranks)}


def summarise(s: dict) -> dict:
    hits, total = s["hits"], s["total"]
    n = sum(total.values())
    return {
        "queries": n,
        "overall": {f"recall@{k}": round(sum(hits[k].values()) / n, 4) for k in KS},
        "per_category": {
            f"{c} {CATEGORIES[c]}": {
                "queries": total[c],
                **{f"recall@{k}": round(hits[k][c] / total[c], 4) for k in KS},
            }
            for c in sorted(total)
        },
    }


def _recall5(convs: Sequence[Conversation], w: dict[str, float]) -> float:
    s = score(convs, w)
    return sum(s["hits"][5].values()) / max(sum(s["total"].values()), 1)


def choose(
    groups: Sequence[Sequence[Conversation]], tuned: Sequence[str], grid: dict | None = None
) -> dict[str, float]:
    """Coordinate ascent over GRID on the mean recall@5 of ``groups`` (training data only).

    One group per granularity: with two, the weights must serve both. Weights not in
    ``tuned`` stay 0 (term off). Starts with every tuned weight at its first grid value
    and sweeps until a sweep changes nothing (at most 4 sweeps); ties keep the earlier
    value. A second model's share (``--second-vectors``) is an outer loop around it.
    """
    grid = grid or GRID
    if "second" in tuned and len(grid["second"]) > 1:
        # The ensemble share changes every vector, and coordinate ascent from a point
        # tuned for MiniLM alone never leaves share 0. So the other weights are chosen
        # anew for each share; the share with the best training score wins (ties: the
        # smaller share).
        best_w: dict[str, float] = {}
        best_r = -1.0
        for share in grid["second"]:
            w = choose(groups, tuned, grid | {"second": (share,)})
            r = sum(_recall5(g, w) for g in groups) / len(groups)
            if r > best_r + 1e-12:
                best_w, best_r = w, r
        return best_w

    def objective(w: dict[str, float]) -> float:
        return sum(_recall5(g, w) for g in groups) / len(groups)

    w = {name: 0.0 for name in grid}
    for name in tuned:
        w[name] = grid[name][0]
    return ascend(objective, grid, tuned, w)


def ascend(
    objective: Callable[[dict[str, float]], float],
    grid: dict,
    names: Sequence[str],
    w: dict[str, float],
) -> dict[str, float]:
    """Coordinate ascent from ``w`` over ``names``: each name's grid values in order, a
    change kept only when it scores strictly higher (ties keep the earlier), 4 sweeps at most."""
    best = objective(w)
    for _ in range(4):
        changed = False
        for name in names:
            for value in grid[name]:
                if value == w[name]:
                    continue
                trial = {**w, name: value}
                r = objective(trial)
                if r > best + 1e-12:
                    best, w, changed = r, trial, True
        if not changed:
            break
    return w


def held_out(
    sets: dict[str, list[Conversation]], tuned: Sequence[str], grid: dict | None = None
) -> dict[str, dict]:
    """Per granularity: both folds' held-out scores, their mean, and the pooled table."""
    out: dict[str, dict] = {}
    for train, test in FOLDS:
        w = choose([[convs[i] for i in train] for convs in sets.values()], tuned, grid)
        for name, convs in sets.items():
            s = score([convs[i] for i in test], w)
            got = out.setdefault(name, {"folds": [], "pooled_counts": [], "ranks": []})
            got["pooled_counts"].append(s)
            got["ranks"].append(s["ranks"])
            got["folds"].append(
                {
                    "train": f"{train[0]}-{train[-1]}",
                    "test": f"{test[0]}-{test[-1]}",
                    "weights": w,
                    **summarise(s),
                }
            )
    for got in out.values():
        folds = got["folds"]
        got["mean"] = {
            f"recall@{k}": round(sum(f["overall"][f"recall@{k}"] for f in folds) / len(folds), 4)
            for k in KS
        }
        pooled = {"hits": {k: Counter() for k in KS}, "total": Counter()}
        for s in got.pop("pooled_counts"):
            for k in KS:
                pooled["hits"][k].update(s["hits"][k])
            pooled["total"].update(s["total"])
        got["pooled"] = summarise(pooled)
        # how far the sample of questions alone moves the figure (weights as chosen)
        lo, hi = bootstrap.interval(got.pop("ranks"))
        got["recall@5_interval_95"] = [round(lo, 4), round(hi, 4)]
    return out


def run(
    path: Path,
    granularity: str,
    ablation: bool,
    cache_path: Path | None,
    second: Path | None = None,
) -> dict:
    names = ("observations", "turns") if granularity == "both" else (granularity,)
    cache = VectorCache(cache_path)
    sets = {name: load(path, name) for name in names}
    for convs in sets.values():
        prepare(convs, cache)
        if second is not None:
            load_second(second, convs)
    grid = GRID | {"second": SECOND_GRID} if second is not None else GRID
    out: dict = {
        "task": f"locomo10 {' + '.join(names)} recall",
        "model_id": default_embedder().model_id,
        "queries": {n: sum(len(c.queries) for c in convs) for n, convs in sets.items()},
        "memories": {n: sum(len(c.texts) for c in convs) for n, convs in sets.items()},
        "held_out": held_out(sets, tuple(grid), grid),
        "defaults": {"weights": DEFAULTS}
        | {n: summarise(score(convs, DEFAULTS)) for n, convs in sets.items()},
    }
    tuned_all = choose(list(sets.values()), tuple(grid), grid)
    out["tuned_on_all"] = {"weights": tuned_all} | {
        n: summarise(score(convs, tuned_all)) for n, convs in sets.items()
    }
    if ablation:
        out["ablation"] = {
            label: {n: r["mean"] for n, r in held_out(sets, tuned, grid).items()}
            for label, tuned in ABLATION.items()
        }
    return out


def _row(name: str, n: int, r: dict) -> str:
    return f"{name:34s} {n:5d} " + " ".join(f"{r[f'recall@{k}']:6.3f}" for k in KS)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path, help="locomo10.json")
    ap.add_argument(
        "--granularity",
        choices=[*GRANULARITIES, "both"],
        default="observations",
        help="both: each weight is chosen on the mean recall@5 of the two",
    )
    ap.add_argument("--ablation", action="store_true", help="held-out figure per added idea")
    ap.add_argument("--embed-cache", type=Path, help=".npz keeping vectors between runs")
    ap.add_argument(
        "--second-vectors",
        type=Path,
        help="a second model's vectors (.npz from bench/second_model_vectors.py): ensemble",
    )
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    out = run(args.path, args.granularity, args.ablation, args.embed_cache, args.second_vectors)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{out['task']}: queries {out['queries']}, memories {out['memories']}")
    head = f"{'':34s} {'n':>5s} " + " ".join(f"{'r@' + str(k):>6s}" for k in KS)
    for name, ho in out["held_out"].items():
        n = out["queries"][name]
        print(f"\n{name.upper()}: HELD-OUT (weights chosen on the other 5 conversations)")
        print(head)
        for f in ho["folds"]:
            print(_row(f"test {f['test']} (train {f['train']})", f["queries"], f["overall"]))
            print(f"{'':36s}weights {f['weights']}")
        print(_row("mean of the two held-out folds", n, ho["mean"]))
        lo, hi = ho["recall@5_interval_95"]
        print(f"{'':36s}recall@5 95% interval over the questions (bootstrap): [{lo:.3f}, {hi:.3f}]")
        for cat, v in ho["pooled"]["per_category"].items():
            print(_row(f"  {cat} (pooled)", v["queries"], v))
        for label in ("defaults", "tuned_on_all"):
            print(_row(f"TUNED: {label.replace('_', ' ')}", n, out[label][name]["overall"]))
        for label, means in out.get("ablation", {}).items():
            print(_row(f"held-out {label}", n, means[name]))
    for label in ("defaults", "tuned_on_all"):
        print(f"{label} weights: {out[label]['weights']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
