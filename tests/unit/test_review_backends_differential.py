"""The review queue on DynamoDB against SQLite, differentially (session 42, audit b).

A hypothesis machine drives one sequence of nights (carried, opened, waiting, renewed for
new content or a new pair, moot, reruns), reviewer decisions (every decision kind, disputes
and their end) and memlife's own closings through ``ReviewQueue`` on both backends at once:
the store's SQLite file and the DynamoDB state table (moto in process). After every step the
two must hold the same items, field for field, list the same open ones under every filter,
count the night alike, and report the same disputed records per shard."""

from __future__ import annotations

import itertools
import os
import sqlite3
import threading
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from moto import mock_aws

from memlife.plan import Action, Decision, Reason
from memlife.review_queue import ReviewQueue
from memlife.review_queue.dynamodb import DynamoReviews
from memlife.review_queue.sqlite import SCHEMA, SqliteReviews
from tests.support.aws_state import CREDENTIALS, provision, state_url

NIGHT = datetime(2026, 11, 1, 2, tzinfo=UTC)
SHARDS = (("u-1", "/n"), ("u-2", "/n"), ("u-1", "/m"))
RECORDS = ("m-1", "m-2", "m-3")
REASONS = (Reason.MISSING_OWNER, Reason.STALE_VERIFICATION, Reason.POSSIBLE_UPDATE)
ALL = ("open", "disputed", "waiting", "resolved")
CLOSINGS = (("resolved", "keep"), ("resolved", "verify"), ("resolved", "supersede"),
            ("resolved", "delete"), ("disputed", "dispute"), ("resolved", "erased"),
            ("resolved", "answered_earlier"))  # fmt: skip
_tables = itertools.count()

finding = st.tuples(
    st.sampled_from(RECORDS), st.sampled_from(SHARDS), st.sampled_from(REASONS),
    st.sampled_from(("h1", "h2", None)), st.sampled_from(("p-1", "p-2")),
    st.sampled_from((0.1, 0.5, 0.9)),
)  # fmt: skip


def decision(f: tuple) -> Decision:
    rid, (actor, ns), reason, sha, pair, prio = f
    return Decision(rid, actor, ns, Action.review, [reason], 0.5, priority=prio,
                    pair=pair if reason is Reason.POSSIBLE_UPDATE else None,
                    content_sha256=sha, memory_type="semantic")  # fmt: skip


class Differential(RuleBasedStateMachine):
    """Every rule acts on both queues; invariants compare them."""

    @initialize()
    def start(self) -> None:
        conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        conn.executescript(SCHEMA)
        self.sql = ReviewQueue(SqliteReviews(conn, threading.RLock()))
        url = state_url(f"diff-{next(_tables)}")
        self.ddb = ReviewQueue(DynamoReviews(provision(url)))
        self.at, self.run, self.night_no = NIGHT, "night-0", 0

    def both(self) -> tuple[ReviewQueue, ReviewQueue]:
        return self.sql, self.ddb

    @rule(found=st.lists(finding, max_size=6), budget=st.integers(0, 3),
          listed=st.integers(0, 2), rerun=st.booleans())  # fmt: skip
    def night(self, found: list, budget: int, listed: int, rerun: bool) -> None:
        if not rerun or self.night_no == 0:
            self.night_no += 1
            self.at += timedelta(days=1)
            self.run = f"night-{self.night_no}"
        # one finding per (record, shard, reason) a night, as a run plans a record once
        ds = list({(f[0], f[1], f[2]): decision(f) for f in found}.values())
        counts = [q.queue(ds, budget=budget, run_id=self.run, at=self.at, listed=listed,
                          age_per_day=0.1) for q in self.both()]  # fmt: skip
        assert counts[0] == counts[1], counts

    @rule(pick=st.integers(0, 40), closing=st.sampled_from(CLOSINGS))
    def close(self, pick: int, closing: tuple[str, str]) -> None:
        items = sorted(i.item_id for i in self.sql.list(states=("open", "disputed", "waiting")))
        if not items:
            return
        iid = items[pick % len(items)]
        state, dec = closing
        # memlife's own closings and a keep from a UI may name no operation
        op = None if dec in ("keep", "answered_earlier") else f"op-{dec}"
        done = [q.close(iid, state=state, decision=dec, reviewer="ana", at=self.at,
                        operation_id=op) for q in self.both()]  # fmt: skip
        assert done[0] == done[1], (iid, closing, done)

    @invariant()
    def same_items(self) -> None:
        sql = {i.item_id: i for i in self.sql.list(states=ALL)}
        ddb = {i.item_id: i for i in self.ddb.list(states=ALL)}
        assert sql == ddb

    @invariant()
    def same_listings_and_disputes(self) -> None:
        for actor, ns in SHARDS:
            assert self.sql.disputed(actor, ns) == self.ddb.disputed(actor, ns), (actor, ns)
            got = [[i.item_id for i in q.list(actor=actor, namespace=ns)] for q in self.both()]
            assert got[0] == got[1], (actor, ns)
        a, b = (q.for_record("m-1", *SHARDS[0]) for q in self.both())
        assert a == b


Differential.TestCase.settings = settings(
    max_examples=int(os.environ.get("STATEFUL_REVIEW_EXAMPLES", "10")),
    stateful_step_count=10, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)  # fmt: skip


def test_both_backends_keep_one_queue(monkeypatch) -> None:
    """The machine above, under one moto for every example (a table of its own each)."""
    for k, v in CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    with mock_aws():
        Differential.TestCase().runTest()
