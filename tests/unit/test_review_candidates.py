"""The bounded review findings (ReviewCandidates): kept per planning process, merged by the
parent, they open the same items and give the same counts as one sort of every finding
capped at the budget (what the queue did with every review decision at hand)."""

from __future__ import annotations

import pickle
import sqlite3
from collections import Counter
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from memlife.plan import REVIEW_REASONS, Action, Decision, Reason
from memlife.review_queue import ReviewCandidates, ReviewItem, ReviewQueue, item_id
from memlife.review_queue import candidates as candidates_mod
from memlife.review_queue.sqlite import SCHEMA, SqliteReviews
from memlife.run_types import BatchOutcome, collect

NIGHT = datetime(2026, 11, 1, 2, 15, tzinfo=UTC)
REASONS = sorted(REVIEW_REASONS, key=str) + [Reason.HARD_EXPIRED]


def backend(existing: dict[str, str]) -> SqliteReviews:
    """A real SQLite review table holding ``existing`` items (item id -> state); a resolved
    one a reviewer's answer (`keep`: memlife's own closings answer nothing)."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.executescript(SCHEMA)
    out = SqliteReviews(conn)
    items = [ReviewItem(iid, "r", "MISSING_OWNER", None, "a", "/n", None, None, 0.0, state,
                        "keep" if state == "resolved" else None, None, 1, "old", "t", "old", "t",
                        None, None)
             for iid, state in existing.items()]  # fmt: skip
    out.write_night([], items, "old", "t")
    return out


def reference(decisions: list[Decision], existing: dict[str, str], budget: int) -> Counter[str]:
    """The queue's rule written out: every finding, sorted, capped at the budget."""
    found = {
        item_id(d.id, r.value, d.actor_id, d.namespace): (d, r.value)
        for d in decisions
        if d.action is Action.review
        for r in d.reasons
        if r in REVIEW_REASONS
    }
    # a record a group acts on: an open item about it is carried, nothing else is filed
    seen = {
        item_id(d.id, r.value, d.actor_id, d.namespace)
        for d in decisions
        if d.action is Action.consolidate_candidate
        for r in d.reasons
        if r in REVIEW_REASONS
    }
    seen_open = sum(1 for i in seen if existing.get(i) in ("open", "disputed"))
    counts: Counter[str] = Counter()
    if not found and not seen_open:
        return counts
    new = [i for i in found if i not in existing]
    new.sort(key=lambda i: (-(found[i][0].priority or 0.0), found[i][0].id, found[i][1]))
    counts["review_carried"] = seen_open + sum(
        1 for i in found if existing.get(i) in ("open", "disputed")
    )
    counts["review_closed_earlier"] = sum(1 for i in found if existing.get(i) == "resolved")
    # records whose every finding is resolved: none left for a human
    per_record: dict[str, list[bool]] = {}
    for i, (d, _) in found.items():
        per_record.setdefault(d.id, []).append(existing.get(i) == "resolved")
    counts["review_answered"] = sum(1 for done in per_record.values() if all(done))
    counts["review_opened"] = len(new[:budget])
    counts["review_waiting"] = len(new[budget:])
    for i in new[:budget]:
        counts[f"review_reason:{found[i][1]}"] += 1
    if new[:budget]:
        counts["opened:" + ",".join(new[:budget])] = 1
    return counts


