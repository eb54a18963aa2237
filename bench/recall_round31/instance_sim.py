# ruff: noqa
"""Round 31, idea C: for a question asking for a kind of thing, memories holding a word
*like* the kind (an instance), not the kind's own word.

Round 30 read 40 multi-hop misses: 13 ask for a category ("Which cities did Dave travel to
in 2023?", "What books has Tim read?") while the evidence names instances ("Detroit", a
title), and the top 5 fills with restatements that repeat the category word ("Tim loves
reading and has a collection of books"). Round 30's idea E rewarded a capitalised word, a
number or a quoted title (no gain: 1 won, 3 lost on those questions). This asks the
shipped model instead: is some word of the memory, other than the question's own words,
close to the category noun? A restatement's remaining words are about the person; an
instance memory holds the instance.

The trigger is round 30's (``instances.CATEGORY``: "what / which [kind of] [word] <plural>
<auxiliary>"), and the *category noun* is its plural word ("cities", "books",
"activities"). Word vectors: every distinct word embedded alone with the shipped model
(MiniLM, mean pooling, unit length), once. A memory's *candidate words*: its words (split
on white space, punctuation and "'s" stripped, lower-cased) that are alphabetic, at least 3
letters, not stopwords, not one of the store's names (``event_field.names_of``), and whose
BM25 stem is none of the question's stems.

Two forms, each 0 for every memory under any other question (fixed before the run):

- *C1, instance similarity*: the term is a memory's best cosine between the category noun
  and its candidate words (0 with none). Grid (0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3).
- *C2, query by example* (the brief's form): the question with its category noun replaced by
  "w1, w2 or w3", the three candidate words of the plain cosine's best 50 memories (no
  weight, no label: the pool is the question vector's nearest 50) most similar to the noun,
  is embedded as a second query vector; its cosine with each memory is the term. Grid
  (0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0). Online this is one more query embedding for a
  category question (about 11% of LoCoMo's questions).

Decision rule (fixed before the run): implement only if held-out recall@5 >= 0.85 and the
form wins more questions than it loses against the headline. The category questions' own
won / lost is printed beside it.

    PYTHONPATH=$PWD .venv/bin/python bench/recall_round31/instance_sim.py
"""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np

import common
import locomo_replica as rep
import recall_bootstrap as bootstrap
import recall_locomo as bench
from event_field import _WORDS, _bare, names_of

from memlife.lexical import tokenize
from memlife.text import STOPWORDS

CATEGORY = re.compile(
    r"^\s*(?:what|which)\s+(?:(?:kind|kinds|type|types|sort)\s+of\s+)?(?:\w+\s+)?(\w+s)\s+"
    r"(?:has|have|had|did|does|do|is|are|was|were)\b",
    re.I,
)
C1_GRID = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3)
C2_GRID = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)


def candidates(text: str, names: set[str], qstems: set[str]) -> list[str]:
    out = []
    for w in _WORDS.findall(text):
        b = _bare(w)
        low = b.lower()
        if len(low) < 3 or not low.isalpha() or low in STOPWORDS or b in names:
            continue
        if set(tokenize(low)) & qstems:
            continue
        out.append(low)
    return out


def main() -> int:
    cache, convs, preps = common.load()
    grid = dict(bench.GRID)
    # the category noun of every category question, and every word's vector
    nouns = []
    words: set[str] = set()
    for p in preps:
        row = []
        for q in p.conv.queries:
            m = CATEGORY.search(q["question"])
            row.append(m.group(1).lower() if m else None)
        nouns.append(row)
        for t in p.conv.texts:
            words.update(_bare(w).lower() for w in _WORDS.findall(t))
    words.update(n for row in nouns for n in row if n)
    vocab = sorted(w for w in words if w.isalpha() and len(w) >= 3)
    wv = dict(zip(vocab, cache.embed(vocab), strict=True))
    cache.save()
    n_cat = sum(n is not None for row in nouns for n in row)
    print(f"category questions: {n_cat}; words embedded: {len(vocab)}")
    c1, c2, shown = [], [], 0
    for p, row in zip(preps, nouns, strict=True):
        c = p.conv
        names = names_of(c.texts)
        t1 = np.zeros((len(c.queries), len(c.texts)), np.float32)
        t2 = np.zeros_like(t1)
        for qi, (q, noun) in enumerate(zip(c.queries, row, strict=True)):
            if noun is None:
                continue
            qstems = set(tokenize(q["question"]))
            nv = wv[noun]
            best_word: dict[str, float] = {}
            for mi, t in enumerate(c.texts):
                cands = candidates(t, names, qstems)
                if cands:
                    sims = np.array([wv[w] @ nv for w in cands])
                    t1[qi, mi] = sims.max()
            near = np.argsort(-p.cos[qi], kind="stable")[:50]
            for mi in near:
                for w in candidates(c.texts[mi], names, qstems):
                    best_word[w] = float(wv[w] @ nv)
            top = sorted(best_word, key=lambda w: (-best_word[w], w))[:3]
            if top:
                example = ", ".join(top[:-1]) + (" or " if len(top) > 1 else "") + top[-1]
                text = re.sub(
                    rf"\b{re.escape(noun)}\b", example, q["question"], count=1, flags=re.I
                )
                if shown < 6:
                    print("  ", q["question"], "->", text)
                    shown += 1
                t2[qi] = cache.embed([text])[0] @ c.vecs.T
        c1.append(t1)
        c2.append(t2)
    cache.save()

    def row_with(name, table, weights):
        def run() -> dict:
            r = rep.held_out_with(preps, grid, name, lambda i, c: table[i], weights)
            return r

        return run

    head = rep.held_out(preps, grid)
    runs = [
        ("shipped terms (headline)", lambda: head),
        ("C1. instance similarity", row_with("c1", c1, C1_GRID)),
        ("C2. query by example", row_with("c2", c2, C2_GRID)),
    ]
    results = {}

    def record(label, fn):
        def run():
            results[label] = fn()
            return results[label]

        return run

    bootstrap.print_rows(
        [(l, record(l, f)) for l, f in runs],
        "held out, observations",
        bench.KS,
        width=36,
        weights_label="weights per fold",
    )
    # the category questions alone, in the test folds' order
    cat = np.concatenate(
        [np.array([n is not None for n in nouns[i]]) for f in bench.FOLDS for i in f[1]]
    )
    base = np.concatenate(head["ranks"])
    base5 = (base > 0) & (base <= 5)
    for label in ("C1. instance similarity", "C2. query by example"):
        got = np.concatenate(results[label]["ranks"])
        got5 = (got > 0) & (got <= 5)
        print(
            f"{label}: category questions r@5 {base5[cat].mean():.3f} -> {got5[cat].mean():.3f} "
            f"(won {int((got5 & ~base5 & cat).sum())}, lost {int((base5 & ~got5 & cat).sum())}); "
            f"others won {int((got5 & ~base5 & ~cat).sum())}, lost {int((base5 & ~got5 & ~cat).sum())}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
