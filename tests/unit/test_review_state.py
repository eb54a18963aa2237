"""The review queue and the inferred subjects keep one contract on every backend: SQLite (the
store's file), DynamoDB in-process (moto) and DynamoDB over HTTP (a moto server), chosen by
the same MEMLIFE_STATE setting as the journal. Nothing of it is written under MEMLIFE_HOME
when the state is remote."""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import memlife.state as state_mod
from memlife.inferred import InferredSubjects
from memlife.inferred.dynamodb import DynamoSubjects
from memlife.plan import Action, Decision, Reason
from memlife.policy import ReviewPolicy
from memlife.review_queue import ReviewCandidates, ReviewItem, ReviewQueue, item_id, legacy_item_id
from memlife.review_queue.dynamodb import DynamoReviews
from tests.support.aws_state import aws_state

NIGHT = datetime(2026, 11, 1, 2, 15, tzinfo=UTC)


class SqliteFileStore:
    """A store with a SQLite file of its own: side tables go into it."""

    def __init__(self) -> None:
        self.connection = sqlite3.connect(":memory:", check_same_thread=False,
                                          isolation_level=None)  # fmt: skip
        self.lock = threading.RLock()


class RemoteStore:
    """A store without a SQLite file (AgentCore-like)."""

    connection = None


@pytest.fixture(params=["sqlite", "dynamodb-inprocess", "dynamodb-server"])
def store(
    request, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SqliteFileStore | RemoteStore]:
    home = tmp_path / "home"
    monkeypatch.setenv("MEMLIFE_HOME", str(home))
    if request.param == "sqlite":
        monkeypatch.setenv("MEMLIFE_STATE", "local")
        yield SqliteFileStore()
        return
    with aws_state(request.param.split("-")[1]) as (url, state):
        monkeypatch.setenv("MEMLIFE_STATE", url)
        monkeypatch.setattr(state_mod, "_open", {url: state})
        yield RemoteStore()
    assert not home.exists(), f"state left under MEMLIFE_HOME: {list(home.rglob('*'))}"


def _d(rid: str, priority: float, reason: Reason = Reason.MISSING_OWNER, actor: str = "a",
       ns: str = "/n", pair: str | None = None) -> Decision:  # fmt: skip
    return Decision(rid, actor, ns, Action.review, [reason], 0.5, priority=priority, pair=pair,
                    owner="team" if reason is not Reason.MISSING_OWNER else None,
                    memory_type="semantic")  # fmt: skip


def test_backend_follows_the_state_setting(store) -> None:
    queue = ReviewQueue.for_store(store)
    subjects = InferredSubjects.for_store(store)
    remote = isinstance(store, RemoteStore)
    assert isinstance(queue.backend, DynamoReviews) is remote
    assert isinstance(subjects.backend, DynamoSubjects) is remote


def test_budget_priority_nights_and_reruns(store) -> None:
    queue = ReviewQueue.for_store(store)
    ds = [_d(f"r{i}", float(i)) for i in range(10)]
    counts = queue.queue(ds, budget=3, run_id="night-1", at=NIGHT)
    assert (counts["review_opened"], counts["review_waiting"]) == (3, 7)
    assert counts["review_reason:MISSING_OWNER"] == 3
    assert [i.record_id for i in queue.list()] == ["r9", "r8", "r7"]  # highest priority first
    # the same night again (a rerun after a crash): nothing opened twice, no night counted
    # twice, and the night's budget is spent: what waited still waits (it opened r6, r5, r4
    # too until session 22)
    again = queue.queue(ds, budget=3, run_id="night-1", at=NIGHT)
    assert (again["review_carried"], again["review_opened"], again["review_waiting"]) == (3, 0, 7)
    assert {i.record_id: i.nights for i in queue.list()} == {"r9": 1, "r8": 1, "r7": 1}
    queue.queue(ds, budget=0, run_id="night-2", at=NIGHT + timedelta(days=1))
    queue.queue(ds, budget=0, run_id="night-2", at=NIGHT + timedelta(days=1))
    items = {i.record_id: i for i in queue.list()}
    assert items["r9"].nights == 2 and items["r9"].last_seen_run == "night-2"
    assert items["r9"].opened_run == "night-1" and items["r9"].priority == 9.0
    # a dry run counts and writes nothing
    dry = queue.queue([_d("new", 99.0)], budget=5, run_id="night-3", at=NIGHT, dry_run=True)
    assert (
        dry["review_opened"] == 1 and queue.get(item_id("new", "MISSING_OWNER", "a", "/n")) is None
    )


