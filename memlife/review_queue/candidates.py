"""A run's review findings, bounded: what the nightly queueing needs, not every decision.

The queue opens at most ``budget`` new items a night, best first (``order``), lists the
next ``listed`` by name as waiting, and only counts the rest. So a planning process keeps
the ``budget + listed`` best new items it found, the ids of items already open (carried:
nights + 1), and counts; a million-record night holds a few thousand decisions instead of
every review decision (~1 KB each, in every process and again in the parent). The best
``budget + listed`` of the union are the best of the per-process bests: merging gives
exactly what one sort of every finding would. A finding that waited is found again as a new
one, its priority raised by ``age_per_day`` for each day since it was first found: a steady
stream of higher-priority findings cannot keep it waiting for ever.

Findings are looked up in the queue's backend in chunks as they come (existing or new);
a run holds the store's lease, so nothing else changes the queue between planning and
queueing. An item id is one (actor, namespace, record, reason): a record is planned once a
run, so an id is found once; within one chunk a repeat replaces the earlier finding (as a
dict would). Items opened before the scope was in the id are also looked up under their
old id (``legacy_item_id``) and go on under it for their own actor and namespace only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from memlife.model import parse_time
from memlife.plan import REVIEW_REASONS, Action, Decision, Reason
from memlife.review_queue.base import (
    ANSWERS,
    OPEN_STATES,
    WAITING,
    Carried,
    ReviewBackend,
    ReviewItem,
    content_item_id,
    item_id,
    legacy_item_id,
)

# (-priority, record id, reason, item id, decision): the queue's order, ties included
Entry = tuple[float, str, str, str, Decision]
# (item id, the content hash the open item holds, this night's decision, reason): an open
# item whose record's content changed since it was opened (renewed by the queue)
Changed = tuple[str, str, Decision, str]

CHUNK = 1024  # findings looked up in the backend at a time
# a record in a group the night acts on: its findings are not queued tonight (the group
# decides first), but an item already open about one still holds (review_sweep leaves it)
GROUP_ACTIONS = frozenset({Action.consolidate_candidate, Action.supersede_candidate})


def order(decision: Decision, reason: str, iid: str, waited: float = 0.0) -> Entry:
    """Highest priority first (``waited``: what a finding that waited gained), then record
    id, then reason code (unique per item)."""
    return (-((decision.priority or 0.0) + waited), decision.id, reason, iid, decision)


def _rank(entry: Entry) -> tuple[float, str, str]:
    return entry[0], entry[1], entry[2]


@dataclass
class ReviewCandidates:
    """``budget`` None keeps every new item (one call with every decision at hand)."""

    budget: int | None = None
    # a reviewer's `keep` on a finding time brings, resolved before this, has lapsed
    # (ReviewPolicy.keep_answers_days); None: a keep answers for good
    keep_lapsed_before: datetime | None = None
    listed: int = 0  # new items past the budget kept by name, waiting (ReviewPolicy)
    age_per_day: float = 0.0  # priority a waiting finding gains a day since first found
    at: datetime | None = None  # the night's cutoff: a waiting finding's age is read at it
    best: list[Entry] = field(default_factory=list)  # new items, pruned to budget + listed
    # of ``best``: items that wait already -> when first found (None: found again for other
    # content, so first found tonight); opened or listed, they are moved, not inserted
    waiting: dict[str, str | None] = field(default_factory=dict)
    # every waiting item found tonight (never pruned: at most what the queue lists): those
    # tonight's list leaves out are dropped from it, so it stays ``listed`` long
    waiting_found: set[str] = field(default_factory=set)
    new: int = 0  # new items found: opened + waiting
    carried: list[Carried] = field(default_factory=list)  # open or disputed, same content
    changed: list[Changed] = field(default_factory=list)  # open or disputed, content changed
    closed_earlier: int = 0  # findings resolved before, for this content: not reopened
    answered_records: int = 0  # records all of whose findings were resolved for this content
    renewed_after_resolve: int = 0  # new items: resolved for other content, changed since
    pair_changed: int = 0  # of ``changed``: same content, another newer record (POSSIBLE_UPDATE)
    moot: list[str] = field(default_factory=list)  # open items of content the record left
    # items found, by the run that opened them: a rerun's own items count against its budget
    by_run: Counter[str] = field(default_factory=Counter)
    pending: dict[str, tuple[Decision, str]] = field(default_factory=dict)  # not looked up
    # of ``pending``: findings of a record a group acts on tonight (consolidation): an open
    # item is carried (the finding still holds), nothing is opened or counted answered
    seen_only: set[str] = field(default_factory=set)
    # items whose finding this attempt left out (a rerun's, run_planning.reviewable): the
    # sweep of items not found again leaves them open
    withheld: list[str] = field(default_factory=list)

    def add(self, decisions: Iterable[Decision], backend: ReviewBackend | None = None) -> None:
        """The review findings of ``decisions``; looked up every CHUNK with a backend."""
        for d in decisions:
            if d.action is not Action.review and d.action not in GROUP_ACTIONS:
                continue
            for reason in d.reasons:
                if reason in REVIEW_REASONS:
                    iid = item_id(d.id, reason.value, d.actor_id, d.namespace)
                    self.pending[iid] = (d, reason.value)
                    if d.action is not Action.review:
                        self.seen_only.add(iid)
        if backend is not None and len(self.pending) >= CHUNK:
            self.settle(backend)

    def settle(self, backend: ReviewBackend) -> None:
        """Look the pending findings up: carried (content changed or not), answered (resolved
        for this content), or new. An item without a hash (opened before hashes were kept) is
        carried: the queue records this night's hash on it. An item a reviewer resolved for
        content the record no longer holds is followed by an item of its own for what came
        after (``content_item_id``), looked up next: a resolved item never changes."""
        if not self.pending:
            return
        ids = list(self.pending)
        legacy = {i: legacy_item_id(d.id, reason) for i, (d, reason) in self.pending.items()}
        existing = backend.get_many(ids + list(legacy.values()))
        lookups: list[tuple[str, ReviewItem | None, Decision, str, bool]] = []
        for i in ids:
            d, reason = self.pending[i]
            item = existing.get(i) or _same_scope(existing.get(legacy[i]), d)
            only = i in self.seen_only
            lookups.append((item.item_id if item is not None else i, item, d, reason, only))
        answered: dict[tuple[str, str, str], bool] = {}  # per record: every finding answered
        after_answer: list[str] = []  # items that follow one answered for today's content
        while lookups:
            later: list[tuple[str, Decision, str, bool]] = []
            for i, item, d, reason, only in lookups:
                if item is not None and _followed(item, d, self.keep_lapsed_before):
                    later.append((content_item_id(i, item.content_sha256 or ""), d, reason, only))
                    continue
                if only:  # an open item still holds: carried as it is; nothing else is filed
                    if item is not None and item.state in OPEN_STATES:
                        self.by_run[item.opened_run] += 1
                        self.carried.append((i, d.content_sha256))
                    continue
                key = (d.actor_id, d.namespace, d.id)
                answered[key] = self._sort(i, item, d, reason) and answered.get(key, True)
                if item is not None and item.state == "resolved" and item.content_sha256:
                    after_answer.append(content_item_id(i, item.content_sha256))
            found = backend.get_many([i for i, *_ in later]) if later else {}
            self.renewed_after_resolve += sum(
                1 for i, _, _, only in later if i not in found and not only
            )
            lookups = [(i, found.get(i), d, reason, only) for i, d, reason, only in later]
        while after_answer:
            # the record went back to content a reviewer answered: an item opened for the
            # content it held between has nothing left to ask (open, it would never be
            # carried or renewed again); the queue closes it. Past items memlife closed
            # (no answer) the chain goes on to the item that followed them.
            chained = backend.get_many(after_answer).values()
            # (a waiting one too: found no more, it would wait for ever; review of session 32).
            # A disputed one stands: a dispute guards its record until a person resolves it,
            # over content changes too (audit 51b: closed here, the record lost it)
            self.moot += [i.item_id for i in chained if i.state in ("open", WAITING)]
            after_answer = [content_item_id(i.item_id, i.content_sha256) for i in chained
                            if i.state == "resolved" and not _answers(i, self.keep_lapsed_before)
                            and i.content_sha256]  # fmt: skip
        self.answered_records += sum(answered.values())
        self.pending.clear()
        self.seen_only.clear()
        self._prune(over=True)

    def _sort(self, i: str, item: ReviewItem | None, d: Decision, reason: str) -> bool:
        """File one finding under item ``i``; True when a reviewer answered it already."""
        if item is None:
            self.best.append(order(d, reason, i))
            self.new += 1
            return False
        if item.state == WAITING:  # new again, older: it competes for tonight's budget
            first = None if _other_finding(item, d) else (item.first_seen_at or item.opened_at)
            self.best.append(order(d, reason, i, self._gained(first)))
            self.waiting[i] = first
            self.waiting_found.add(i)
            self.new += 1
            return False
        self.by_run[item.opened_run] += 1
        if item.state in OPEN_STATES:
            if _other_finding(item, d):
                self.changed.append((i, item.content_sha256 or "", d, reason))
                self.pair_changed += not _other_content(item, d)
            else:
                self.carried.append((i, d.content_sha256))
        elif item.state == "resolved":
            self.closed_earlier += 1
            return True
        return False

    def _gained(self, first_seen: str | None) -> float:
        """Priority a finding first found at ``first_seen`` has gained by waiting."""
        if first_seen is None or self.at is None or not self.age_per_day:
            return 0.0
        try:
            days = (self.at - parse_time(first_seen)).total_seconds() / 86400
        except (TypeError, ValueError):  # a row edited by hand: no gain, the night goes on
            return 0.0
        return max(0.0, days) * self.age_per_day

    def _prune(self, *, over: bool = False) -> None:
        """Keep the ``budget + listed`` best new items (``over``: only once well past that)."""
        if self.budget is None:
            return
        kept = self.budget + self.listed
        if over and len(self.best) < 2 * kept + CHUNK:
            return
        self.best = self.opened(kept)
        ids = {e[3] for e in self.best}
        self.waiting = {i: t for i, t in self.waiting.items() if i in ids}

    def compact(self, backend: ReviewBackend) -> None:
        """Settle, and keep only the budget's best (a batch's outcome, before it is held)."""
        self.settle(backend)
        self._prune()

    def absorb(self, other: ReviewCandidates) -> None:
        """Take ``other``'s findings (it is left empty): a run that plans batch after batch
        holds one bounded set, not one per batch (a batch of 100 shards keeps all of its own)."""
        self.best += other.best
        self.new += other.new
        self.carried += other.carried
        self.changed += other.changed
        self.closed_earlier += other.closed_earlier
        self.answered_records += other.answered_records
        self.renewed_after_resolve += other.renewed_after_resolve
        self.pair_changed += other.pair_changed
        self.moot += other.moot
        self.by_run.update(other.by_run)
        # getattr: a child's outcome pickled by a version without waiting items
        self.waiting.update(getattr(other, "waiting", {}))
        self.waiting_found |= getattr(other, "waiting_found", set())
        other.waiting, other.waiting_found = {}, set()
        self.pending.update(other.pending)
        self.seen_only |= other.seen_only
        other.seen_only = set()
        self.withheld += other.withheld
        other.withheld = []
        other.best, other.new, other.carried, other.closed_earlier = [], 0, [], 0
        other.answered_records = other.renewed_after_resolve = other.pair_changed = 0
        other.moot = []
        other.by_run = Counter()
        other.changed = []
        other.pending = {}
        self._prune(over=True)

    @property
    def found(self) -> int:
        """Items found (settled ones): new, carried (changed or not) and closed earlier."""
        return self.new + len(self.carried) + len(self.changed) + self.closed_earlier

    def opened(self, budget: int) -> list[Entry]:
        """The ``budget`` best new items, best first (settle first)."""
        return sorted(self.best, key=_rank)[:budget]

    @classmethod
    def merge(
        cls, parts: Sequence[ReviewCandidates], budget: int, backend: ReviewBackend
    ) -> ReviewCandidates:
        """Every process's findings as one (each settled against ``backend`` first)."""
        first = parts[0] if parts else cls()
        out = cls(budget, first.keep_lapsed_before, first.listed, first.age_per_day, first.at)
        for p in parts:
            p.settle(backend)
            out.best += p.opened(budget + out.listed)
            out.waiting.update(getattr(p, "waiting", {}))
            out.waiting_found |= getattr(p, "waiting_found", set())
            out.new += p.new
            out.carried += p.carried
            out.changed += p.changed
            out.closed_earlier += p.closed_earlier
            out.answered_records += p.answered_records
            out.renewed_after_resolve += p.renewed_after_resolve
            out.pair_changed += p.pair_changed
            out.moot += p.moot
            out.by_run.update(p.by_run)
            out.withheld += p.withheld
        out._prune()
        return out


