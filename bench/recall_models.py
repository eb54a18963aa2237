"""Embedding models for LoCoMo recall, each measured held out (issue 19, third round).

For each model's vectors (an .npz from bench/second_model_vectors.py), three held-out
figures, judged exactly like bench/recall_locomo.py's headline (all weights chosen on
conversations 0-4 by coordinate ascent on recall@5, scored on 5-9, then the reverse; the
mean of the two held-out scores), on the vectorised replica of ``retrieval.rank`` from
bench/locomo_replica.py (checked against ``rank`` for every model before it is measured):

- ``alone``: the model in place of MiniLM, every other term as shipped;
- ``+ MiniLM, share per fold``: both vectors concatenated, ``[sqrt(1-s) minilm, sqrt(s)
  model]`` (cosine = (1-s) cos_minilm + s cos_model), s chosen on the training half from
  recall_locomo.SECOND_GRID with the other weights chosen anew for each s;
- ``+ MiniLM, equal shares``: s = 1/2, fixed beforehand;
- ``--equal-mix A,B``: MiniLM, A and B concatenated with equal shares (1/3 each);
- ``--choose-between A,B``: MiniLM + A or MiniLM + B, which one and its share both chosen
  on the training half (round 20: bge-small with and without its query instruction).

``--query-cost`` also times embedding one question at a time (one thread, CPU and wall
time, the machine's load printed beside them) for the models named on the command line.

    uv run python bench/recall_models.py ../shared/data/locomo10.json \\
        --vectors fp32=/tmp/minilm-fp32.npz e5=/tmp/e5.npz [--granularity turns]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import locomo_replica as replica
import numpy as np
import recall_locomo as bench
from locomo_cache import VectorCache


def attach(convs: Sequence[bench.Conversation], path: Path) -> list[bench.Conversation]:
    """Copies of ``convs`` whose second vectors are the model's in ``path``."""
    out = [dataclasses.replace(c, _mixed={}) for c in convs]
    bench.load_second(path, out)
    return out


def mixed(convs: Sequence[bench.Conversation], share: float) -> list[replica.Prepared]:
    """Prepared conversations ranked over the MiniLM/model mix at ``share`` (1 = alone)."""
    preps = []
    for c in convs:
        assert c.second is not None
        if share >= 1.0:
            vecs, qvecs = c.second
        else:
            vecs, qvecs = c.vectors(share)
        preps.append(replica.prepare(dataclasses.replace(c, vecs=vecs, qvecs=qvecs, _mixed={})))
    return preps


def equal_mix(convs: Sequence[bench.Conversation], files: Sequence[Path]) -> list[replica.Prepared]:
    """MiniLM and every model in ``files`` concatenated with equal shares (fixed
    beforehand, nothing chosen on the data)."""
    parts = [attach(convs, f) for f in files]
    scale = np.float32(np.sqrt(1.0 / (len(files) + 1)))
    preps = []
    for i, c in enumerate(convs):
        vs = [c.vecs, *(p[i].second[0] for p in parts)]  # type: ignore[index]
        qs = [c.qvecs, *(p[i].second[1] for p in parts)]  # type: ignore[index]
        vecs = np.ascontiguousarray(np.hstack(vs) * scale)
        qvecs = np.ascontiguousarray(np.hstack(qs) * scale)
        preps.append(replica.prepare(dataclasses.replace(c, vecs=vecs, qvecs=qvecs, _mixed={})))
    return preps


def held_out_shares(by_share: dict, show: Callable[[object], object] = lambda s: s) -> dict:
    """Like replica.held_out, with the share chosen per training fold (outer loop). A key
    may be any setting the fold chooses (``--choose-between``: model and share)."""
    grid = dict(bench.GRID)
    chosen, tests = [], []
    for train, test in bench.FOLDS:
        best: tuple[float, float, dict] | None = None
        for share, preps in by_share.items():
            w = replica.choose([preps[i] for i in train], grid, None, replica.CONTEXT_POOL)
            r = replica._recall5([preps[i] for i in train], w, None, replica.CONTEXT_POOL)
            if best is None or r > best[0] + 1e-12:
                best = (r, share, w)
        assert best is not None
        _, share, w = best
        chosen.append({"share": show(share), "train_r5": round(best[0], 4)} | w)
        tests.append(
            replica._score([by_share[share][i] for i in test], w, None, replica.CONTEXT_POOL)
        )
    return replica.tally(tests) | {"chosen": chosen}


def _line(label: str, r: dict) -> str:
    m = " ".join(f"{r['mean'][k]:.4f}" for k in bench.KS)
    cats = " ".join(
        f"{c.split()[1]} {v['recall@5']:.3f}" for c, v in r["pooled"]["per_category"].items()
    )
    return f"{label:44s} {m}   r@5: {cats}"


