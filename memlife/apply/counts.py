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
from memlife.journal import Operation, OpKind, OpState

DONE = (OpState.APPLIED, OpState.RECEIPTED)


def deferral(reasons: Iterable[str]) -> bool:
    return "ERASURE_DEFERRED" in reasons


def journal_counts(ops: Iterable[Operation]) -> dict[str, int]:
    """Outcome counts of done operations, plus ``failed`` (records whose change failed),
    ``unreceipted`` (applied, receipt still owed) and ``pending`` (planned, never applied).

    ``failed`` counts records, as every other outcome does (audit 49vii): a replacement
    write that failed is no processed record (``replacement_failed``); its members are, each
    once: a supersede it ended (FAILED), or one still waiting on the write's retry."""
    ops = list(ops)
    unwritten = {o.record_id for o in ops if _failed_write(o.state, o.kind)}
    out: Counter[str] = Counter()
    for o in ops:
        if o.state in DONE and o.outcome is not None and o.outcome in COUNT:
            out[COUNT[o.outcome]] += 1
        elif o.state is OpState.FAILED and deferral(o.reasons):
            out["deferred"] += 1  # an erasure a legal hold defers: waiting, not failed
        elif _failed_write(o.state, o.kind):
            out["replacement_failed"] += 1
        elif o.state is OpState.FAILED:
            out["failed"] += 1
        elif o.state is OpState.PLANNED:
            out["pending"] += 1
            if o.kind is OpKind.supersede and o.replacement_id in unwritten:
                out["failed"] += 1
        if o.state is OpState.APPLIED:
            out["unreceipted"] += 1
    return dict(out)


def _failed_write(state: str, kind: str) -> bool:
    return state == OpState.FAILED and kind == OpKind.write_replacement


def lifecycle_from_journal(jc: dict[str, int]) -> dict[str, int]:
    """The run receipt's change counts (consolidated .. failed) from ``journal_counts``."""
    return {
        "consolidated": jc.get("consolidated", 0),
        "superseded": jc.get("superseded", 0),
        "deleted": jc.get("deleted", 0) + jc.get("already_absent", 0),
        "quarantined": jc.get("quarantined", 0),
        "failed": jc.get("failed", 0),
    }
