# ruff: noqa
"""Round 31 shared loader: the observation task embedded (cache under .cache_r31), prepared
and held to ``rank`` (bench/locomo_replica.checked). Run from the repository root."""

import os, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recall_round30"))
import recall_locomo as bench
import locomo_replica as rep
from locomo_cache import VectorCache

DATA = Path(os.environ.get("LOCOMO", "../shared/data/locomo10.json"))
CACHE = Path(os.environ.get("EMBED_CACHE", ".cache_r31/emb.npz"))


def load(granularity="observations"):
    cache = VectorCache(CACHE)
    convs = bench.load(DATA, granularity)
    preps = rep.checked(convs, cache)
    cache.save()
    return cache, convs, preps
