# ruff: noqa
"""Round 30: print held-out misses of one category for reading by hand.

Reads the dump bench/recall_round30/misses.py writes (.cache_r30/misses.pkl, or MISSES=PATH):
per held-out question, where its evidence ranks under the weights its training fold chose.
Prints a seeded sample of the misses at recall@5 of one LoCoMo category (1 multi-hop,
2 temporal, 3 open-domain, 4 single-hop), with the question, the answer, the evidence, its
rank in the final ranking / the fused first stage / the cosine / BM25, and the top 5.

    PYTHONPATH=$PWD .venv/bin/python bench/recall_round30/misses_read.py [CATEGORY] [N] [SEED]
"""

import os
import pickle
import random
import sys
from collections import Counter


def main() -> int:
    cat = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    rows = pickle.load(open(os.environ.get("MISSES", ".cache_r30/misses.pkl"), "rb"))["rows"]
    per = Counter(r["cat"] for r in rows)
    miss = Counter(r["cat"] for r in rows if not 0 < r["final"] <= 5)
    for c in sorted(per):
        print(f"category {c}: {per[c]} questions, {miss[c]} missed at recall@5")
    pick = [r for r in rows if r["cat"] == cat and not 0 < r["final"] <= 5]
    bands = Counter(
        "6-10" if 0 < r["final"] <= 10 else ("11-50" if 0 < r["first"] <= 50 else "not in pool")
        for r in pick
    )
    print(f"category {cat} misses by where the evidence is: {dict(bands)}")
    random.Random(seed).shuffle(pick)
    for i, r in enumerate(pick[:n], 1):
        print(f"\n#{i} conv {r['conv']} q{r['qi']}: {r['q']}  -> answer: {r['a']}")
        print(
            f"   evidence rank final {r['final']} first {r['first']} cos {r['cos']} bm25 {r['bm']}"
        )
        for e in r["ev"]:
            print(f"   EV: {e}")
        for j, t in enumerate(r["top5"], 1):
            print(f"   {j}. {t}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
