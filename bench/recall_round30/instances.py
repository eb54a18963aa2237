# ruff: noqa
"""Round 30, idea E: for a question asking for a kind of thing, a bonus on memories naming one.

From reading the misses (misses_read.py): 13 of 40 multi-hop misses ask for a category
("Which cities did Dave travel to in 2023?", "What books has Tim read?", "What kind of
indoor activities has Andrew pursued with his girlfriend?") while the evidence names
instances ("San Francisco", "'A Dance with Dragons'", "a board game night"); the top 5 fills
with general memories that repeat the category word ("Tim loves reading and has a collection
of books"). Counted over all held-out questions before this script (the trigger below): 142
such questions, recall@5 0.824; 29% of their evidence memories name an instance, against
19% of the non-evidence memories in their top 5 and 17% of all memories.

Round 13's answer types gave a number to "how many / how long", a place to "where" and a
new name to "who"; round 23's specificity (b) counted names and numbers for every question.
This conditions the instance on a question that asks for a category.

The term (fixed before the run): a *category question* opens "what" or "which", then
optionally "kind / kinds / type / types / sort of", optionally one word, then a plural word
(ending in -s) and an auxiliary (has, have, had, did, does, do, is, are, was, were). A memory
*names an instance* if it holds a quoted title starting with a capital, or a number, or a
capitalised word after its first that is not one of the store's names (event_field.names_of),
a stopword, a month or a weekday. The term is 1 for such a memory under a category
question, else 0; added with its own grid (0, 0.02, 0.05, 0.1, 0.15, 0.2).

Decision rule (fixed before the run): implement only if held-out recall@5 >= 0.85 and the
paired difference with the headline wins more questions than it loses.

    PYTHONPATH=$PWD .venv/bin/python bench/recall_round30/instances.py
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
from memlife.text import STOPWORDS
from memlife.timeref import MONTHS, WEEKDAYS

CATEGORY = re.compile(
    r"^\s*(?:what|which)\s+(?:(?:kind|kinds|type|types|sort)\s+of\s+)?(?:\w+\s+)?\w+s\s+"
    r"(?:has|have|had|did|does|do|is|are|was|were)\b",
    re.I,
)
_TITLE = re.compile(r"['\"][A-Z][^'\"]+['\"]")


def instance(text: str, names: set[str]) -> bool:
    if _TITLE.search(text):
        return True
    for w in _WORDS.findall(text)[1:]:
        b = _bare(w)
        if re.fullmatch(r"\d+", b):
            return True
        low = b.lower()
        if b[:1].isupper() and b not in names and low not in STOPWORDS:
            if low not in MONTHS and low not in WEEKDAYS:
                return True
    return False


def term(p: rep.Prepared) -> tuple[np.ndarray, int]:
    names = names_of(p.conv.texts)
    mem = np.array([instance(t, names) for t in p.conv.texts], np.float32)
    asks = np.array([bool(CATEGORY.search(q["question"])) for q in p.conv.queries])
    return (asks[:, None] * mem[None, :]).astype(np.float32), int(asks.sum())


def main() -> int:
    cache, convs, preps = common.load()
    grid = dict(bench.GRID)
    made = [term(p) for p in preps]
    print("category questions:", sum(m[1] for m in made))
    runs = [
        ("shipped terms (headline)", lambda: rep.held_out(preps, grid)),
        (
            "category question x memory naming one",
            lambda: rep.held_out_with(
                preps, grid, "inst", lambda i, c: made[i][0], (0, 0.02, 0.05, 0.1, 0.15, 0.2)
            ),
        ),
    ]
    bootstrap.print_rows(
        runs, "held out, observations", bench.KS, width=44, weights_label="weights per fold"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
