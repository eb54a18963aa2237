# ruff: noqa
"""Round 29, idea D checked before running: how many observations carry a date of their own.

A time-of-event term for "when" questions would date a memory by the time expression it
holds instead of its session. Round 8 measured the relative half (303 of 2,541 observations
say "last Saturday", "two weeks ago", ...; resolved against created_at and given the date
bonus: 0.839 held out, not kept). What is left is the absolute half: a memory that names a
day, month or year itself, read by the same reader the query side uses
(``memlife.timeref.query_date_ranges``). This counts them; no ranking is run.

    PYTHONPATH=$PWD .venv/bin/python bench/recall_round29/event_dates.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import recall_locomo as bench
from memlife.timeref import query_date_ranges

DATA = Path("../shared/data/locomo10.json")

convs = bench.load(DATA, "observations")
dated = [(c, i, t) for c in convs for i, t in enumerate(c.texts) if query_date_ranges(t)]
n = sum(len(c.texts) for c in convs)
print(f"observations naming a date of their own: {len(dated)} of {n}")
evid = sum(any(q_rel[i] for q_rel in c.relevant) for c, i, _ in dated)
print(f"... of which evidence for some question: {evid}")
for c, i, t in dated[:20]:
    print("  ", t)
