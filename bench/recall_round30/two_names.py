# ruff: noqa
"""Round 30, idea D: for a question that names both people, a penalty on memories naming both.

From reading the misses (misses_read.py): 106 of the 1,302 questions name both people of
a conversation ("What do both Joanna and Nate appreciate the beauty of?", "What movies have
both Joanna and Nate seen?"), and they score 0.717 at recall@5 against 0.845 overall. Their
top 5 fills with memories about the two people's relationship ("Joanna appreciates Nate's
support and expresses her gratitude for it"), which the question's two names pull up in
BM25, the cosine and token alignment alike; the evidence is usually two memories naming
one person each. Held-out misses counted (before this script existed): 46% of the
non-evidence memories in these questions' top 5 name both people, against 27% of their
evidence memories and 17% of all memories.

Earlier rounds weighed names as a bonus (round 11: the share of the question's names a
memory holds; round 1: a name-match bonus and a fan-out over the people named) and
penalised "X asked Y about ..." memories for every question (round 28); none made the
penalty conditional on a question that names two people.

The term (fixed before the run): the conversation's names are read from the store as in
event_field.py (first words opening at least 10% of its memories). For a question naming
two or more of them, a memory that names two or more of the names the question gives gets
1, every other memory 0; for every other question the term is 0. Added with its own grid
(0, -0.02, -0.05, -0.1, -0.15, -0.2), chosen per training fold like every other weight.

Decision rule (fixed before the run): implement only if held-out recall@5 >= 0.85 and the
paired difference with the headline wins more questions than it loses.

    PYTHONPATH=$PWD .venv/bin/python bench/recall_round30/two_names.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np

import common
import locomo_replica as rep
import recall_bootstrap as bootstrap
import recall_locomo as bench
from event_field import _WORDS, _bare, names_of


def named(text: str, names: set[str]) -> set[str]:
    return {_bare(w) for w in _WORDS.findall(text)} & names


def term(p: rep.Prepared) -> tuple[np.ndarray, int]:
    names = names_of(p.conv.texts)
    mem = [named(t, names) for t in p.conv.texts]
    out = np.zeros((len(p.conv.queries), len(mem)), np.float32)
    asked = 0
    for qi, q in enumerate(p.conv.queries):
        given = named(q["question"], names)
        if len(given) < 2:
            continue
        asked += 1
        out[qi] = [len(m & given) >= 2 for m in mem]
    return out, asked


def main() -> int:
    cache, convs, preps = common.load()
    grid = dict(bench.GRID)
    made = [term(p) for p in preps]
    print("questions naming two people:", sum(m[1] for m in made))
    runs = [
        ("shipped terms (headline)", lambda: rep.held_out(preps, grid)),
        (
            "two-name question x memory naming both",
            lambda: rep.held_out_with(
                preps, grid, "both", lambda i, c: made[i][0], (0, -0.02, -0.05, -0.1, -0.15, -0.2)
            ),
        ),
    ]
    bootstrap.print_rows(
        runs, "held out, observations", bench.KS, width=44, weights_label="weights per fold"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
