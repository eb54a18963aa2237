"""Review as a workflow: items that persist across nights until a reviewer resolves them.

An item is keyed by (actor, namespace, record, reason), so the same finding on the next
night updates the open item (``nights`` + 1, last seen) instead of queueing it again; if
the record's content changed since the item was opened, the item is renewed for the new
content (nights from 1). A POSSIBLE_UPDATE item is a *pair*: the older record and
``pair_id``, the newer one that probably replaces it; another newer record is another
finding, so it renews an open item (the pair it names is tonight's) and asks again after a
resolved one, as changed content does.
New items are opened by priority (plan.Planner.priority: type, sensitivity, confidence,
access) up to the policy's nightly budget; what does not fit waits and is counted.

Resolving (``memlife review resolve``) is a manual run: journaled, applied, receipted with
the reviewer's identity, plus a run manifest and receipt:

    keep      nothing changes; the item is closed: this finding is answered for this
              content (a later content, or another pair, is asked again, under a new item)
    verify    last_verified_at = now (the record was checked against its source)
    supersede the record is superseded by the pair's newer record (or ``--by`` ID)
    delete    the record is deleted (never a legal hold)
    dispute   the item stays unresolved as *disputed*: the record is never deleted
              (the planner turns any delete into retain + DISPUTED) until resolved

Each item holds the content hash of the record it was opened on. verify, supersede and
delete act on that content only: refused when the record changed since (a later night renews
the item for the new content), or when the item predates hashes (unknown until the next
night records it). keep and dispute change no record and are never refused for that.

Items live in the store's SQLite file (sqlite.py), else, with ``MEMLIFE_STATE=dynamodb://…``,
in the state table (dynamodb.py), else in ``$MEMLIFE_HOME/reviews.db``. Items hold ids,
codes, numbers and content hashes, never content.
"""

from __future__ import annotations

import builtins  # a method here is named list
import json
from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from enum import StrEnum
from typing import Any

