"""Review as a workflow: items that persist across nights until a reviewer resolves them.

An item is keyed by (record, reason), so the same finding on the next night updates the
open item (``nights`` + 1, last seen) instead of queueing it again. A POSSIBLE_UPDATE item
is a *pair*: the older record and ``pair_id``, the newer one that probably replaces it.
New items are opened by priority (plan.Planner.priority: type, sensitivity, confidence,
access) up to the policy's nightly budget; what does not fit waits and is counted.

Resolving (``memlife review resolve``) is a manual run: journaled, applied, receipted with
the reviewer's identity, plus a run manifest and receipt:

    keep      nothing changes; the item is closed and not reopened for this reason
    verify    last_verified_at = now (the record was checked against its source)
    supersede the record is superseded by the pair's newer record (or ``--by`` ID)
    delete    the record is deleted (never a legal hold)
    dispute   the item stays unresolved as *disputed*: the record is never deleted
              (the planner turns any delete into retain + DISPUTED) until resolved

The table lives in the store's SQLite file, else ``$MEMLIFE_HOME/reviews.db``. Items hold
ids, codes and numbers, never content.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from memlife.errors import InputError
from memlife.model import RetentionClass, Status
from memlife.plan import REVIEW_REASONS, Action, Decision

SCHEMA = """
CREATE TABLE IF NOT EXISTS review_items (
    item_id TEXT PRIMARY KEY,
    record_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    pair_id TEXT,
    actor_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    memory_type TEXT,
    owner TEXT,
    priority REAL NOT NULL,
    state TEXT NOT NULL,          -- open | disputed | resolved
    decision TEXT,
    reviewer TEXT,
    nights INTEGER NOT NULL,
    opened_run TEXT NOT NULL,
    opened_at TEXT NOT NULL,
    last_seen_run TEXT NOT NULL,
    last_seen_at TEXT NOT NULL,
    resolved_at TEXT,
    operation_id TEXT
);
CREATE INDEX IF NOT EXISTS review_items_record ON review_items (record_id);
CREATE INDEX IF NOT EXISTS review_items_state ON review_items (state, actor_id, namespace);
"""
_COLS = (
    "item_id", "record_id", "reason", "pair_id", "actor_id", "namespace", "memory_type", "owner",
    "priority", "state", "decision", "reviewer", "nights", "opened_run", "opened_at",
    "last_seen_run", "last_seen_at", "resolved_at", "operation_id",
)  # fmt: skip


class ReviewDecision(StrEnum):
    keep = "keep"
    verify = "verify"
    supersede = "supersede"
    delete = "delete"
    dispute = "dispute"


class ReviewError(InputError):
    """A resolve request that cannot be carried out; the message names the item and why."""


@dataclass
class ReviewItem:
    item_id: str
    record_id: str
    reason: str
    pair_id: str | None
    actor_id: str
    namespace: str
    memory_type: str | None
    owner: str | None
    priority: float
    state: str
    decision: str | None
    reviewer: str | None
    nights: int
    opened_run: str
    opened_at: str
    last_seen_run: str
    last_seen_at: str
    resolved_at: str | None
    operation_id: str | None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def item_id(record_id: str, reason: str) -> str:
    return "rv-" + hashlib.sha256(f"{record_id}\x1f{reason}".encode()).hexdigest()[:16]


class ReviewQueue:
    def __init__(
        self, connection: sqlite3.Connection, lock: AbstractContextManager[Any] | None = None,
        *, create: bool = True,
    ) -> None:  # fmt: skip
        self.connection = connection
        self.lock: AbstractContextManager[Any] = lock if lock is not None else nullcontext()
        with self.lock:
            if create:
                self.connection.executescript(SCHEMA)
            else:  # a dry run: read what exists, create nothing in the store's file
                q = "SELECT 1 FROM sqlite_master WHERE type='table' AND name='review_items'"
                if self.connection.execute(q).fetchone() is None:
                    self.connection = sqlite3.connect(":memory:", check_same_thread=False,
                                                      isolation_level=None)  # fmt: skip
                    self.connection.executescript(SCHEMA)

    @classmethod
    def for_store(cls, store: object, *, create: bool = True) -> ReviewQueue:
        conn = getattr(store, "connection", None)
        if isinstance(conn, sqlite3.Connection):
            return cls(conn, getattr(store, "lock", None), create=create)
        path = Path(os.environ.get("MEMLIFE_HOME", ".memlife")) / "reviews.db"
        path.parent.mkdir(parents=True, exist_ok=True)
        own = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        return cls(own, threading.RLock(), create=create)

    # -- reads ---------------------------------------------------------------------------------
    def _select(self, where: str = "", args: Sequence[Any] = ()) -> list[ReviewItem]:
        q = f"SELECT {', '.join(_COLS)} FROM review_items {where}"
        with self.lock:
            return [ReviewItem(*row) for row in self.connection.execute(q, list(args))]

    def get(self, iid: str) -> ReviewItem | None:
        found = self._select("WHERE item_id=?", (iid,))
        return found[0] if found else None

    def list(
        self, *, owner: str | None = None, reason: str | None = None, namespace: str | None = None,
        actor: str | None = None, states: Iterable[str] = ("open", "disputed"),
    ) -> list[ReviewItem]:  # fmt: skip
        states = list(states)
        where = [f"state IN ({','.join('?' * len(states))})"]
        args: list[Any] = [*states]
        for col, val in (("owner", owner), ("reason", reason), ("actor_id", actor)):
            if val is not None:
                where.append(f"{col}=?")
                args.append(val)
        if namespace is not None:
            where.append("namespace GLOB ?")  # a glob like the policy's (fnmatch-like)
            args.append(namespace)
        return self._select(
            "WHERE " + " AND ".join(where) + " ORDER BY priority DESC, opened_at, item_id", args
        )

    def disputed(self, actor_id: str, namespace: str) -> frozenset[str]:
        with self.lock:
            rows = self.connection.execute(
                "SELECT record_id FROM review_items WHERE state='disputed' AND actor_id=? AND namespace=?",
                (actor_id, namespace),
            ).fetchall()
        return frozenset(r[0] for r in rows)

    # -- the nightly queueing ------------------------------------------------------------------
    def queue(
        self, decisions: Iterable[Decision], *, budget: int, run_id: str, at: datetime,
        dry_run: bool = False,
    ) -> Counter:  # fmt: skip
        """Carry open items forward and open new ones by priority up to ``budget``.

        Returns counts: review_carried (already open), review_opened, review_waiting
        (over budget), review_closed_earlier (resolved before: not reopened).
        """
        counts: Counter = Counter()
        found: dict[str, tuple[Decision, str]] = {}
        for d in decisions:
            if d.action is not Action.review:
                continue
            for reason in d.reasons:
                if reason in REVIEW_REASONS:
                    found[item_id(d.id, reason.value)] = (d, reason.value)
        if not found:
            return counts
        existing: dict[str, str] = {}
        ids = list(found)
        with self.lock:
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                q = f"SELECT item_id, state FROM review_items WHERE item_id IN ({','.join('?' * len(chunk))})"
                existing.update(self.connection.execute(q, chunk).fetchall())
        carried = [i for i in ids if existing.get(i) in ("open", "disputed")]
        counts["review_carried"] = len(carried)
        counts["review_closed_earlier"] = sum(1 for i in ids if existing.get(i) == "resolved")
        new = [i for i in ids if i not in existing]
        new.sort(key=lambda i: (-(found[i][0].priority or 0.0), found[i][0].id, found[i][1]))
        opened, waiting = new[:budget], new[budget:]
        counts["review_opened"] = len(opened)
        counts["review_waiting"] = len(waiting)
        for i in opened:
            counts[f"review_reason:{found[i][1]}"] += 1
        if dry_run:
            return counts
        now = at.isoformat()
        with self.lock:
            conn = self.connection
            own = not conn.in_transaction
            if own:
                conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(
                    "UPDATE review_items SET nights=nights+1, last_seen_run=?, last_seen_at=? "
                    "WHERE item_id=? AND last_seen_run<>?",
                    [(run_id, now, i, run_id) for i in carried],
                )
                rows = []
                for i in opened:
                    d, reason = found[i]
                    rows.append((
                        i, d.id, reason, d.pair, d.actor_id, d.namespace, d.memory_type, d.owner,
                        float(d.priority or 0.0), "open", None, None, 1, run_id, now, run_id, now,
                        None, None,
                    ))  # fmt: skip
                conn.executemany(
                    f"INSERT OR IGNORE INTO review_items VALUES ({','.join('?' * len(_COLS))})",
                    rows,
                )
            except BaseException:
                if own:
                    conn.execute("ROLLBACK")
                raise
            if own:
                conn.execute("COMMIT")
        return counts

    def close(self, iid: str, *, state: str, decision: str, reviewer: str, at: datetime,
              operation_id: str | None) -> None:  # fmt: skip
        with self.lock:
            self.connection.execute(
                "UPDATE review_items SET state=?, decision=?, reviewer=?, resolved_at=?, operation_id=? "
                "WHERE item_id=?",
                (state, decision, reviewer, at.isoformat() if state == "resolved" else None,
                 operation_id, iid),
            )  # fmt: skip


# -- resolving an item -------------------------------------------------------------------------
def resolve(
    store: Any, iid: str, decision: ReviewDecision | str, reviewer: str, *,
    by: str | None = None, policy: Any = None, receipts: Any = None, now: datetime | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Carry out a reviewer's decision on one item: journaled, receipted with the reviewer."""
    from memlife.journal import OpKind, OpState
    from memlife.quarantine import manual_run

    decision = ReviewDecision(decision)
    if not reviewer or not reviewer.strip():
        raise ReviewError("a reviewer identity is required (--reviewer)")
    queue = ReviewQueue.for_store(store)
    item = queue.get(iid)
    if item is None:
        raise ReviewError(f"review item {iid}: not found")
    if item.state == "resolved":
        raise ReviewError(
            f"review item {iid}: already resolved ({item.decision} by {item.reviewer})"
        )
    record = store.get(item.record_id)
    if record is None and decision is not ReviewDecision.keep:
        raise ReviewError(f"review item {iid}: record {item.record_id} no longer exists")
    replacement = by or item.pair_id
    if decision is ReviewDecision.supersede:
        if not replacement:
            raise ReviewError(f"review item {iid}: supersede needs a pair item or --by RECORD_ID")
        newer = store.get(replacement)
        if newer is None or newer.status is not Status.active:
            raise ReviewError(
                f"review item {iid}: replacement {replacement} is not an active record"
            )
        if (newer.actor_id, newer.namespace) != (item.actor_id, item.namespace):
            raise ReviewError(
                f"review item {iid}: replacement {replacement} is in another actor/namespace"
            )
    held = record is not None and (
        record.retention_class is RetentionClass.legal_hold or record.status is Status.retained
    )
    if held and decision in (
        ReviewDecision.supersede,
        ReviewDecision.delete,
        ReviewDecision.verify,
    ):
        raise ReviewError(f"review item {iid}: record {item.record_id} is under legal hold")
    run = manual_run(store, f"review_{decision.value}", [item.record_id], policy=policy,
                     receipts=receipts, now=now)  # fmt: skip
    run.executor.reviewer = reviewer
    kind = {ReviewDecision.supersede: OpKind.supersede, ReviewDecision.delete: OpKind.delete}.get(
        decision, OpKind.review
    )
    op = run.executor.new_op(
        kind, item.actor_id, item.namespace, item.record_id,
        [f"REVIEW_{decision.value.upper()}", item.reason],
        record.sha256 if record is not None else None,
        replacement=replacement if decision is ReviewDecision.supersede else None,
        payload=json.dumps({"decision": decision.value}),
        key_ids=[item.item_id, decision.value, reviewer],
    )  # fmt: skip
    from memlife.apply.lifecycle import run_lifecycle

    (done,) = run_lifecycle(run.executor, run.journal.plan([op]), run.tally)
    if done.state is OpState.RECEIPTED or done.state is OpState.APPLIED:
        state = "disputed" if decision is ReviewDecision.dispute else "resolved"
        queue.close(iid, state=state, decision=decision.value, reviewer=reviewer, at=run.cutoff,
                    operation_id=done.operation_id)  # fmt: skip
        if decision in (ReviewDecision.supersede, ReviewDecision.delete):
            # the record is gone from recall: its other open items have nothing left to decide
            for other in queue.list(actor=item.actor_id):
                if other.record_id == item.record_id and other.item_id != iid:
                    queue.close(other.item_id, state="resolved", decision=decision.value,
                                reviewer=reviewer, at=run.cutoff, operation_id=done.operation_id)  # fmt: skip
    run.extra["reviewer"] = reviewer
    run.extra["item_id"] = iid
    summary = run.finish()
    summary["item"] = queue.get(iid).as_json()  # type: ignore[union-attr]
    return summary
