"""Counts from the journal: what a run's operations did, over all its attempts.

A run receipt, the Prefect artifact and the metrics use these, not what one attempt
happened to tally: after a crash and a rerun, the rerun reports everything the run did
(the writes and deletes of the killed attempt included), and a terminal failure is
counted once, in its own run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from memlife.apply.tally import COUNT
from memlife.journal import Operation, OpState

DONE = (OpState.APPLIED, OpState.RECEIPTED)


def deferral(reasons: Iterable[str]) -> bool:
    return "ERASURE_DEFERRED" in reasons


def journal_counts(ops: Iterable[Operation]) -> dict[str, int]:
    """Outcome counts of done operations, plus ``failed`` (FAILED now), ``unreceipted``
    (applied, receipt still owed) and ``pending`` (planned, never applied)."""
    out: Counter[str] = Counter()
    for o in ops:
        if o.state in DONE and o.outcome is not None and o.outcome in COUNT:
            out[COUNT[o.outcome]] += 1
        elif o.state is OpState.FAILED and deferral(o.reasons):
            out["deferred"] += 1  # an erasure a legal hold defers: waiting, not failed
        elif o.state is OpState.FAILED:
            out["failed"] += 1
        elif o.state is OpState.PLANNED:
            out["pending"] += 1
        if o.state is OpState.APPLIED:
            out["unreceipted"] += 1
    return dict(out)


def lifecycle_from_journal(jc: dict[str, int]) -> dict[str, int]:
    """The run receipt's change counts (consolidated .. failed) from ``journal_counts``."""
    return {
        "consolidated": jc.get("consolidated", 0),
        "superseded": jc.get("superseded", 0),
        "deleted": jc.get("deleted", 0) + jc.get("already_absent", 0),
        "quarantined": jc.get("quarantined", 0),
        "failed": jc.get("failed", 0),
    }