def test_the_namespace_filter_reads_globs_as_the_policy_does(store) -> None:
    """``*`` is one segment, ``**`` any number, as in the policy and a run's scope (session
    22 review: fnmatch let "/users/*/facts" list another tree's "/users/u1/archive/facts")."""
    queue = ReviewQueue.for_store(store)
    spaces = ["/users", "/users/u1/facts", "/users/u1/archive/facts", "/teams/t/facts"]
    queue.queue([_d(f"r{n}", 1.0, ns=ns) for n, ns in enumerate(spaces)], budget=10,
                run_id="night-1", at=NIGHT)  # fmt: skip

    def listed(pattern: str) -> list[str]:
        return sorted(i.namespace for i in queue.list(namespace=pattern))

    assert listed("/users/*/facts") == ["/users/u1/facts"]
    assert listed("/users/**/facts") == ["/users/u1/archive/facts", "/users/u1/facts"]
    assert listed("/users/*") == []
    assert listed("/users/**") == ["/users", "/users/u1/archive/facts", "/users/u1/facts"]
    assert listed("/teams/t/facts") == ["/teams/t/facts"]


def test_only_the_possible_update_item_names_the_pair(store) -> None:
    """A record with a pair and another finding: the pair is the POSSIBLE_UPDATE item's
    alone (session 22 review: the MISSING_OWNER item carried it too, and a bare `supersede`
    on that item took the pair as the replacement no reviewer had looked at there)."""
    queue = ReviewQueue.for_store(store)
    both = Decision("p1", "a", "/n", Action.review, [Reason.POSSIBLE_UPDATE, Reason.MISSING_OWNER],
                    0.5, priority=1.0, pair="p2", memory_type="semantic")  # fmt: skip
    queue.queue([both], budget=10, run_id="night-1", at=NIGHT)
    assert sorted((i.reason, i.pair_id) for i in queue.list()) == [
        ("MISSING_OWNER", None), ("POSSIBLE_UPDATE", "p2"),
    ]  # fmt: skip


def test_filters_pairs_and_lookup_by_record(store) -> None:
    queue = ReviewQueue.for_store(store)
    queue.queue([
        _d("p1", 1.0, Reason.POSSIBLE_UPDATE, pair="p2"),
        _d("p1", 2.0, Reason.STALE_VERIFICATION),
        _d("x1", 3.0, actor="b", ns="/users/b/facts"),
        _d("x2", 0.5, actor="b", ns="/users/b/episodes"),
    ], budget=10, run_id="night-1", at=NIGHT)  # fmt: skip
    assert [i.record_id for i in queue.list(actor="b")] == ["x1", "x2"]
    assert [i.record_id for i in queue.list(namespace="/users/*/facts")] == ["x1"]
    assert [i.reason for i in queue.list(owner="team")] == ["STALE_VERIFICATION",
                                                            "POSSIBLE_UPDATE"]  # fmt: skip
    assert [i.record_id for i in queue.list(reason="MISSING_OWNER")] == ["x1", "x2"]
    (pair,) = queue.list(reason="POSSIBLE_UPDATE")
    assert pair.pair_id == "p2" and pair.memory_type == "semantic" and pair.owner == "team"
    assert {i.reason for i in queue.for_record("p1", "a", "/n")} == {
        "POSSIBLE_UPDATE", "STALE_VERIFICATION",
    }  # fmt: skip
    assert queue.for_record("p1", "b", "/n") == []  # another actor's record of that id
    assert queue.for_record("nothing", "a", "/n") == []


def test_a_record_id_taken_by_another_actor_opens_that_actors_own_item(store) -> None:
    """Adversarial review: an item was keyed by (record, reason) alone, so after u-1's m-1
    was erased and u-2 imported an m-1, u-2's finding continued (or renewed) u-1's item: it
    was listed under u-1, and a u-1 reviewer's decision acted on u-2's record. Each actor's
    finding is its own item; u-1's is left as it was."""
    queue = ReviewQueue.for_store(store)
    queue.queue([_h(_d("m-1", 1.0, actor="u-1", ns="/u1"), "v1")], budget=5, run_id="n1",
                at=NIGHT)  # fmt: skip
    (mine,) = queue.list(actor="u-1")
    for state in ("open", "resolved"):
        if state == "resolved":
            queue.close(mine.item_id, state="resolved", decision="keep", reviewer="r", at=NIGHT,
                        operation_id="op")  # fmt: skip
        counts = queue.queue([_h(_d("m-1", 2.0, actor="u-2", ns="/u2"), "w1")], budget=5,
                             run_id=f"n2-{state}", at=NIGHT + timedelta(days=1))  # fmt: skip
        assert counts["review_opened"] == (1 if state == "open" else 0), counts
        (theirs,) = queue.list(actor="u-2")
        assert (theirs.record_id, theirs.namespace, theirs.content_sha256) == ("m-1", "/u2", "w1")
        assert theirs.item_id != mine.item_id
        kept = queue.get(mine.item_id)
        assert kept is not None and (kept.actor_id, kept.content_sha256) == ("u-1", "v1")


