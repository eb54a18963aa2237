"""A run's review findings, bounded: what the nightly queueing needs, not every decision.

The queue opens at most ``budget`` new items a night, best first (``order``), and only
counts the rest. So a planning process keeps the ``budget`` best new items it found, the
ids of items already open (carried: nights + 1), and counts; a million-record night holds
~500 decisions instead of every review decision (~1 KB each, in every process and again
in the parent). The best ``budget`` of the union is the best ``budget`` of the per-process
bests: merging gives exactly what one sort of every finding would.

Findings are looked up in the queue's backend in chunks as they come (existing or new);
a run holds the store's lease, so nothing else changes the queue between planning and
queueing. An item id is one (record, reason): a record is planned once a run, so an id
is found once; within one chunk a repeat replaces the earlier finding (as a dict would).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from memlife.plan import REVIEW_REASONS, Action, Decision
from memlife.review_queue.base import OPEN_STATES, ReviewBackend, item_id

# (-priority, record id, reason, item id, decision): the queue's order, ties included
Entry = tuple[float, str, str, str, Decision]

CHUNK = 1024  # findings looked up in the backend at a time


def order(decision: Decision, reason: str, iid: str) -> Entry:
    """Highest priority first, then record id, then reason code (unique per item)."""
    return (-(decision.priority or 0.0), decision.id, reason, iid, decision)


def _rank(entry: Entry) -> tuple[float, str, str]:
    return entry[0], entry[1], entry[2]


@dataclass
class ReviewCandidates:
    """``budget`` None keeps every new item (one call with every decision at hand)."""

    budget: int | None = None
    best: list[Entry] = field(default_factory=list)  # new items, pruned to budget
    new: int = 0  # new items found: opened + waiting
    carried: list[str] = field(default_factory=list)  # ids of open or disputed items
    closed_earlier: int = 0  # resolved before: never reopened
    pending: dict[str, tuple[Decision, str]] = field(default_factory=dict)  # not looked up

    def add(self, decisions: Iterable[Decision], backend: ReviewBackend | None = None) -> None:
        """The review findings of ``decisions``; looked up every CHUNK with a backend."""
        for d in decisions:
            if d.action is not Action.review:
                continue
            for reason in d.reasons:
                if reason in REVIEW_REASONS:
                    self.pending[item_id(d.id, reason.value)] = (d, reason.value)
        if backend is not None and len(self.pending) >= CHUNK:
            self.settle(backend)

    def settle(self, backend: ReviewBackend) -> None:
        """Look the pending findings up: carried, closed earlier, or new."""
        if not self.pending:
            return
        ids = list(self.pending)
        existing = {i: item.state for i, item in backend.get_many(ids).items()}
        for i in ids:
            state = existing.get(i)
            if state is None:
                d, reason = self.pending[i]
                self.best.append(order(d, reason, i))
                self.new += 1
            elif state in OPEN_STATES:
                self.carried.append(i)
            elif state == "resolved":
                self.closed_earlier += 1
        self.pending.clear()
        if self.budget is not None and len(self.best) >= 2 * self.budget + CHUNK:
            self.best = self.opened(self.budget)

    def compact(self, backend: ReviewBackend) -> None:
        """Settle, and keep only the budget's best (a batch's outcome, before it is held)."""
        self.settle(backend)
        if self.budget is not None:
            self.best = self.opened(self.budget)

    def absorb(self, other: ReviewCandidates) -> None:
        """Take ``other``'s findings (it is left empty): a run that plans batch after batch
        holds one bounded set, not one per batch (a batch of 100 shards keeps all of its own)."""
        self.best += other.best
        self.new += other.new
        self.carried += other.carried
        self.closed_earlier += other.closed_earlier
        self.pending.update(other.pending)
        other.best, other.new, other.carried, other.closed_earlier = [], 0, [], 0
        other.pending = {}
        if self.budget is not None and len(self.best) >= 2 * self.budget + CHUNK:
            self.best = self.opened(self.budget)

    @property
    def found(self) -> int:
        """Items found (settled ones): new, carried and closed earlier."""
        return self.new + len(self.carried) + self.closed_earlier

    def opened(self, budget: int) -> list[Entry]:
        """The ``budget`` best new items, best first (settle first)."""
        return sorted(self.best, key=_rank)[:budget]

    @classmethod
    def merge(
        cls, parts: Sequence[ReviewCandidates], budget: int, backend: ReviewBackend
    ) -> ReviewCandidates:
        """Every process's findings as one (each settled against ``backend`` first)."""
        out = cls(budget)
        for p in parts:
            p.settle(backend)
            out.best += p.opened(budget)
            out.new += p.new
            out.carried += p.carried
            out.closed_earlier += p.closed_earlier
        out.best = out.opened(budget)
        return out