from memlife.errors import InputError, NotFoundError
from memlife.model import Status
from memlife.namespaces import glob_match
from memlife.plan import REVIEW_REASONS, Decision, Reason
from memlife.review_queue.base import (
    COLUMNS,
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
from memlife.review_queue.unfinished import earlier_attempt, same_request, unfinished

__all__ = [
    "COLUMNS",
    "ReviewBackend",
    "ReviewCandidates",
    "ReviewDecision",
    "ReplacementNotFound",
    "ReviewError",
    "ReviewItem",
    "ReviewItemNotFound",
    "ReviewQueue",
    "item_id",
    "legacy_item_id",
    "open_backend",
    "resolve",
]


class ReviewDecision(StrEnum):
    keep = "keep"
    verify = "verify"
    supersede = "supersede"
    delete = "delete"
    dispute = "dispute"


class ReviewError(InputError):
    """A resolve request that cannot be carried out; the message names the item and why."""


class ReviewItemNotFound(ReviewError, NotFoundError):
    """No review item has this id (exit 1, as any "not found")."""


class ReplacementNotFound(ReviewError, NotFoundError):
    """``supersede --by ID`` where no record has that id (exit 1, as any "not found"); a
    record that exists but is not active is a ReviewError (exit 2)."""


# decisions that act on the record's content as reviewed: they need the record to hold the
# content the item was opened on (keep and dispute change no record and always proceed)
ACTS_ON_CONTENT = frozenset({"verify", "supersede", "delete"})


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
        (over budget), review_waiting_listed (of those, kept by name), review_opened_waited
        (opened tonight after waiting), review_closed_earlier (findings resolved before for the content the
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
        for _, _, code, i, d in waiting:
            if i not in found.waiting:
                items.append(item(i, code, d, WAITING))
            elif found.waiting[i] is None:  # found again for other content: first found now
                moved.append(item(i, code, d, WAITING))
        # the record changed since the item was opened: the finding is about the new content
        # now (a reviewer's resolve of the old one is refused); state and decision stay
        renewed = [(old, item(i, code, d)) for i, old, d, code in found.changed]
        # a waiting item listed again, same finding: seen tonight (nights + 1, last seen), as
        # a carried one (not counted as one)
        seen = [(i, d.content_sha256) for _, _, _, i, d in waiting
                if i in found.waiting and found.waiting[i] is not None]  # fmt: skip
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


# -- resolving an item -------------------------------------------------------------------------
def resolve(
    store: Any, iid: str, decision: ReviewDecision | str, reviewer: str, *,
    by: str | None = None, policy: Any = None, receipts: Any = None, now: datetime | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Carry out a reviewer's decision on one item: journaled, receipted with the reviewer."""
    from memlife.audit import as_sink
    from memlife.journal import OpKind, OpState, open_journal
    from memlife.quarantine import manual_run

    decision = ReviewDecision(decision)
    if by is not None and decision is not ReviewDecision.supersede:  # else silently ignored
        raise ReviewError(f"--by is for --decision supersede, not {decision.value}")
    if not reviewer or not reviewer.strip():
        raise ReviewError("a reviewer identity is required (--reviewer)")
    queue = ReviewQueue.for_store(store)
    item = queue.get(iid)
    if item is None:
        raise ReviewItemNotFound(f"review item {iid}: not found")
    if item.state == "resolved":
        raise ReviewError(
            f"review item {iid}: already resolved ({item.decision} by {item.reviewer})"
        )
    record = store.get(item.record_id)
    if record is not None and (record.actor_id, record.namespace) != (
        item.actor_id,
        item.namespace,
    ):
        # the id was freed and taken by another actor or namespace: not this item's record
        # (invariant 8); the item can only be closed (keep), and nothing is read or written
        record = None
    kind = {ReviewDecision.supersede: OpKind.supersede, ReviewDecision.delete: OpKind.delete}.get(
        decision, OpKind.review
    )
    # the same decision killed part way (after the delete, before its receipt): finished now
    earlier = earlier_attempt(open_journal(store), item, decision.value, kind)
    if earlier and not same_request(as_sink(receipts), earlier[0], item, decision.value,
                                    reviewer, by or item.pair_id):  # fmt: skip
        raise ReviewError(
            f"review item {iid}: an earlier {decision.value} of it (run {earlier[0].run_id}) "
            "is unfinished and was another request (another reviewer or replacement): the "
            "next nightly run completes it, then the item can be answered"
        )
    if record is None and decision is not ReviewDecision.keep and not earlier:
        raise ReviewError(
            f"review item {iid}: record {item.record_id} no longer exists in "
            f"{item.actor_id} {item.namespace}"
        )
    replacement = by or item.pair_id
    if decision is ReviewDecision.supersede:
        if not replacement:
            raise ReviewError(f"review item {iid}: supersede needs a pair item or --by RECORD_ID")
        if replacement == item.record_id:  # invariant 3: a record cannot replace itself
            raise ReviewError(f"review item {iid}: a record cannot be superseded by itself")
        newer = store.get(replacement)
        if newer is None and by is not None:
            raise ReplacementNotFound(f"review item {iid}: replacement {by}: no such record")
        if newer is not None and (newer.actor_id, newer.namespace) != (
            item.actor_id,
            item.namespace,
        ):
            raise ReviewError(
                f"review item {iid}: replacement {replacement} is in another actor/namespace"
            )
        if newer is None or newer.status is not Status.active:
            now_by = newer.provenance.replaced_by if newer is not None else None
            raise ReviewError(
                f"review item {iid}: replacement {replacement} is not an active record"
                + (" (it no longer exists; name one with --by RECORD_ID)" if newer is None
                   else f" (it was superseded by {now_by}: use --by {now_by})" if now_by
                   else f" ({newer.status.value})")
            )  # fmt: skip
    if record is not None and decision.value in ACTS_ON_CONTENT:
        # The item is about the content it was opened on (or last renewed for by a night).
        # A hash of None is an item opened before hashes were kept: which content it was
        # about is unknown, so, as for changed content, it is refused until the next night
        # records the hash on it (keep and dispute are not affected).
        if item.content_sha256 is None:
            raise ReviewError(
                f"review item {iid}: opened before content hashes were kept, so the content "
                f"it was about is unknown; {decision.value} is refused until the next nightly "
                "run records it (keep or dispute may proceed)"
            )
        if record.sha256 != item.content_sha256:
            raise ReviewError(
                f"review item {iid}: record {item.record_id} changed since the item was opened "
                f"(content sha256 {item.content_sha256[:12]}… now {record.sha256[:12]}…); "
                f"{decision.value} is refused: the next nightly run reopens the item for the "
                "new content (keep or dispute may proceed)"
            )
    if (
        record is not None
        and decision is ReviewDecision.verify
        and record.status is not Status.active
    ):
        # a superseded or quarantined record is out of recall: nothing to verify it against
        raise ReviewError(
            f"review item {iid}: record {item.record_id} is {record.status.value}, not active; "
            "verify is refused (keep or dispute may proceed)"
        )
    held = record is not None and record.held
    if held and decision in (
        ReviewDecision.supersede,
        ReviewDecision.delete,
        ReviewDecision.verify,
    ):
        raise ReviewError(f"review item {iid}: record {item.record_id} is under legal hold")
    deletes = decision is ReviewDecision.delete and not earlier
    trail = _followers(store, queue, iid, record) if deletes else []
    # one run per decision on one item by one reviewer: two items of a record resolved at the
    # same ``now`` (a review UI's batch time) are two runs, each with its own receipt
    request = {"item": iid, "decision": decision.value, "reviewer": reviewer}
    if earlier:
        request["finishes"] = earlier[0].run_id
    run = manual_run(store, f"review_{decision.value}", [item.record_id], policy=policy,
                     receipts=receipts, now=now, request=request)  # fmt: skip
    run.executor.reviewer = reviewer
    again = queue.get(iid)  # under the lease now: another reviewer may have resolved it meanwhile
    if again is None or again.state == "resolved":
        run.extra["refused"] = "ALREADY_RESOLVED"
        run.finish()
        by_whom = f" ({again.decision} by {again.reviewer})" if again is not None else ""
        raise ReviewError(f"review item {iid}: already resolved{by_whom}")
    if earlier:  # that attempt's own operations, carried to their receipts by this run
        op, todo = earlier[0], [o for o in earlier if unfinished(o)]
        run.extra["finished_run"] = op.run_id
    else:
        todo = _new_ops(run, item, decision, reviewer, kind, record, replacement, trail)
        op = todo[0]
    from memlife.apply.lifecycle import run_lifecycle
    from memlife.journal import Outcome

    ran = run_lifecycle(run.executor, run.journal.plan(todo), run.tally) if todo else []
    done = next((o for o in ran if o.operation_id == op.operation_id), op)
    if earlier:  # the attempt that left them gets its run receipt too
        run.seal_abandoned()
    kept = decision is ReviewDecision.delete and done.outcome is Outcome.skipped
    if kept:  # a hold placed on a record superseded by it since the check: it stays
        run.extra["refused"] = "HELD_SOURCE"
    elif done.state is OpState.RECEIPTED or done.state is OpState.APPLIED:
        state = "disputed" if decision is ReviewDecision.dispute else "resolved"
        queue.close(iid, state=state, decision=decision.value, reviewer=reviewer, at=run.cutoff,
                    operation_id=done.operation_id)  # fmt: skip
        if decision in (ReviewDecision.supersede, ReviewDecision.delete):
            # the record is gone from recall: its other open items have nothing left to decide
            for other in queue.for_record(item.record_id, item.actor_id, item.namespace):
                if other.item_id != iid and other.state != "resolved":
                    queue.close(other.item_id, state="resolved", decision=decision.value,
                                reviewer=reviewer, at=run.cutoff, operation_id=done.operation_id)  # fmt: skip
    run.extra["reviewer"] = reviewer
    run.extra["item_id"] = iid
    summary = run.finish()
    if kept:
        raise ReviewError(
            f"review item {iid}: record {item.record_id} was kept: a record it replaces is "
            "under legal hold (a held source pins its replacement); the item stays open"
        )
    resolved = queue.get(iid)
    if resolved is None:  # the queue lost the item it just closed: not a reviewer's mistake
        raise RuntimeError(f"review item {iid} vanished while it was resolved")
    summary["item"] = resolved.as_json()
    return summary


def _new_ops(
    run: Any, item: ReviewItem, decision: ReviewDecision, reviewer: str, kind: Any,
    record: Any, replacement: str | None, trail: builtins.list[Any],
) -> builtins.list[Any]:  # fmt: skip
    """The decision's operation, then the deletes of the records superseded by the one
    deleted (each its own receipted delete, decided after it: the delete applier lets a
    source go only once its replacement does)."""
    from memlife.journal import OpKind

    op = run.executor.new_op(
        kind, item.actor_id, item.namespace, item.record_id,
        [f"REVIEW_{decision.value.upper()}", item.reason],
        # the precondition the applier re-checks (stale()): the reviewed content, so a change
        # between this check and the apply is STALE_PRECONDITION and nothing is done
        item.content_sha256 if decision.value in ACTS_ON_CONTENT
        else record.sha256 if record is not None else None,
        replacement=replacement if decision is ReviewDecision.supersede else None,
        payload=json.dumps({"decision": decision.value}),
        key_ids=[item.item_id, decision.value, reviewer],
    )  # fmt: skip
    follow = [
        run.executor.new_op(OpKind.delete, s.actor_id, s.namespace, s.id,
                            [Reason.ALREADY_SUPERSEDED.value, Reason.REPLACEMENT_DELETED.value],
                            s.sha256, key_ids=[item.item_id, decision.value, reviewer, s.id])
        for s in trail
    ]  # fmt: skip
    return [op, *follow]


def _followers(store: Any, queue: ReviewQueue, iid: str, record: Any) -> builtins.list[Any]:
    """The superseded records that would go with ``record`` (memlife/orphans.py), nearest
    first; a delete is refused, before anything is written, while one of them is held (a
    held source pins its replacement, as at night) or disputed (never deleted until its
    item is resolved)."""
    from memlife.orphans import followers

    if record is None:
        return []
    trail = followers(store, record)
    held = sorted(s.id for s in trail if s.held)
    if held:
        raise ReviewError(
            f"review item {iid}: record {record.id} replaces {', '.join(held[:5])}, under "
            "legal hold: a held source pins its replacement, so the delete is refused "
            "(release the hold first, or keep)"
        )
    disputed = sorted({s.id for s in trail} & queue.disputed(record.actor_id, record.namespace))
    if disputed:
        raise ReviewError(
            f"review item {iid}: record {record.id} replaces {', '.join(disputed[:5])}, "
            "disputed: a disputed record is never deleted until its item is resolved, and it "
            "would go with its replacement; the delete is refused"
        )
    return trail
