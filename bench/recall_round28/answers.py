# ruff: noqa
"""Session 48 reading of the misses dump (misses.py first): how many held-out misses have
every word of the answer in one memory of their top 5 that the dataset does not mark."""

import pickle

from memlife.lexical import tokenize

rows = pickle.load(open("/tmp/round28_misses.pkl", "rb"))["rows"]


def covered(answer, texts):
    want = set(tokenize(answer))
    return bool(want) and any(want <= set(tokenize(t)) for t in texts)


for cat in (None, 1, 2, 3, 4):
    rs = [r for r in rows if cat is None or r["cat"] == cat]
    miss = [r for r in rs if not 0 < r["final"] <= 5]
    hit = [r for r in rs if 0 < r["final"] <= 5]
    print(
        "all" if cat is None else f"category {cat}",
        f"questions {len(rs)}, misses {len(miss)},",
        f"misses with the whole answer in an unmarked top-5 memory {sum(covered(r['a'], r['top5']) for r in miss)},",
        f"hits whose top 5 holds it {sum(covered(r['a'], r['top5']) for r in hit)} of {len(hit)},",
        f"questions whose evidence holds it {sum(covered(r['a'], r['ev']) for r in rs)}",
    )