def _followed(item: ReviewItem, d: Decision, lapsed_before: datetime | None) -> bool:
    """A resolved item that does not answer tonight's finding: it was about another finding
    (content or pair), memlife closed it (no reviewer answered), or its `keep` has lapsed.
    The finding goes on under the item that follows it (``content_item_id``)."""
    return item.state == "resolved" and (
        not _answers(item, lapsed_before) or _other_finding(item, d)
    )


# findings that time brings back on unchanged content: a keep answers them for a while
_TIME_BORN = frozenset({Reason.STALE_VERIFICATION.value, Reason.LOW_SCORE.value})
# decisions that take the record out of service: their answer holds while it stays out
_REMOVES = frozenset({"delete", "supersede"})


def _answers(item: ReviewItem, lapsed_before: datetime | None = None) -> bool:
    """A reviewer's decision that answers the finding (while it is the same). A `verify`
    answers a stale verification only until it is stale again: it stamped the record, so
    the finding back means that stamp has aged. A `keep` on a finding time brings (stale,
    low score) answers it until ``lapsed_before`` passes its resolve time: a year on, the
    record's keeper is asked again, not trusted for good."""
    if item.reason == Reason.STALE_VERIFICATION.value and item.decision == "verify":
        return False
    if item.decision in _REMOVES:
        # a finding is made on an active record only: one a reviewer deleted or superseded
        # is back (an import of the same file, a restore), and the answer did not hold;
        # counted answered, the record stayed for good unasked (session 30 review)
        return False
    if (
        item.decision == "keep"
        and item.reason in _TIME_BORN
        and lapsed_before is not None
        and _resolved_before(item, lapsed_before)
    ):
        return False
    return item.decision in ANSWERS