def test_an_item_opened_under_the_old_id_goes_on_for_its_own_actor_only(store) -> None:
    """Items opened before the scope was part of the id keep their id: the same actor's
    finding carries it (no second item); another actor's record of that id opens its own."""
    queue = ReviewQueue.for_store(store)
    old = legacy_item_id("m-7", "MISSING_OWNER")
    at = NIGHT.isoformat()
    before = ReviewItem(old, "m-7", "MISSING_OWNER", None, "u-1", "/u1", "semantic", None, 1.0,
                        "open", None, None, 1, "n1", at, "n1", at, None, None, "v1")  # fmt: skip
    queue.backend.write_night([], [before], "n1", at)
    again = queue.queue([_h(_d("m-7", 1.0, actor="u-1", ns="/u1"), "v1")], budget=5,
                        run_id="n2", at=NIGHT + timedelta(days=1))  # fmt: skip
    assert again["review_carried"] == 1 and again["review_opened"] == 0, again
    assert queue.get(old).nights == 2  # type: ignore[union-attr]
    other = queue.queue([_h(_d("m-7", 1.0, actor="u-2", ns="/u2"), "w1")], budget=5,
                        run_id="n3", at=NIGHT + timedelta(days=2))  # fmt: skip
    assert other["review_opened"] == 1 and queue.get(old).actor_id == "u-1"  # type: ignore[union-attr]


def test_close_dispute_resolve_and_never_reopen(store) -> None:
    queue = ReviewQueue.for_store(store)
    queue.queue([_d("r1", 1.0), _d("r2", 2.0, ns="/m")], budget=10, run_id="night-1", at=NIGHT)
    iid = item_id("r1", "MISSING_OWNER", "a", "/n")
    assert queue.close(iid, state="disputed", decision="dispute", reviewer="cy", at=NIGHT,
                       operation_id="op-1")  # fmt: skip
    assert queue.disputed("a", "/n") == {"r1"} and queue.disputed("a", "/m") == frozenset()
    item = queue.get(iid)
    assert item is not None and (item.state, item.reviewer, item.resolved_at) == (
        "disputed", "cy", None,
    )  # fmt: skip
    # a disputed item is still carried each night
    assert queue.queue([_d("r1", 1.0)], budget=0, run_id="night-2", at=NIGHT)["review_carried"]
    assert queue.close(iid, state="resolved", decision="keep", reviewer="dee", at=NIGHT,
                       operation_id="op-2")  # fmt: skip
    assert queue.disputed("a", "/n") == frozenset()
    done = queue.get(iid)
    assert done is not None and done.state == "resolved" and done.resolved_at == NIGHT.isoformat()
    assert done.nights == 2
    # resolved stays resolved: no second close, not reopened, not carried
    assert not queue.close(iid, state="disputed", decision="dispute", reviewer="eve", at=NIGHT,
                           operation_id="op-3")  # fmt: skip
    assert queue.get(iid).reviewer == "dee"  # type: ignore[union-attr]
    counts = queue.queue([_d("r1", 1.0)], budget=5, run_id="night-3", at=NIGHT)
    assert counts["review_closed_earlier"] == 1 and counts["review_opened"] == 0
    assert queue.get(iid).nights == 2  # type: ignore[union-attr]
    assert [i.record_id for i in queue.list(states=("resolved",))] == ["r1"]
    assert not queue.close("rv-missing", state="resolved", decision="keep", reviewer="x",
                           at=NIGHT, operation_id=None)  # fmt: skip


