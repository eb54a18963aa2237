"""The access ledger's reads folded into nightly planning views (memlife/ledger.py keeps
the rows; scoring reads them through :func:`merge_into_views`).

Stats are keyed by actor and record id (:meth:`AccessLedger.actor_stats`): ids are reused
once a record is removed, and a delete, unlike an erasure, leaves the ledger's rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from memlife.model import PlanView


def merge_into_view(
    view: PlanView, stats: Mapping[tuple[str, str], tuple[datetime, int]]
) -> PlanView:
    """Fold ledger stats (by actor and record id) into a planning view: latest access
    wins, counts add.

    A view whose record has no ledger rows is returned unchanged (same object), and so is
    one whose rows all come from before it was created: they are an earlier record's that
    had the id (a removed record's accesses stay in the ledger; only erasure rewrites it).
    """
    got = stats.get((view.actor_id, view.id))
    if got is None:
        return view
    last, count = got
    ts = last.timestamp()
    if ts < view.created:
        return view
    last_accessed = ts if view.last_accessed is None else max(view.last_accessed, ts)
    return view._replace(last_accessed=last_accessed, access_count=view.access_count + count)


def merge_into_views(
    views: Iterable[PlanView], stats: Mapping[tuple[str, str], tuple[datetime, int]]
) -> list[PlanView]:
    return [merge_into_view(v, stats) for v in views]
