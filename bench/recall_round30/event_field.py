# ruff: noqa
"""Round 30, idea B: an event-centred view of each memory as a second BM25 field, held out.

An observation opens with its subject ("John started going to boot camps with his family
last month ..."), and in one actor's store nearly every memory names the same two people.
The shipped BM25 reads the whole text; its length norm counts the names, and its best score
(by which every query's BM25 is divided) often comes from a memory that shares the
question's name and one more word. This field reads only what the subject did: the memory's
words after its subject, names removed, so that a question's event words ("boot camps",
"support group") are matched against events alone. Earlier rounds changed BM25's words
(bigrams, lemmas, pieces, 4-grams, neighbours' words) or scale, or weighed names (round 11),
never split a memory into subject and event.

The rule (crude, fixed before the run): a conversation's *names* are the first words
(possessive "'s" dropped) that open at least 10% of its memories, read from the store
itself (LoCoMo: the two speakers). A memory whose first word is a name loses it; every
name word left in the text is removed too (a memory that does not open with a name keeps
its text, names removed). The question loses its name words as well. Terms are the
shipped BM25 words (memlife.lexical.tokenize: lowercased, stopwords out, Snowball stems);
BM25 with the shipped statistics, max-normalised per query. Two forms, each added beside the
shipped BM25 with its own grid (0, 0.05, 0.1, 0.2, 0.3, 0.5), fixed before the run:

- *event field*: every word after the subject;
- *predicate head*: only the first 4 terms after the subject (the verb and its object,
  roughly: "start go boot camp").

The script first checks its BM25 against the shipped one (the same function on the
shipped words must give the replica's BM25 term).

Decision rule (fixed before the run): implement only if held-out recall@5 >= 0.85 and the
paired difference with the headline wins more questions than it loses.

    PYTHONPATH=$PWD .venv/bin/python bench/recall_round30/event_field.py
"""

import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np

import common
import locomo_replica as rep
import recall_bootstrap as bootstrap
import recall_locomo as bench
from memlife.lexical import tokenize

HEAD = 4
SHARE = 0.10
_WORDS = re.compile(r"\S+")


def _bare(word: str) -> str:
    w = word.strip('.,;:!?"()')
    for tail in ("'s", "\u2019s", "'"):
        if w.endswith(tail):
            w = w[: -len(tail)]
    return w


def names_of(texts: list[str]) -> set[str]:
    first = Counter(_bare(t.split()[0]) for t in texts if t.split())
    return {w for w, n in first.items() if n >= SHARE * len(texts) and w[:1].isupper()}


def drop_names(text: str, names: set[str]) -> str:
    return " ".join(w for w in _WORDS.findall(text) if _bare(w) not in names)


def event_terms(text: str, names: set[str]) -> list[str]:
    words = _WORDS.findall(text)
    if words and _bare(words[0]) in names:
        words = words[1:]
    return tokenize(drop_names(" ".join(words), names))


def fields(p: rep.Prepared) -> tuple[np.ndarray, np.ndarray, set[str]]:
    names = names_of(p.conv.texts)
    ev = [event_terms(t, names) for t in p.conv.texts]
    qs = [tokenize(drop_names(q["question"], names)) for q in p.conv.queries]
    return common.bm25_matrix(ev, qs), common.bm25_matrix([e[:HEAD] for e in ev], qs), names


def main() -> int:
    cache, convs, preps = common.load()
    grid = dict(bench.GRID)
    worst = 0.0
    for p in preps:  # the BM25 here against the shipped one, on the shipped words
        mine = common.bm25_matrix(
            [tokenize(t) for t in p.conv.texts], [tokenize(q["question"]) for q in p.conv.queries]
        )
        worst = max(worst, float(np.abs(mine - p.bm25).max()))
    print(f"this BM25 vs the shipped one, largest difference: {worst:.2e}")
    if worst > 1e-4:
        print("BM25 differs from the shipped one: stopping", file=sys.stderr)
        return 1
    made = [fields(p) for p in preps]
    print("names per conversation:", [sorted(m[2]) for m in made])
    p0 = preps[0]
    for t in p0.conv.texts[:3]:
        print(" ", t, "->", event_terms(t, made[0][2]), "head", event_terms(t, made[0][2])[:HEAD])
    grid_w = (0, 0.05, 0.1, 0.2, 0.3, 0.5)
    runs = [
        ("shipped terms (headline)", lambda: rep.held_out(preps, grid)),
        (
            "event field (after the subject) added",
            lambda: rep.held_out_with(preps, grid, "event", lambda i, c: made[i][0], grid_w),
        ),
        (
            f"predicate head (first {HEAD} terms) added",
            lambda: rep.held_out_with(preps, grid, "head", lambda i, c: made[i][1], grid_w),
        ),
    ]
    bootstrap.print_rows(
        runs, "held out, observations", bench.KS, width=44, weights_label="weights per fold"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
