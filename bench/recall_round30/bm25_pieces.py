# ruff: noqa
"""Round 30, idea A: BM25 over the shipped tokenizer's WordPiece pieces, held out.

The shipped BM25 (memlife/lexical.py) reads lowercased words, drops stopwords and stems them
(Snowball). Earlier rounds changed its words (bigrams and lemmas, round 6; character 4-gram
tf-idf, round 28; neighbours' words, round 24; splade-tiny's expansion over pieces, round 12)
but never read the model's own WordPiece pieces: "skateboarding" is "skate ##boarding",
"Shibuya" is "shi ##bu ##ya", "bookshelf" is "books ##hel ##f", and two memories that
share a piece share a term even where the stemmer leaves the words apart ("volunteering"
and "volunteers" stem to "volunt" either way, "skate" and "skateboarding" do not).

Terms: the ids the shipped tokenizer (memlife/_data/tokenizer.json, uncased WordPiece, no
truncation) gives a text, without [CLS]/[SEP], without pieces that are only punctuation,
and without word-initial pieces that are stopwords (memlife.text.STOPWORDS); continuation
pieces are kept. BM25 with the shipped statistics (Lucene idf, k1 1.5, b 0.75) over each
conversation's memories, max-normalised per query as the shipped BM25 is. Two forms, fixed
before the run:

- *added*: beside the shipped BM25, its own grid (0, 0.05, 0.1, 0.2, 0.3, 0.5);
- *in place*: the piece BM25 replaces the stemmed BM25 (the lexical grid as shipped).

Decision rule (fixed before the run): implement only if held-out recall@5 >= 0.85 and the
paired difference with the headline wins more questions than it loses.

    PYTHONPATH=$PWD .venv/bin/python bench/recall_round30/bm25_pieces.py
"""

import string
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np
from tokenizers import Tokenizer

import common
import locomo_replica as rep
import recall_bootstrap as bootstrap
import recall_locomo as bench
from memlife.embed import TOKENIZER_PATH
from memlife.text import STOPWORDS

_tok = Tokenizer.from_file(str(TOKENIZER_PATH))
_tok.no_padding()
_tok.no_truncation()
_PUNCT = set(string.punctuation)


def pieces(text: str) -> list[str]:
    out = []
    for p in _tok.encode(text).tokens:
        if p in ("[CLS]", "[SEP]") or all(ch in _PUNCT for ch in p.removeprefix("##")):
            continue
        if not p.startswith("##") and p in STOPWORDS:
            continue
        out.append(p)
    return out


def piece_bm25(p: rep.Prepared) -> np.ndarray:
    return common.bm25_matrix(
        [pieces(t) for t in p.conv.texts], [pieces(q["question"]) for q in p.conv.queries]
    )


def main() -> int:
    cache, convs, preps = common.load()
    grid = dict(bench.GRID)
    pb = [piece_bm25(p) for p in preps]
    ex = preps[0].conv.texts[0]
    print("example:", ex, "->", pieces(ex))
    print("mean pieces per memory:", np.mean([len(pieces(t)) for p in preps for t in p.conv.texts]))

    def in_place():
        saved = [p.bm25 for p in preps]
        try:
            for p, r in zip(preps, pb):
                p.bm25 = r
            return rep.held_out(preps, grid)
        finally:
            for p, s in zip(preps, saved):
                p.bm25 = s

    runs = [
        ("shipped terms (headline)", lambda: rep.held_out(preps, grid)),
        (
            "piece BM25 added beside stemmed BM25",
            lambda: rep.held_out_with(
                preps, grid, "pieces", lambda i, c: pb[i], (0, 0.05, 0.1, 0.2, 0.3, 0.5)
            ),
        ),
        ("piece BM25 in place of stemmed BM25", in_place),
    ]
    bootstrap.print_rows(
        runs, "held out, observations", bench.KS, width=44, weights_label="weights per fold"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
