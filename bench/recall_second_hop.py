"""A second hop for questions that need two memories, zero-shot; held out (issue 19, 26th round).

Multi-hop questions are recall's weakest category after open-domain (0.772 at recall@5):
the question names one side ("What do Melanie's kids like?") and the evidence's other half
shares few words with it. A second hop reads the question together with the memory the
first ranking put on top: MiniLM embeds ``question + " " + memory`` as one text, so the
transformer relates the two (this is not the pool centroid or Rocchio of earlier rounds,
which average vectors embedded apart), and the new vector's cosine to every memory is a
pool term, min-max scaled over the query's candidates, its weight chosen per training fold
(0 = off, the grid fixed before the run). The first hop is the shipped ranking with its
default weights (``recall_joint_pass.shipped_top``); no label is read.

- ``hop1``: one vector, from the top memory;
- ``hop2max``: two vectors, from the top two memories, each memory's best of the two;
- ``hop1_dense``: from the top memory of plain cosine (nothing tuned picks it).

One more query embedding per question at recall time (about 5 ms of MiniLM).

    uv run python bench/recall_second_hop.py ../shared/data/locomo10.json [--embed-cache FILE]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import locomo_replica as replica
import numpy as np
import recall_locomo as bench
from locomo_cache import VectorCache
from locomo_replica import Prepared
from recall_joint_pass import print_signals, shipped_top

from memlife.embed import default_embedder

SIGNALS = ("hop1", "hop2max", "hop1_dense")
WEIGHTS = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5)  # fixed before the run


def hop_signals(p: Prepared, embed: Callable[[list[str]], np.ndarray]) -> dict[str, np.ndarray]:
    """Q x N per signal: the hop vector's cosine to every memory of the conversation."""
    c = p.conv
    questions = [q["question"] for q in c.queries]
    top = shipped_top(p, 2)
    dense = np.argmax(c.qvecs @ c.vecs.T, axis=1)

    def cos(firsts: np.ndarray) -> np.ndarray:
        v = embed([f"{q} {c.texts[int(m)]}" for q, m in zip(questions, firsts, strict=True)])
        return (v @ c.vecs.T).astype(np.float32)

    one = cos(top[:, 0])
    return {
        "hop1": one,
        "hop2max": np.maximum(one, cos(top[:, 1])),
        "hop1_dense": cos(dense),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--embed-cache", type=Path)
    args = ap.parse_args(argv)
    cache = VectorCache(args.embed_cache)
    preps = replica.checked(bench.load(args.path, "observations"), cache)
    if preps is None:
        return 1
    emb = default_embedder()
    kept = {
        f"{i}:{name}": values
        for i, p in enumerate(preps)
        for name, values in hop_signals(p, lambda t: np.asarray(emb.embed(t))).items()
    }
    print_signals(preps, kept, SIGNALS, WEIGHTS, "second hop")
    cache.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
