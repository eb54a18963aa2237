"""Superseded retention counts real time since the supersede, not the run's cutoff.

A supersede stamps ``status_changed_at`` with its run's cutoff, so that a replay writes what
the first run wrote. A catch-up run (``run --now`` months back) therefore stamps its
supersedes months back, and the next regular night deleted those originals at once
(``SUPERSEDED_RETENTION``) although they had been superseded the day before. As quarantine's
grace does (``quarantine.purge_candidates``), the retention now runs from the later of that
stamp and the wall-clock time the journal moved the supersede. A record no journal knows
(imported superseded; an operation the DynamoDB journal's TTL has dropped) counts from its
stamp, as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from memlife.journal import open_supersede_times
from memlife.model import PlanView
from memlife.plan import Action, Decision, Reason
from memlife.policy import Policy
from memlife.stores.base import MemoryStore

_DAY_S = 86400.0


def count_from_supersede(
    store: MemoryStore,
    policy: Policy,
    cutoff: datetime,
    views: Iterable[PlanView],
    decisions: list[Decision],
) -> list[Decision]:
    """``decisions`` with each retention deletion of a record superseded less than its
    class's retention ago in real time made a retain (``ALREADY_SUPERSEDED``, as any kept
    superseded record). Reads the journal only when there are such deletions."""
    due = {d.id: d for d in decisions
           if d.action is Action.delete_expired and Reason.SUPERSEDED_RETENTION in d.reasons}  # fmt: skip
    if not due:
        return decisions
    views = list(views)
    scopes = {v.id: (v.actor_id, v.namespace) for v in views if v.id in due}
    read = open_supersede_times(store)
    done_at = read(list(due), scopes) if read is not None else {}
    for v in views:
        d, at = due.get(v.id), done_at.get(v.id)
        days = policy.superseded_retention_days.get(v.retention_class)
        if d is None or at is None or days is None:
            continue
        if at.timestamp() + days * _DAY_S > cutoff.timestamp():
            d.action, d.reasons = Action.retain, [Reason.ALREADY_SUPERSEDED]
    return decisions