def _resolved_before(item: ReviewItem, when: datetime) -> bool:
    """Resolved before ``when``; a resolve time that is missing, naive or unreadable (a row
    edited by hand) reads as long ago: the record is asked about again, the night goes on."""
    try:
        return item.resolved_at is None or parse_time(item.resolved_at) < when
    except ValueError:
        return True


def _other_finding(item: ReviewItem, d: Decision) -> bool:
    """The item was opened (or resolved) on another finding than tonight's: content the
    record no longer holds, or, for a POSSIBLE_UPDATE item, another newer record. A keep
    answered "B does not replace this"; whether C does is a new question."""
    return _other_content(item, d) or (
        item.reason == Reason.POSSIBLE_UPDATE.value
        and item.pair_id is not None
        and d.pair is not None
        and item.pair_id != d.pair
    )


def _other_content(item: ReviewItem, d: Decision) -> bool:
    """The item was opened (or resolved) on content the record no longer holds."""
    old, now = item.content_sha256, d.content_sha256
    return old is not None and now is not None and old != now


def _same_scope(item: ReviewItem | None, d: Decision) -> ReviewItem | None:
    """A legacy item, when it is about this actor's and namespace's record."""
    if item is not None and (item.actor_id, item.namespace) == (d.actor_id, d.namespace):
        return item
    return None
