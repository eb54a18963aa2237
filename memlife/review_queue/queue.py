"""The review queue's rules over a backend: carry open items forward, open new ones by
priority up to the night's budget, list the best that wait, close (package doc)."""

from __future__ import annotations

import builtins  # a method here is named list
from collections import Counter
from collections.abc import Iterable
from datetime import datetime

from memlife.namespaces import glob_match
from memlife.plan import REVIEW_REASONS, Decision, Reason
from memlife.review_queue.base import (
    OPEN_STATES,
    WAITING,
    ReviewBackend,
    ReviewItem,
    content_item_id,
    item_id,
    legacy_item_id,
    sort_key,
)
from memlife.review_queue.candidates import ReviewCandidates


def open_backend(store: object, *, create: bool = True) -> ReviewBackend:
    """The store's SQLite file; else the state table of $MEMLIFE_STATE; else a file under
    $MEMLIFE_HOME (one machine only). ``create=False`` (a dry run) creates nothing."""
    from memlife.state import uses_remote_state

    remote = uses_remote_state(store)
    if remote is not None:
        from memlife.review_queue.dynamodb import DynamoReviews

        return DynamoReviews(remote)
    from memlife.review_queue.sqlite import FILENAME, SCHEMA, TABLE, SqliteReviews
    from memlife.state.local import side_connection

    conn, lock = side_connection(store, FILENAME, SCHEMA, TABLE, create=create)
    return SqliteReviews(conn, lock, migrate=create)