def query_cost(models: Sequence[str], questions: Sequence[str], args: argparse.Namespace) -> None:
    """Embed each question alone, one thread: p50/p95 CPU and wall ms per model."""
    import second_model_vectors as smv

    for model in models:
        vec_args = argparse.Namespace(
            threads=1, wheel_dir=args.wheel_dirs.get(model), work=args.work
        )
        _, query = smv.embedder(model, vec_args)
        query(list(questions[:5]))  # session start, first-run allocations
        cpu, wall = [], []
        for q in questions:
            c0, w0 = time.process_time(), time.perf_counter()
            query([q])
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
        print(
            f"{model:14s} query embed, {len(questions)} questions, 1 thread: CPU p50 "
            f"{np.percentile(cpu, 50) * 1e3:.1f} / p95 {np.percentile(cpu, 95) * 1e3:.1f} ms, "
            f"wall p50 {np.percentile(wall, 50) * 1e3:.1f} / p95 "
            f"{np.percentile(wall, 95) * 1e3:.1f} ms (load {os.getloadavg()[0]:.1f})",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--granularity", choices=["observations", "turns"], default="observations")
    ap.add_argument("--embed-cache", type=Path, help="MiniLM vectors kept between runs")
    ap.add_argument("--vectors", nargs="*", default=[], help="NAME=FILE.npz per model")
    ap.add_argument(
        "--equal-mix", nargs="*", default=[], help="NAME,NAME: MiniLM + these, equal shares"
    )
    ap.add_argument(
        "--choose-between",
        nargs="*",
        default=[],
        help="NAME,NAME: model and share both chosen per training fold (round 20)",
    )
    ap.add_argument("--query-cost", nargs="*", default=[], help="second_model_vectors models")
    ap.add_argument("--wheel-dir", nargs="*", default=[], help="MODEL=FOLDER for --query-cost")
    ap.add_argument("--work", type=Path, default=Path("/tmp"))
    ap.add_argument("--questions", type=int, default=200)
    args = ap.parse_args(argv)
    args.wheel_dirs = {k: Path(v) for k, v in (s.split("=", 1) for s in args.wheel_dir)}
    convs = bench.load(args.path, args.granularity)
    if args.query_cost:
        qs = [q["question"] for c in convs for q in c.queries][::7][: args.questions]
        query_cost(args.query_cost, qs, args)
    if not args.vectors:
        return 0
    cache = VectorCache(args.embed_cache)
    bench.prepare(convs, cache)
    minilm = [replica.prepare(c) for c in convs]
    print(f"{'held out, ' + args.granularity:44s} " + " ".join(f"r@{k:<4d}" for k in bench.KS))
    print(_line("MiniLM int8 (shipped)", replica.held_out(minilm, dict(bench.GRID))), flush=True)
    for spec in args.vectors:
        name, file = spec.split("=", 1)
        withm = attach(convs, Path(file))
        alone = mixed(withm, 1.0)
        agree = replica.check_replica(alone, bench.DEFAULTS)  # rank() over the model's vectors
        if agree < 0.999:
            print(f"{name}: replica disagrees with rank() ({agree:.4f}): skipped", file=sys.stderr)
            continue
        print(_line(f"{name} alone", replica.held_out(alone, dict(bench.GRID))), flush=True)
        by_share = {s: mixed(withm, s) for s in bench.SECOND_GRID}
        r = held_out_shares(by_share, lambda s: round(s, 3))
        print(_line(f"{name} + MiniLM, share per fold", r), flush=True)
        print(f"{'':44s} chosen per fold: {r['chosen']}")
        half = replica.held_out(by_share[0.5], dict(bench.GRID))
        print(_line(f"{name} + MiniLM, equal shares", half), flush=True)
    files = dict(spec.split("=", 1) for spec in args.vectors)
    for names in args.equal_mix:
        preps = equal_mix(convs, [Path(files[n]) for n in names.split(",")])
        agree = replica.check_replica(preps, bench.DEFAULTS)
        if agree < 0.999:
            print(f"{names}: replica disagrees with rank() ({agree:.4f})", file=sys.stderr)
            continue
        label = f"MiniLM + {' + '.join(names.split(','))}, equal shares"
        print(_line(label, replica.held_out(preps, dict(bench.GRID))), flush=True)
    for names in args.choose_between:
        options = {}
        for n in names.split(","):
            withm = attach(convs, Path(files[n]))
            options |= {(n, s): mixed(withm, s) for s in bench.SECOND_GRID}
        r = held_out_shares(options, lambda k: f"{k[0]} {k[1]:.3f}")  # type: ignore[index]
        print(_line(f"{names.replace(',', ' or ')} + MiniLM, chosen per fold", r), flush=True)
        print(f"{'':44s} chosen per fold: {r['chosen']}")
    cache.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
