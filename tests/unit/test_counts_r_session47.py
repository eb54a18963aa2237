"""Session 47 (audit 47r): the outcome identity of audits 47j and 47q (every processed record in exactly
one outcome) for the records of a group that a merge leaves out. Real SQLite store, the
local engine, the real CLI through its typer runner (helpers of test_counts_session47)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from memlife.group_plan import MAX_MEMBERS
from tests.unit.test_counts_session47 import ROLLOUT, lands, night, rec, seed, statuses


def test_records_a_merge_leaves_for_the_next_night_count_as_retained(home: Path) -> None:
    """The agent saved one fact 101 times (a retry loop). The night merges the newest 99
    (one journal transaction holds 100 items); the 2 oldest wait for the next night,
    untouched. Must hold: the summary puts every processed record in one outcome: those 2
    are retained (it said processed 101, superseded 99, retained 0)."""
    n = MAX_MEMBERS + 2
    seed(home, [rec(f"r{i:03d}", ROLLOUT, "The user lives in Oslo.", age=200 - i)
                for i in range(n)])  # fmt: skip
    applied = night()
    assert Counter(statuses(home).values()) == {"superseded": MAX_MEMBERS, "active": 3}
    assert applied["lifecycle"]["processed"] == n
    lands(applied["lifecycle"])
