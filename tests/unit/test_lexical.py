"""BM25 scores (memlife.lexical) are the same bits in every process."""

from __future__ import annotations

import os
import subprocess
import sys

_SCORE = """
import hashlib
from memlife.lexical import LexicalIndex
texts = [
    " ".join(f"w{(i * 7 + j * 13) % 97} w{(i * 3 + j) % 41}" for j in range(1 + i % 9))
    for i in range(400)
]
query = " ".join(f"w{k}" for k in (3, 7, 11, 19, 23, 29, 31, 37, 40, 45, 51, 60, 77, 88))
print(hashlib.sha256(LexicalIndex(texts).scores(query).tobytes()).hexdigest())
"""


def test_scores_do_not_depend_on_the_process_string_hashing() -> None:
    """A query's terms were summed in set order, which Python's per-process string hashing
    decides: float32 sums then differed in the last bit between processes, enough to flip
    two near-equal memories in recall and in the gate's before/after comparison."""
    digests = set()
    for seed in range(6):
        env = os.environ | {"PYTHONHASHSEED": str(seed)}
        out = subprocess.run(
            [sys.executable, "-c", _SCORE], env=env, capture_output=True, text=True, check=True
        )
        digests.add(out.stdout.strip())
    assert len(digests) == 1, digests
