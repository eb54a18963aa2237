# ruff: noqa
"""Round 31, idea B: each memory's vector embedded with its session's date in words.

LoCoMo observations belong to dated sessions, and every memory carries that date as
``created_at``. The date already counts three ways: the query-date bonus (``timeref``),
the context term's 30-minute window, and, tried in round 2 and not kept, the date in words
in the BM25 text (0.832 against 0.833, before token alignment). Nobody put it in the
*vector*. Here each memory is embedded a second time as "On 8 May 2023, <text>" (the day,
the month's name and the year of its session, UTC) with the shipped model; the question is
embedded as it is. The token codes stay the plain text's (token alignment unchanged), and
BM25 reads the plain text.

Two forms (fixed before the run):

- *replace*: the dated vector in the plain one's place, for the cosine and the centroid
  term (the centroid is the dated vectors' mean); no new weight.
- *add*: the cosine of the question with the dated vector, a term of its own beside the
  plain cosine, grid (0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0) (round 29's clause grid).

Added after the run of the two forms above, and so designed after seeing their figures
(the *replace* form gained temporal questions, 0.874 to 0.885, and lost the other kinds):

- *when only*: under a "when" question (round 24's reader, ``recall_question_class._WHEN``:
  "when", "how long", "what year / month / date / day / time", ...), the term is the dated
  cosine minus the plain one (weight 1 is *replace* for those questions' cosine), 0 under
  any other; grid (0, 0.25, 0.5, 0.75, 1.0), fixed before its run. ``... dated_vectors.py
  when`` runs this row alone beside the headline.

Decision rule (fixed before the run): implement only if held-out recall@5 >= 0.85 and the
form wins more questions than it loses against the headline.

    PYTHONPATH=$PWD .venv/bin/python bench/recall_round31/dated_vectors.py
"""

import sys
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np

import common
import locomo_replica as rep
import recall_bootstrap as bootstrap
import recall_locomo as bench
from recall_question_class import _WHEN

ADD_GRID = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
WHEN_GRID = (0.0, 0.25, 0.5, 0.75, 1.0)


def dated(text: str, created: float) -> str:
    d = datetime.fromtimestamp(created, UTC)
    return f"On {d.day} {d:%B} {d.year}, {text}"


def main() -> int:
    cache, convs, preps = common.load()
    grid = dict(bench.GRID)
    dvecs = []
    for p in preps:
        c = p.conv
        dvecs.append(cache.embed([dated(t, at) for t, at in zip(c.texts, c.created, strict=True)]))
    cache.save()
    print("example:", dated(preps[0].conv.texts[0], preps[0].conv.created[0]))
    agree = [float((np.sum(d * p.conv.vecs, axis=1)).mean()) for d, p in zip(dvecs, preps)]
    print("mean cosine, dated vs plain memory vector:", round(float(np.mean(agree)), 4))

    def replace() -> dict:
        saved = [(p.cos, p.cent) for p in preps]
        for p, d in zip(preps, dvecs, strict=True):
            mu = d.mean(axis=0)
            p.cos = p.conv.qvecs @ d.T
            p.cent = -(d @ mu - mu @ mu)[None, :]
        try:
            return rep.held_out(preps, grid)
        finally:
            for p, (a, b) in zip(preps, saved, strict=True):
                p.cos, p.cent = a, b

    def when_term(i: int, c: bench.Conversation) -> np.ndarray:
        asks = np.array([bool(_WHEN.search(q["question"])) for q in c.queries])
        diff = c.qvecs @ dvecs[i].T - c.qvecs @ c.vecs.T
        return (asks[:, None] * diff).astype(np.float32)

    when_row = (
        "B. dated minus plain cosine, when questions",
        lambda: rep.held_out_with(preps, grid, "when", when_term, WHEN_GRID),
    )
    runs = [
        ("shipped terms (headline)", lambda: rep.held_out(preps, grid)),
        ("B. dated vectors, in place of the plain", replace),
        (
            "B. dated vectors' cosine, added",
            lambda: rep.held_out_with(
                preps,
                grid,
                "dated",
                lambda i, c: (c.qvecs @ dvecs[i].T).astype(np.float32),
                ADD_GRID,
            ),
        ),
    ]
    if sys.argv[1:] == ["when"]:
        runs = [runs[0], when_row]
    else:
        runs.append(when_row)
    bootstrap.print_rows(
        runs, "held out, observations", bench.KS, width=44, weights_label="weights per fold"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