decision_lists = st.lists(
    st.tuples(
        st.sampled_from(
            [Action.review, Action.review, Action.retain, Action.consolidate_candidate]
        ),
        st.lists(st.sampled_from(REASONS), min_size=1, max_size=3),
        st.sampled_from([None, 0.0, 0.5, 0.5, 1.0, 2.0]),  # ties, and None as 0.0
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(
    spec=decision_lists,
    budget=st.integers(0, 6),
    processes=st.integers(1, 4),
    chunk=st.integers(1, 5),
    existing_states=st.lists(st.sampled_from(["open", "disputed", "resolved", None]), max_size=40),
    dry_run=st.booleans(),
    compacted=st.booleans(),
    sequential=st.booleans(),
    failed_first=st.booleans(),
)
def test_bounded_and_merged_equals_sort_then_cap(
    spec, budget, processes, chunk, existing_states, dry_run, compacted, sequential, failed_first
) -> None:
    decisions = [
        Decision(f"r{n:02d}", "a", "/n", action, reasons, 0.5, priority=priority)
        for n, (action, reasons, priority) in enumerate(spec)
    ]
    all_ids = [
        item_id(d.id, r.value, d.actor_id, d.namespace) for d in decisions for r in d.reasons
    ]
    existing = {i: s for i, s in zip(all_ids, existing_states, strict=False) if s is not None}
    want = reference(decisions, existing, budget)

    old_chunk = candidates_mod.CHUNK
    candidates_mod.CHUNK = chunk  # small chunks: lookups and pruning happen mid-stream
    try:
        one = backend(existing)
        parts = [ReviewCandidates(budget) for _ in range(processes)]
        for n, d in enumerate(decisions):  # shard by shard, round the processes
            parts[n % processes].add([d], one)
        for p in parts:
            assert len(p.best) < 2 * budget + chunk  # bounded while planning
            if compacted:  # a batch's end (process_batch)
                p.compact(one)
                assert len(p.best) <= budget and not p.pending
        parts = [pickle.loads(pickle.dumps(p)) for p in parts]  # as a child hands it back
        if sequential:  # batch after batch: one set (run_types.collect, every fan-out path)
            outcomes: list[BatchOutcome] = []
            if failed_first:  # a batch that failed as a whole: no findings, no budget
                collect(outcomes, BatchOutcome(failed_shards=[{"shard": "x", "code": "E"}]))
            for p in parts:
                collect(outcomes, BatchOutcome(reviews=p))
                assert len(outcomes[0].reviews.best) < 2 * budget + chunk
            for o in outcomes[1:]:
                assert o.reviews.found == 0 and not o.reviews.pending and not o.reviews.best
            parts = [o.reviews for o in outcomes]
        merged = ReviewCandidates.merge(parts, budget, one)
        got = ReviewQueue(one).queue(merged, budget=budget, run_id="n1", at=NIGHT, dry_run=dry_run)
        opened = merged.opened(budget)
    finally:
        candidates_mod.CHUNK = old_chunk
    if opened:
        got["opened:" + ",".join(e[3] for e in opened)] = 1
    assert got == want
    assert list(got) == list(want)  # the same keys in the same order (the receipt's JSON)
    # the decision-list form of queue() (one call, every decision) agrees too
    plain = ReviewQueue(backend(existing)).queue(decisions, budget=budget, run_id="n1",
                                                 at=NIGHT, dry_run=True)  # fmt: skip
    assert plain == Counter({k: v for k, v in want.items() if not k.startswith("opened:")})
    if not dry_run:  # what was written: exactly the opened items, best first
        rows = ReviewQueue(one).list(states=("open",))
        assert {i.item_id for i in rows if i.opened_run == "n1"} == {e[3] for e in opened}


def test_a_million_findings_keep_only_the_budget() -> None:
    """Memory is the point: 20,000 findings, budget 5, the kept list stays small."""
    queue = backend({})
    found = ReviewCandidates(5)
    for n in range(20_000):
        found.add([Decision(f"r{n}", "a", "/n", Action.review, [Reason.LOW_SCORE], 0.1,
                            priority=(n * 7919) % 1000 / 10)], queue)  # fmt: skip
        assert len(found.best) < 2 * 5 + candidates_mod.CHUNK
    found.settle(queue)
    assert found.new == 20_000
    top = found.opened(5)
    assert [e[0] for e in top] == [-99.9] * 5  # the highest priority, ids in order
    assert [e[1] for e in top] == sorted(e[1] for e in top)
