"""The access ledger's reads folded into nightly planning views (memlife/ledger.py keeps
the rows; scoring reads them through :func:`merge_into_views`).

Stats are keyed by actor and record id (:meth:`AccessLedger.actor_stats`) and keep every
read's time: ids are reused once a record is removed, and a delete, unlike an erasure,
leaves the ledger's rows, so a record is credited only with the reads since it was created.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from memlife.model import PlanView


class AccessTimes:
    """One (actor, record id)'s reads: their times in epoch seconds, sorted."""

    __slots__ = ("times",)

    def __init__(self, times: Iterable[float] | np.ndarray) -> None:
        self.times = np.sort(np.asarray(times, dtype=np.float64))

    @classmethod
    def sorted(cls, times: np.ndarray) -> AccessTimes:
        """Times already sorted (a slice of the ledger's sorted column): no copy."""
        made = cls.__new__(cls)
        made.times = times
        return made

    @property
    def count(self) -> int:
        return len(self.times)

    @property
    def last(self) -> datetime:
        return datetime.fromtimestamp(float(self.times[-1]), UTC)

    def since(self, created: float) -> tuple[float | None, int]:
        """The last read at or after ``created`` and how many there were (None, 0 if none)."""
        if not len(self.times) or self.times[0] >= created:  # the common case: all its own
            return (float(self.times[-1]) if len(self.times) else None), len(self.times)
        n = len(self.times) - int(np.searchsorted(self.times, created, side="left"))
        return (float(self.times[-1]) if n else None), n

    def plus(self, other: AccessTimes) -> AccessTimes:
        return AccessTimes(np.concatenate([self.times, other.times]))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AccessTimes) and np.array_equal(self.times, other.times)

    __hash__ = None  # type: ignore[assignment]  # mutable array inside: not hashable

    def __repr__(self) -> str:
        return (
            f"AccessTimes(count={self.count}, last={self.last.isoformat() if self.count else None})"
        )


ActorStats = dict[tuple[str, str], AccessTimes]  # (actor_id, record_id) -> its reads


def reads_by_record(table: pa.Table) -> ActorStats:
    """Ledger rows (``actor_id``, ``record_id``, ``accessed_at``) as each (actor, record
    id)'s read times: one sort, then slices of one column (no object per read)."""
    if any(c.null_count for c in table.columns):  # a read naming no actor, id or time is no
        table = table.drop_null()  # record's: sorted last, it joined the group before it
    if table.num_rows == 0:
        return {}
    order = [("actor_id", "ascending"), ("record_id", "ascending"), ("accessed_at", "ascending")]
    table = table.sort_by(order).combine_chunks()
    actor, rid = table.column("actor_id").chunk(0), table.column("record_id").chunk(0)
    n = table.num_rows
    opens = np.ones(n, dtype=bool)  # where a new (actor, record id) starts in sorted order
    if n > 1:
        head, tail = slice(0, n - 1), slice(1, n)
        opens[1:] = pc.or_(
            pc.not_equal(actor[tail], actor[head]), pc.not_equal(rid[tail], rid[head])
        ).to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(opens)
    ends = np.append(starts[1:], n)
    at = pa.array(starts)
    seconds = pc.cast(table.column("accessed_at"), pa.int64()).to_numpy() / 1e6
    keys = zip(actor.take(at).to_pylist(), rid.take(at).to_pylist(), strict=True)
    return {
        key: AccessTimes.sorted(seconds[i:j]) for key, i, j in zip(keys, starts, ends, strict=True)
    }


def merge_into_view(view: PlanView, stats: Mapping[tuple[str, str], AccessTimes]) -> PlanView:
    """Fold ledger reads (by actor and record id) into a planning view: latest access
    wins, counts add, and only reads at or after the record's creation count.

    A view whose record has no ledger rows is returned unchanged (same object), and so is
    one whose rows all come from before it was created: they are an earlier record's that
    had the id (a removed record's accesses stay in the ledger; only erasure rewrites it).
    """
    got = stats.get((view.actor_id, view.id))
    if got is None:
        return view
    ts, count = got.since(view.created)
    if ts is None:
        return view
    last_accessed = ts if view.last_accessed is None else max(view.last_accessed, ts)
    return view._replace(last_accessed=last_accessed, access_count=view.access_count + count)


def merge_into_views(
    views: Iterable[PlanView], stats: Mapping[tuple[str, str], AccessTimes]
) -> list[PlanView]:
    return [merge_into_view(v, stats) for v in views]