def test_two_processes_queue_the_same_night_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two writers (two queue objects, as two workers) racing on one night: every item is
    opened once and counted one night, whichever wins. (SQLite only: moto evaluates a
    condition and applies the update without a lock between them, DynamoDB does not; the
    conditions themselves are exercised by the reruns above on every backend.)"""
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MEMLIFE_STATE", "local")
    store = SqliteFileStore()
    ds = [_d(f"r{i}", float(i)) for i in range(20)]
    queues = [ReviewQueue.for_store(store) for _ in range(2)]
    queues[0].queue(ds, budget=20, run_id="night-1", at=NIGHT)
    errors: list[BaseException] = []

    def night_2(q: ReviewQueue) -> None:
        try:
            q.queue(ds, budget=20, run_id="night-2", at=NIGHT)
        except BaseException as exc:  # a thread's exception is only a warning in pytest
            errors.append(exc)

    threads = [threading.Thread(target=night_2, args=(q,)) for q in queues]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []  # the writer that lost the race did not fail either
    assert {i.nights for i in queues[1].list()} == {2}
    assert len(queues[1].list()) == 20


SHARD = ("a", "/n")


def test_inferred_subjects_keys_never_move_and_erasure_forgets(store) -> None:
    table = InferredSubjects.for_store(store)
    assert table.get(SHARD, []) == {} and table.get(SHARD, ["m-1"]) == {}
    table.put("a", "/n", {"m-1": "tea-1a2b", "m-2": "tea-1a2b"}, "remember")
    table.put("a", "/n", {"m-1": "coffee-9f", "m-3": "jazz-77"}, "nightly")  # m-1 stays
    assert table.get(SHARD, ["m-1", "m-2", "m-3", "m-4"]) == {
        "m-1": "tea-1a2b", "m-2": "tea-1a2b", "m-3": "jazz-77",
    }  # fmt: skip
    other = InferredSubjects.for_store(store)  # another process sees the same keys
    assert other.get(SHARD, ["m-3"]) == {"m-3": "jazz-77"}
    assert table.forget(["m-1", "m-3", "m-9"]) == 2
    assert table.get(SHARD, ["m-1", "m-2", "m-3"]) == {"m-2": "tea-1a2b"}
    assert table.forget(["m-1"]) == 0


def test_a_key_another_actors_record_left_under_a_reused_id_never_reaches_the_new_one(
    store,
) -> None:
    """Actor a's record m-1 is removed without its key being forgotten (AgentCore expires
    records natively); actor b's new record takes the id. a's key holds a's content words:
    b must neither read it nor be kept from getting its own."""
    table = InferredSubjects.for_store(store)
    table.put("a", "/n", {"m-1": "maria adopted grey ~9ccd23"}, "nightly")
    assert table.get(("b", "/n"), ["m-1"]) == {}
    assert table.get(("a", "/other"), ["m-1"]) == {}  # namespaces are shards too
    table.put("b", "/n", {"m-1": "bob plays bass ~77aa01"}, "remember")
    assert table.get(("b", "/n"), ["m-1"]) == {"m-1": "bob plays bass ~77aa01"}
    assert table.get(SHARD, ["m-1"]) == {}
    table.put("b", "/n", {"m-1": "another ~000000"}, "nightly")  # and it never moves again
    assert table.get(("b", "/n"), ["m-1"]) == {"m-1": "bob plays bass ~77aa01"}
    # a's removal of m-1, finishing late, leaves b's key alone
    assert table.forget_removed(SHARD, {"m-1": "maria adopted a grey cat"}) == (0, 0)
    assert table.get(("b", "/n"), ["m-1"]) == {"m-1": "bob plays bass ~77aa01"}


def test_a_removed_records_words_come_off_every_record_grouped_under_them(store) -> None:
    """m-1's words made the key m-2 and m-3 were grouped under: removing m-1 takes the key
    off all three, on every backend. The same key string in another shard, and a record of
    the shard under another key, keep theirs."""
    table = InferredSubjects.for_store(store)
    words = "maria adopted grey ~9ccd23"
    table.put("a", "/n", {"m-1": words, "m-2": words}, "nightly")
    table.put("a", "/n", {"m-3": words, "m-4": "bob plays bass ~77aa01"}, "remember")
    table.put("b", "/n", {"x-1": words}, "nightly")
    table.put("a", "/other", {"m-5": words}, "nightly")
    assert table.forget_removed(SHARD, {"m-1": "maria adopted a grey cat"}) == (1, 2)
    assert table.get(SHARD, ["m-1", "m-2", "m-3", "m-4"]) == {"m-4": "bob plays bass ~77aa01"}
    assert table.get(("b", "/n"), ["x-1"]) == {"x-1": words}
    assert table.get(("a", "/other"), ["m-5"]) == {"m-5": words}
    # the records get keys of their own words the next night, and a later removal finds them
    table.put("a", "/n", {"m-2": "tea garden ~1a2b3c", "m-3": "tea garden ~1a2b3c"}, "nightly")
    assert table.forget_removed(SHARD, {"m-2": "tea in the garden"}) == (1, 1)
    assert table.get(SHARD, ["m-2", "m-3"]) == {}


def test_dry_run_creates_no_file_under_home(tmp_path: Path, monkeypatch) -> None:
    """Local state, a store without a file: a dry run reads nothing that is not there and
    leaves no reviews.db / inferred.db behind; an apply run keeps them in MEMLIFE_HOME."""
    home = tmp_path / "home"
    monkeypatch.setenv("MEMLIFE_HOME", str(home))
    monkeypatch.setenv("MEMLIFE_STATE", "local")
    queue = ReviewQueue.for_store(RemoteStore(), create=False)
    assert queue.queue([_d("r1", 1.0)], budget=1, run_id="n", at=NIGHT, dry_run=True)
    assert queue.disputed("a", "/n") == frozenset()
    assert InferredSubjects.for_store(RemoteStore(), create=False).get(("a", "/n"), ["m-1"]) == {}
    assert not home.exists()
    ReviewQueue.for_store(RemoteStore()).queue([_d("r1", 1.0)], budget=1, run_id="n", at=NIGHT)
    InferredSubjects.for_store(RemoteStore()).put("a", "/n", {"m-1": "k"}, "nightly")
    assert sorted(p.name for p in home.iterdir()) == ["inferred.db", "reviews.db", "store"]
    # and the dry run now reads what exists
    assert ReviewQueue.for_store(RemoteStore(), create=False).get(
        item_id("r1", "MISSING_OWNER", "a", "/n")
    )


def _h(d: Decision, sha: str | None) -> Decision:
    d.content_sha256 = sha
    return d


class _Nights:
    """Queue night after night, a day apart (run ids n<night>), after ``night`` of them."""

    def __init__(self, queue: ReviewQueue, night: int = 0) -> None:
        self.queue, self.night = queue, night

    def __call__(self, *decisions: Decision) -> dict[str, int]:
        self.night += 1
        return dict(self.queue.queue(list(decisions), budget=5, run_id=f"n{self.night}",
                                     at=NIGHT + timedelta(days=self.night)))  # fmt: skip


def test_content_hash_kept_refreshed_and_renewed(store) -> None:
    """An item holds the content hash it was opened on; a later night with the same content
    carries it; with changed content it is renewed for the new content (nights from 1, a new
    opened run), once, whatever reruns; a disputed item stays disputed."""
    queue = ReviewQueue.for_store(store)
    iid, other = (
        item_id("r1", "MISSING_OWNER", "a", "/n"),
        item_id("r2", "MISSING_OWNER", "a", "/n"),
    )
    queue.queue([_h(_d("r1", 1.0), "v1"), _h(_d("r2", 2.0), "w1")], budget=5, run_id="night-1",
                at=NIGHT)  # fmt: skip
    assert queue.get(iid).content_sha256 == "v1"  # type: ignore[union-attr]
    queue.close(other, state="disputed", decision="dispute", reviewer="cy", at=NIGHT,
                operation_id="op-1")  # fmt: skip
    night2 = NIGHT + timedelta(days=1)
    same = queue.queue([_h(_d("r1", 1.0), "v1"), _h(_d("r2", 2.0), "w1")], budget=5,
                       run_id="night-2", at=night2)  # fmt: skip
    assert same["review_carried"] == 2 and "review_content_changed" not in same
    assert (queue.get(iid).nights, queue.get(iid).content_sha256) == (2, "v1")  # type: ignore[union-attr]
    night3 = NIGHT + timedelta(days=2)
    seen = []
    for _ in range(2):  # a rerun of the same night renews nothing twice
        changed = queue.queue([_h(_d("r1", 4.0), "v2"), _h(_d("r2", 2.0), "w2")], budget=5,
                              run_id="night-3", at=night3)  # fmt: skip
        assert changed["review_carried"] == 2 and changed["review_opened"] == 0
        seen.append(changed["review_content_changed"])
        item, disputed = queue.get(iid), queue.get(other)
        assert item is not None and disputed is not None
        assert (item.content_sha256, item.nights, item.opened_run, item.opened_at) == (
            "v2", 1, "night-3", night3.isoformat(),
        )  # fmt: skip
        assert (item.state, item.priority, item.last_seen_run) == ("open", 4.0, "night-3")
        assert (disputed.state, disputed.reviewer, disputed.content_sha256) == (
            "disputed", "cy", "w2",
        )  # fmt: skip
        assert queue.disputed("a", "/n") == {"r2"}
    assert seen == [2, 0]  # the rerun finds the items already about the new content
    # an item without a hash (opened before hashes were kept) gets this night's
    legacy = item_id("r3", "MISSING_OWNER", "a", "/n")
    queue.queue([_h(_d("r3", 1.0), None)], budget=5, run_id="night-3", at=night3)
    assert queue.get(legacy).content_sha256 is None  # type: ignore[union-attr]
    counts = queue.queue([_h(_d("r3", 1.0), "u1")], budget=5, run_id="night-4", at=night3)
    assert "review_content_changed" not in counts
    got = queue.get(legacy)
    assert got is not None and (got.content_sha256, got.nights) == ("u1", 2)


def test_a_table_of_before_gets_the_hash_column(tmp_path: Path) -> None:
    """A review table made before content hashes: read as unknown (None) without writing in
    a dry run; migrated (ALTER TABLE, NULL for old items) by a run that writes."""
    from memlife.review_queue.sqlite import SCHEMA, SqliteReviews

    path = tmp_path / "reviews.db"
    conn = sqlite3.connect(path, isolation_level=None)
    before = SCHEMA.split(",\n    content_sha256 TEXT")[0] + SCHEMA[SCHEMA.index("\n);") :]
    conn.executescript(before)
    assert "content_sha256" not in {r[1] for r in conn.execute("PRAGMA table_info(review_items)")}
    conn.execute(
        "INSERT INTO review_items VALUES ('rv-1', 'r1', 'MISSING_OWNER', NULL, 'a', '/n', NULL, "
        "NULL, 1.0, 'open', NULL, NULL, 1, 'n0', 't', 'n0', 't', NULL, NULL)"
    )
    ro = SqliteReviews(conn, migrate=False)
    assert ro.get_many(["rv-1"])["rv-1"].content_sha256 is None
    assert "content_sha256" not in {r[1] for r in conn.execute("PRAGMA table_info(review_items)")}
    rw = SqliteReviews(conn)
    SqliteReviews(conn)  # a second opener finds the column there
    assert rw.get_many(["rv-1"])["rv-1"].content_sha256 is None
    rw.write_night([("rv-1", "v1")], [], "n1", "t1")
    assert rw.get_many(["rv-1"])["rv-1"].content_sha256 == "v1"
    assert rw.get_many(["rv-1"])["rv-1"].first_seen_at is None  # not kept then


def test_an_answered_finding_is_not_asked_again_until_the_content_changes(store) -> None:
    """Adversarial review: a record a reviewer kept was planned `review` every night and
    counted as left for review for ever, and its finding stayed answered whatever the record
    came to say later (a keep of one text silenced the finding about another). Answered for
    the content the record holds: counted `review_answered`, nothing opened. Changed since:
    asked again under an item of its own; the resolved item, the record of that decision,
    is never changed; the new item is carried and renewed as any (no orphan)."""
    queue = ReviewQueue.for_store(store)
    d = _d("m-1", 1.0)
    queue.queue([_h(d, "v1")], budget=5, run_id="n1", at=NIGHT)
    (first,) = queue.list()
    assert queue.close(first.item_id, state="resolved", decision="keep", reviewer="r",
                       at=NIGHT, operation_id="op-1")  # fmt: skip
    nights = _Nights(queue, night=1)

    def again(sha: str) -> dict[str, int]:
        return nights(_h(d, sha))

    same = again("v1")
    assert same["review_answered"] == 1 and same["review_opened"] == 0, same
    assert queue.list() == []
    changed = again("v2")
    assert changed["review_answered"] == 0 and changed["review_opened"] == 1, changed
    assert changed["review_asked_again"] == 1
    (second,) = queue.list()
    assert second.item_id != first.item_id and second.content_sha256 == "v2"
    kept = queue.get(first.item_id)
    assert kept is not None and (kept.state, kept.decision, kept.content_sha256) == (
        "resolved", "keep", "v1",
    )  # fmt: skip
    assert again("v2")["review_carried"] == 1 and queue.get(second.item_id).nights == 2
    renewed = again("v3")  # changed again while the new item is open: renewed in place
    assert renewed["review_content_changed"] == 1 and renewed["review_opened"] == 0, renewed
    assert [(i.item_id, i.content_sha256) for i in queue.list()] == [(second.item_id, "v3")]
    assert {i.item_id for i in queue.for_record("m-1", "a", "/n")} == {first.item_id,
                                                                        second.item_id}  # fmt: skip
    assert queue.close(second.item_id, state="resolved", decision="keep", reviewer="r",
                       at=NIGHT, operation_id="op-2")  # fmt: skip
    assert again("v3")["review_answered"] == 1 and queue.list() == []
    back = again("v1")  # back to the text the first reviewer kept: that answer stands
    assert back["review_answered"] == 1 and queue.list() == [], back
    third = again("v4")
    assert third["review_opened"] == 1 and third["review_asked_again"] == 1, third
    assert len(queue.for_record("m-1", "a", "/n")) == 3


def test_an_item_of_content_the_record_left_is_closed_when_it_returns(store) -> None:
    """Review of this session's fix: answered on v1, changed to v2 (asked again: an open
    item), back to v1. The v1 answer stands, and the v2 item, never carried or renewed
    again, stayed open for ever. It is closed (`answered_earlier`); a dry run only counts."""
    queue = ReviewQueue.for_store(store)
    d = _d("m-2", 1.0)
    queue.queue([_h(d, "v1")], budget=5, run_id="n1", at=NIGHT)
    (first,) = queue.list()
    queue.close(first.item_id, state="resolved", decision="keep", reviewer="r", at=NIGHT,
                operation_id="op-1")  # fmt: skip
    queue.queue([_h(d, "v2")], budget=5, run_id="n2", at=NIGHT + timedelta(days=1))
    (second,) = queue.list()
    dry = queue.queue([_h(d, "v1")], budget=5, run_id="n3", at=NIGHT + timedelta(days=2),
                      dry_run=True)  # fmt: skip
    assert dry["review_moot_closed"] == 1 and queue.get(second.item_id).state == "open"
    back = queue.queue([_h(d, "v1")], budget=5, run_id="n3", at=NIGHT + timedelta(days=2))
    assert back["review_moot_closed"] == 1 and back["review_answered"] == 1, back
    assert queue.list() == []
    moot = queue.get(second.item_id)
    assert (moot.state, moot.decision) == ("resolved", "answered_earlier")
    assert "review_moot_closed" not in queue.queue([_h(d, "v1")], budget=5, run_id="n4",
                                                   at=NIGHT + timedelta(days=3))  # fmt: skip


def test_a_kept_pair_does_not_silence_another_newer_record(store) -> None:
    """Session 22 left this: a `keep` on a POSSIBLE_UPDATE item answered "p2 does not
    replace p1", and the finding stayed answered when a later night found p3, another newer
    record, as p1's likely update: p1 was never asked about again. An open item kept naming
    the pair it was opened with, so `supersede` took a record the night no longer pointed
    at. Another pair is another finding: renewed in place while open, asked again after a
    resolved item; back to the pair a reviewer kept, that answer stands."""
    queue = ReviewQueue.for_store(store)
    nights = _Nights(queue)

    def run(pair: str, *, extra: tuple[Decision, ...] = ()) -> dict[str, int]:
        return nights(_h(_d("p1", 1.0, Reason.POSSIBLE_UPDATE, pair=pair), "v1"), *extra)

    run("p2")
    (first,) = queue.list()
    changed = run("p3")  # open: renewed for the pair the night found, nights from 1
    assert changed["review_pair_changed"] == 1 and "review_content_changed" not in changed
    assert changed["review_carried"] == 1 and changed["review_opened"] == 0, changed
    (renewed,) = queue.list()
    assert (renewed.item_id, renewed.pair_id, renewed.nights) == (first.item_id, "p3", 1)
    assert "review_pair_changed" not in run("p3")  # the same pair again: carried
    assert queue.get(first.item_id).nights == 2  # type: ignore[union-attr]
    assert queue.close(first.item_id, state="resolved", decision="keep", reviewer="r",
                       at=NIGHT, operation_id="op-1")  # fmt: skip
    answered = run("p3")
    assert answered["review_answered"] == 1 and queue.list() == [], answered
    other = run("p4")  # kept for p3; p4 is a question no reviewer has answered
    assert other["review_opened"] == 1 and other["review_asked_again"] == 1, other
    (second,) = queue.list()
    assert second.item_id != first.item_id and second.pair_id == "p4"
    kept = queue.get(first.item_id)
    assert kept is not None and (kept.state, kept.pair_id) == ("resolved", "p3")
    back = run("p3")  # back to the pair the reviewer kept: the p4 item has nothing to ask
    assert back["review_answered"] == 1 and back["review_moot_closed"] == 1, back
    assert queue.list() == []
    # a record's other findings never turn on its pair
    both = Decision("q1", "a", "/n", Action.review, [Reason.POSSIBLE_UPDATE, Reason.MISSING_OWNER],
                    0.5, priority=1.0, pair="q2", memory_type="semantic")  # fmt: skip
    run("p3", extra=(_h(both, "w1"),))
    both.pair = "q3"
    counts = run("p3", extra=(both,))
    assert counts["review_pair_changed"] == 1 and counts["review_carried"] == 2, counts


@pytest.mark.parametrize("closing", ["answered_earlier", "deleted", "erased"])
def test_an_item_memlife_closed_answers_nothing(store, closing: str) -> None:
    """A finding counted as answered only because memlife had closed its item: kept on v1,
    asked again on v2, the record back on v1 (the v2 item closed `answered_earlier`), then
    on v2 again, and the v2 finding was silenced (`review_answered`) although no reviewer
    ever saw v2. The same for an item closed with its record (`deleted`, `erased`) when the
    id comes back. memlife's own closings answer nothing: the finding is asked again, and a
    return to the kept text closes the new item too."""
    queue = ReviewQueue.for_store(store)
    d = _d(f"m-3-{closing}", 1.0)  # the HTTP server is shared: an id per case
    nights = _Nights(queue)

    def run(sha: str) -> dict[str, int]:
        return nights(_h(d, sha))

    run("v1")
    (first,) = queue.list()
    queue.close(first.item_id, state="resolved", decision="keep", reviewer="r", at=NIGHT,
                operation_id="op-1")  # fmt: skip
    run("v2")
    (second,) = queue.list()
    if closing == "answered_earlier":
        assert run("v1")["review_moot_closed"] == 1
    else:
        queue.close(second.item_id, state="resolved", decision=closing, reviewer="memlife:n",
                    at=NIGHT, operation_id="op-2")  # fmt: skip
    assert queue.get(second.item_id).decision == closing  # type: ignore[union-attr]
    again = run("v2")
    assert again["review_answered"] == 0 and again["review_opened"] == 1, again
    assert again["review_asked_again"] == 1
    (third,) = queue.list()
    assert third.item_id not in (first.item_id, second.item_id)
    assert third.content_sha256 == "v2"
    assert run("v2")["review_carried"] == 1  # carried, not opened again
    back = run("v1")  # the kept text: the new item is closed, past the one memlife closed
    assert back["review_moot_closed"] == 1 and back["review_answered"] == 1, back
    assert queue.list() == []


def test_a_verify_answers_a_stale_verification_only_until_it_is_stale_again(store) -> None:
    """A reviewer's `verify` stamps the record; the finding made again later means that
    stamp has aged, and it was counted answered for good (same content): the record was
    never asked about again. A `keep` of the same finding still stands."""
    queue = ReviewQueue.for_store(store)
    verified, kept = (_d(f"s-{n}", 1.0, Reason.STALE_VERIFICATION) for n in ("v", "k"))
    queue.queue([_h(verified, "v1"), _h(kept, "k1")], budget=5, run_id="n1", at=NIGHT)
    for item, decision in zip(sorted(queue.list(), key=lambda i: i.record_id), ("keep", "verify"),
                              strict=True):  # fmt: skip
        queue.close(item.item_id, state="resolved", decision=decision, reviewer="r", at=NIGHT,
                    operation_id="op")  # fmt: skip
    later = queue.queue([_h(verified, "v1"), _h(kept, "k1")], budget=5, run_id="n2",
                        at=NIGHT + timedelta(days=200))  # fmt: skip
    assert later["review_opened"] == 1 and later["review_answered"] == 1, later
    (again,) = queue.list()
    assert again.record_id == "s-v" and again.reason == "STALE_VERIFICATION"


def test_a_keep_on_a_finding_time_brings_lapses_after_the_policys_days(store) -> None:
    """Session 24's Left: a `keep` on STALE_VERIFICATION or LOW_SCORE answered the finding
    for good while the content stayed, so a record kept once was never asked about again
    however old it grew. It answers for ReviewPolicy.keep_answers_days now; a finding of
    the record's own state (a missing owner) stays answered."""
    queue = ReviewQueue.for_store(store)
    days = ReviewPolicy().keep_answers_days
    assert days is not None
    stale, low, owner = (_d("t-s", 1.0, Reason.STALE_VERIFICATION), _d("t-l", 1.0, Reason.LOW_SCORE),
                         _d("t-o", 1.0))  # fmt: skip

    def night(at: datetime, run: str) -> dict[str, int]:
        found = ReviewCandidates(5, at - timedelta(days=days))
        found.add([_h(stale, "s1"), _h(low, "l1"), _h(owner, "o1")])
        return dict(queue.queue(found, budget=5, run_id=run, at=at))

    def keep_all(at: datetime) -> None:
        for item in queue.list():
            queue.close(item.item_id, state="resolved", decision="keep", reviewer="r", at=at,
                        operation_id="op")  # fmt: skip

    assert night(NIGHT, "k1")["review_opened"] == 3
    keep_all(NIGHT)
    within = night(NIGHT + timedelta(days=days - 1), "k2")
    assert within.get("review_opened", 0) == 0 and within["review_answered"] == 3, within
    lapsed = night(NIGHT + timedelta(days=days + 1), "k3")
    assert lapsed["review_opened"] == 2 and lapsed["review_answered"] == 1, lapsed
    assert sorted(i.reason for i in queue.list()) == ["LOW_SCORE", "STALE_VERIFICATION"]
    keep_all(NIGHT + timedelta(days=days + 2))  # kept again: a new year's answer
    again = night(NIGHT + timedelta(days=2 * days), "k4")
    assert again.get("review_opened", 0) == 0 and again["review_answered"] == 3, again
    # with no lapse (None: for good) nothing is asked again
    forever = ReviewCandidates(5, None)
    forever.add([_h(stale, "s1"), _h(low, "l1"), _h(owner, "o1")])
    counts = queue.queue(forever, budget=5, run_id="k5", at=NIGHT + timedelta(days=9 * days))
    assert counts.get("review_opened", 0) == 0, counts


@pytest.mark.parametrize("resolved_at", ["2026-11-01T02:15:00", "yesterday", None])
def test_a_keep_with_an_unreadable_resolve_time_lapses_and_the_night_goes_on(resolved_at) -> None:
    """A row edited by hand (no zone, not a time, none): comparing it crashed the night
    (naive against aware) or raised; it reads as long ago, so the record is asked again."""
    from memlife.review_queue.candidates import _answers

    item = ReviewItem("i", "r", "STALE_VERIFICATION", None, "a", "/n", "semantic", "team", 1.0,
                      "resolved", "keep", "alice", 1, "n1", NIGHT.isoformat(), "n1",
                      NIGHT.isoformat(), resolved_at, None, "h")  # fmt: skip
    assert not _answers(item, NIGHT)
    assert _answers(item, None)  # no lapse configured: a keep stands
    fresh = dataclasses.replace(item, resolved_at=(NIGHT + timedelta(days=1)).isoformat())
    assert _answers(fresh, NIGHT)