class ReviewQueue:
    """The queueing rules over a backend: carry, open by priority up to a budget, close."""

    def __init__(self, backend: ReviewBackend) -> None:
        self.backend = backend

    @classmethod
    def for_store(cls, store: object, *, create: bool = True) -> ReviewQueue:
        return cls(open_backend(store, create=create))

    # -- reads ---------------------------------------------------------------------------------
    def get(self, iid: str) -> ReviewItem | None:
        return self.backend.get_many([iid]).get(iid)

    def list(
        self, *, owner: str | None = None, reason: str | None = None, namespace: str | None = None,
        actor: str | None = None, states: Iterable[str] = OPEN_STATES,
    ) -> list[ReviewItem]:  # fmt: skip
        """Items in ``states``, highest priority first; ``namespace`` may be a glob, read as
        the policy and a run's scope read one (``*`` one segment, ``**`` any number)."""
        items = [
            i for i in self.backend.list(states)
            if (owner is None or i.owner == owner) and (reason is None or i.reason == reason)
            and (actor is None or i.actor_id == actor)
            and (namespace is None or glob_match(namespace, i.namespace))
        ]  # fmt: skip
        return sorted(items, key=sort_key)

    def for_record(
        self, record_id: str, actor_id: str, namespace: str
    ) -> builtins.list[ReviewItem]:
        """Every item about one record of this actor and namespace: one per review reason
        (an item from before the scope was in the id included), and the items that follow
        one resolved for other content (``content_item_id``)."""
        return self.for_records([(record_id, actor_id, namespace)])

    def for_records(self, records: Iterable[tuple[str, str, str]]) -> builtins.list[ReviewItem]:
        """:meth:`for_record` of many (record id, actor, namespace), looked up together."""
        scope: dict[str, tuple[str, str]] = {}  # item id -> the (actor, namespace) it must have
        for record_id, actor_id, namespace in records:
            for r in REVIEW_REASONS:
                scope[item_id(record_id, r.value, actor_id, namespace)] = (actor_id, namespace)
                scope[legacy_item_id(record_id, r.value)] = (actor_id, namespace)
        found: builtins.list[ReviewItem] = []
        while scope:
            items = [
                i for i in self.backend.get_many(list(scope)).values()
                if (i.actor_id, i.namespace) == scope[i.item_id]
            ]  # fmt: skip
            found += items
            scope = {content_item_id(i.item_id, i.content_sha256): (i.actor_id, i.namespace)
                     for i in items if i.state == "resolved" and i.content_sha256 is not None}  # fmt: skip
        return sorted(found, key=sort_key)

    def disputed(self, actor_id: str, namespace: str) -> frozenset[str]:
        return self.backend.disputed(actor_id, namespace)

    # -- the nightly queueing ------------------------------------------------------------------
    def queue(
        self, decisions: Iterable[Decision] | ReviewCandidates, *, budget: int, run_id: str,
        at: datetime, dry_run: bool = False, listed: int = 0, age_per_day: float = 0.0,
    ) -> Counter[str]:  # fmt: skip
        """Carry open items forward, open new ones by priority up to ``budget``, and keep the
        next ``listed`` by name as waiting (first found when; they gain ``age_per_day`` of
        priority a day on later nights).

        ``decisions``: a run's decisions, or its findings already gathered while planning
        (ReviewCandidates: bounded, merged over the run's processes; ``listed`` and
        ``age_per_day`` are then theirs).
        Returns counts: review_carried (already open), review_opened, review_waiting
        (over budget), review_waiting_listed (of those, kept by name), review_waiting_dropped
        (listed before, no room tonight: off the list), review_opened_waited (opened tonight
        after waiting), review_closed_earlier (findings resolved before for the content the
        record holds: not reopened), review_answered (records all of whose findings are
        such: nothing is left for a human, so the run's "reviewed" leaves them out), and,
        where any, review_content_changed (carried items whose record's content changed
        since they were opened: renewed for the new content, nights from 1; counted in
        carried), review_pair_changed (carried POSSIBLE_UPDATE items whose newer record
        is another one tonight: renewed for that pair, nights from 1; counted in carried),
        review_asked_again (new items after one resolved for other content or pair) and
        review_moot_closed (open items of content the record no longer holds, closed: it
        went back to content a reviewer had answered).
        """
        counts: Counter[str] = Counter()
        if isinstance(decisions, ReviewCandidates):
            found = decisions
        else:
            found = ReviewCandidates(None, None, listed, age_per_day, at)
            found.add(decisions)
        found.settle(self.backend)
        if not found.found:
            return counts
        # a rerun of the night (same run id) has spent what its first attempt opened
        room = max(0, budget - found.by_run[run_id])
        ranked = found.opened(room + found.listed)
        opened, waiting = ranked[:room], ranked[room:]
        counts["review_carried"] = len(found.carried) + len(found.changed)
        counts["review_closed_earlier"] = found.closed_earlier
        counts["review_answered"] = found.answered_records
        counts["review_opened"] = len(opened)
        counts["review_waiting"] = found.new - len(opened)
        if waiting:
            counts["review_waiting_listed"] = len(waiting)
        # waiting items tonight's list has no room for: dropped (counted as waiting, unnamed)
        dropped = sorted(found.waiting_found - {e[3] for e in ranked})
        if dropped:
            counts["review_waiting_dropped"] = len(dropped)
        if waited := sum(1 for e in opened if e[3] in found.waiting):
            counts["review_opened_waited"] = waited
        for _, _, code, _, _ in opened:
            counts[f"review_reason:{code}"] += 1
        if len(found.changed) > found.pair_changed:
            counts["review_content_changed"] = len(found.changed) - found.pair_changed
        if found.pair_changed:
            counts["review_pair_changed"] = found.pair_changed
        if found.renewed_after_resolve:
            counts["review_asked_again"] = found.renewed_after_resolve
        if found.moot:
            counts["review_moot_closed"] = len(found.moot)
        if dry_run:
            return counts
        now = at.isoformat()
        for iid in found.moot:  # the record went back to content a reviewer answered
            self.close(iid, state="resolved", decision="answered_earlier",
                       reviewer=f"memlife:{run_id}", at=at, operation_id=None)  # fmt: skip

        def item(i: str, code: str, d: Decision, state: str = "open",
                 first: str | None = None) -> ReviewItem:  # fmt: skip
            # only a POSSIBLE_UPDATE item is a pair: on the record's other items a pair would
            # be the replacement a bare `supersede` takes
            pair = d.pair if code == Reason.POSSIBLE_UPDATE.value else None
            return ReviewItem(
                i, d.id, code, pair, d.actor_id, d.namespace, d.memory_type, d.owner,
                float(d.priority or 0.0), state, None, None, 1, run_id, now, run_id, now,
                None, None, d.content_sha256, first or now,
            )  # fmt: skip

        items = [item(i, code, d) for _, _, code, i, d in opened if i not in found.waiting]
        # an item that waited opens in place (opened tonight, first found when it was)
        moved = [item(i, code, d, first=found.waiting[i]) for _, _, code, i, d in opened
                 if i in found.waiting]  # fmt: skip
        seen: list[tuple[str, str | None]] = []  # listed again: nights + 1, last seen
        for _, _, code, i, d in waiting:
            if i not in found.waiting:
                items.append(item(i, code, d, WAITING))
            elif found.waiting[i] is None:  # found again for other content: first found now
                moved.append(item(i, code, d, WAITING))
            else:  # the same finding: seen tonight, as a carried item (not counted as one)
                seen.append((i, d.content_sha256))
        # the record changed since the item was opened: the finding is about the new content
        # now (a reviewer's resolve of the old one is refused); state and decision stay
        renewed = [(old, item(i, code, d)) for i, old, d, code in found.changed]
        self.backend.write_night(
            [*found.carried, *seen], items, run_id, now, renewed, moved, dropped
        )
        return counts

    def close(self, iid: str, *, state: str, decision: str, reviewer: str, at: datetime,
              operation_id: str | None) -> bool:  # fmt: skip
        """Record a decision; False when the item was resolved already (nothing changes)."""
        return self.backend.close(
            iid, state=state, decision=decision, reviewer=reviewer,
            resolved_at=at.isoformat() if state == "resolved" else None,
            operation_id=operation_id,
        )  # fmt: skip
