"""Guards a mutation audit found unattacked (session 35: the review queue, its resolve, the
nightly sweep of items not found again and a batch's planning). Each test holds one
guarantee that a named guard in memlife/ alone keeps, and fails when that guard is removed
or loosened. Real components: the SQLite store and its review queue, the default policy,
the real resolve (journal, applier, receipts)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.model import MemoryRecord, Status
from memlife.plan import Action, Decision, Reason
from memlife.review_queue import ReviewError, ReviewQueue, item_id, resolve
from memlife.stores.sqlite import SqliteStore

T0 = datetime(2026, 11, 1, 2, tzinfo=UTC)
NS = "/users/u-1/facts"
POLICY = "policies/default.yaml"


def rec(rid: str, content: str = "Lives in Lisbon.", **kw: Any) -> MemoryRecord:
    base = dict(id=rid, actor_id="u-1", namespace=NS, memory_type="semantic", content=content,
                created_at=T0 - timedelta(days=9), subject="city", owner=None)  # fmt: skip
    return MemoryRecord.model_validate({**base, **kw})


def finding(r: MemoryRecord, *reasons: Reason, pair: str | None = None) -> Decision:
    """A night's review finding on ``r`` (MISSING_OWNER unless told), with its content hash."""
    return Decision(r.id, r.actor_id, r.namespace, Action.review,
                    list(reasons or (Reason.MISSING_OWNER,)), 0.5, content_sha256=r.sha256,
                    priority=1.0, memory_type=str(r.memory_type), pair=pair)  # fmt: skip


def night(store: SqliteStore, run_id: str, at: datetime, *decisions: Decision) -> None:
    ReviewQueue.for_store(store).queue(list(decisions), budget=10, run_id=run_id, at=at)


@pytest.fixture()
def store(home: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(home / "memlife.db")
    yield s
    s.close()


# -- 1. resolving.py: a replacement is of the item's own actor AND namespace -----------------
def test_a_supersede_by_a_record_of_another_namespace_of_the_same_actor_is_refused(
    store: SqliteStore,
) -> None:
    """Attacks ``(newer.actor_id, newer.namespace) != (item.actor_id, item.namespace)`` in
    resolve: the replacement a reviewer names with ``--by`` must live in the item's own
    shard. u-1's record in /users/u-1/notes is the same actor but another namespace (another
    tenant's memory, invariant 8): superseding the facts record by it is refused, nothing
    is written, the item stays open."""
    old = rec("m-old")
    other = rec("m-other", "Lives in Porto.", namespace="/users/u-1/notes",
                created_at=T0 - timedelta(days=1))  # fmt: skip
    store.put_many([old, other])
    night(store, "night-1", T0, finding(old))
    iid = item_id("m-old", "MISSING_OWNER", "u-1", NS)
    with pytest.raises(ReviewError, match="another actor/namespace"):
        resolve(store, iid, "supersede", "eve@example.com", by="m-other", policy=POLICY,
                now=T0 + timedelta(hours=1))  # fmt: skip
    kept = store.get("m-old")
    assert kept is not None and kept.status is Status.active
    assert kept.provenance.replaced_by is None
    assert store.get("m-other") == other
    item = ReviewQueue.for_store(store).get(iid)
    assert item is not None and item.state == "open"


# -- 2. resolving.py: a record is never superseded by itself --------------------------------
def test_a_record_cannot_be_superseded_by_itself(store: SqliteStore) -> None:
    """Attacks ``if replacement == item.record_id`` in resolve (invariant 3): a reviewer's
    ``--by`` naming the item's own record passes every other check (it exists, is active,
    in the same shard). It is refused before anything runs: the record stays active with
    no ``replaced_by`` pointing at itself (a cycle recall would follow), the item open."""
    r = rec("m-1")
    store.put_many([r])
    night(store, "night-1", T0, finding(r))
    iid = item_id("m-1", "MISSING_OWNER", "u-1", NS)
    with pytest.raises(ReviewError, match="superseded by itself"):
        resolve(store, iid, "supersede", "eve@example.com", by="m-1", policy=POLICY,
                now=T0 + timedelta(hours=1))  # fmt: skip
    kept = store.get("m-1")
    assert kept is not None and kept.status is Status.active
    assert kept.provenance.replaced_by is None
    item = ReviewQueue.for_store(store).get(iid)
    assert item is not None and item.state == "open"


# -- 3. resolving.py: a record under legal hold is not verified either -----------------------
def test_a_verify_of_a_record_under_legal_hold_is_refused_and_stamps_nothing(
    store: SqliteStore,
) -> None:
    """Attacks ``ReviewDecision.verify`` in resolve's held tuple (supersede, delete,
    verify): nothing changes a held record (invariant 1), a verification stamp included.
    The verify is refused naming the hold; the record's ``last_verified_at`` stays as it
    was and the item stays open (keep may still close it)."""
    r = rec("m-held", retention_class="legal_hold", last_verified_at=T0 - timedelta(days=400))
    store.put_many([r])
    night(store, "night-1", T0, finding(r, Reason.STALE_VERIFICATION))
    iid = item_id("m-held", "STALE_VERIFICATION", "u-1", NS)
    with pytest.raises(ReviewError, match="under legal hold"):
        resolve(store, iid, "verify", "eve@example.com", policy=POLICY,
                now=T0 + timedelta(hours=1))  # fmt: skip
    held = store.get("m-held")
    assert held is not None and held.last_verified_at == r.last_verified_at
    item = ReviewQueue.for_store(store).get(iid)
    assert item is not None and item.state == "open"


# -- 4. resolving.py: a delete closes the record's other open items --------------------------
def test_a_reviewers_delete_closes_the_records_other_open_items(
    store: SqliteStore, home: Path
) -> None:
    """Attacks ``decision in (ReviewDecision.supersede, ReviewDecision.delete)`` in resolve:
    once a reviewer deleted the record, its other items have nothing left to decide. They
    must not stay in the reviewer's queue asking about a record that is gone: each is
    closed with the delete, by the same reviewer, at the same operation."""
    r = rec("m-1")
    store.put_many([r])
    night(store, "night-1", T0, finding(r, Reason.MISSING_OWNER, Reason.STALE_VERIFICATION))
    first = item_id("m-1", "MISSING_OWNER", "u-1", NS)
    second = item_id("m-1", "STALE_VERIFICATION", "u-1", NS)
    out = resolve(store, first, "delete", "eve@example.com", policy=POLICY,
                  now=T0 + timedelta(hours=1), receipts=f"file://{home}/receipts")  # fmt: skip
    assert out["item"]["state"] == "resolved"
    assert store.get("m-1") is None
    queue = ReviewQueue.for_store(store)
    other = queue.get(second)
    assert other is not None
    assert (other.state, other.decision, other.reviewer) == (
        "resolved",
        "delete",
        "eve@example.com",
    )
    assert other.operation_id == out["item"]["operation_id"]
    assert [i.item_id for i in queue.list()] == []


# -- 5. resolving.py: a disputed source is never deleted with its replacement ---------------
def test_a_delete_that_would_take_a_disputed_source_along_is_refused(
    store: SqliteStore, home: Path
) -> None:
    """Attacks ``if disputed:`` in resolving._followers: deleting a replacement R takes the
    superseded records that point to it (REPLACEMENT_DELETED). One of them, S, is disputed
    by a reviewer: a disputed record is never deleted until its item is resolved. The
    delete of R is refused before anything is written: R and S both stay, R's item open."""
    r = rec("m-R", "Lives in Lisbon.", provenance={"supersedes": ["m-S"]})
    s = rec("m-S", "Lives in Porto.", status="superseded", provenance={"replaced_by": "m-R"},
            status_changed_at=T0 - timedelta(days=1))  # fmt: skip
    store.put_many([r, s])
    night(store, "night-1", T0, finding(r), finding(s))
    ir = item_id("m-R", "MISSING_OWNER", "u-1", NS)
    is_ = item_id("m-S", "MISSING_OWNER", "u-1", NS)
    receipts = f"file://{home}/receipts"
    resolve(store, is_, "dispute", "ana@example.com", policy=POLICY,
            now=T0 + timedelta(hours=1), receipts=receipts)  # fmt: skip
    assert ReviewQueue.for_store(store).disputed("u-1", NS) == frozenset({"m-S"})
    with pytest.raises(ReviewError, match="disputed"):
        resolve(store, ir, "delete", "eve@example.com", policy=POLICY,
                now=T0 + timedelta(hours=2), receipts=receipts)  # fmt: skip
    assert store.get("m-R") is not None and store.get("m-S") is not None
    item = ReviewQueue.for_store(store).get(ir)
    assert item is not None and item.state == "open"


# -- 6. unfinished.py: another actor's attempt on the same id is not this item's ------------
def test_another_actors_delete_of_a_reused_id_is_not_taken_for_an_earlier_attempt(
    store: SqliteStore, home: Path
) -> None:
    """Attacks ``(o.actor_id, o.namespace) == (item.actor_id, item.namespace)`` in
    unfinished.earlier_attempt. u-2's m-1 has an open item; the id passes to u-1 (u-2's
    record erased outside any run, u-1 imports an m-1), and a reviewer deletes u-1's m-1
    through u-1's item. u-2 then imports its m-1 again. A reviewer's delete through u-2's
    item is its own first attempt: u-1's receipted delete of the id must not be read as an
    earlier attempt of it (refused as "another request", or worse, skipped as done)."""
    theirs = rec("m-1", "Works at the harbour.", actor_id="u-2", namespace="/users/u-2/facts")
    mine = rec("m-1", "Lives in Lisbon.")
    receipts = f"file://{home}/receipts"
    store.put_many([theirs])
    night(store, "night-0", T0, finding(theirs))
    store.delete_many(["m-1"])
    store.put_many([mine])
    night(store, "night-1", T0 + timedelta(days=1), finding(mine))
    resolve(store, item_id("m-1", "MISSING_OWNER", "u-1", NS), "delete", "eve@example.com",
            policy=POLICY, now=T0 + timedelta(days=1, hours=1), receipts=receipts)  # fmt: skip
    assert store.get("m-1") is None
    store.put_many([theirs])
    iid = item_id("m-1", "MISSING_OWNER", "u-2", "/users/u-2/facts")
    out = resolve(store, iid, "delete", "bob@example.com", policy=POLICY,
                  now=T0 + timedelta(days=1, hours=2), receipts=receipts)  # fmt: skip
    assert out["item"]["state"] == "resolved" and out["item"]["reviewer"] == "bob@example.com"
    assert store.get("m-1") is None


# -- 7. unfinished.py: an attempt from before the item was opened is not an earlier one -----
def _deleted_then_imported_again(
    store: SqliteStore, home: Path, second_night: datetime
) -> tuple[str, str]:
    """m-1 opened at T0, deleted by a reviewer (now: the wall clock), imported again, and
    asked about again by a night at ``second_night`` (a delete's answer does not hold for a
    record that is back: a new item follows the resolved one). The two items' ids."""
    r = rec("m-1")
    store.put_many([r])
    night(store, "night-1", T0, finding(r))
    first = item_id("m-1", "MISSING_OWNER", "u-1", NS)
    resolve(store, first, "delete", "eve@example.com", policy=POLICY,
            receipts=f"file://{home}/receipts")  # fmt: skip
    assert store.get("m-1") is None
    store.put_many([r])  # imported again
    night(store, "night-2", second_night, finding(r))
    (again,) = ReviewQueue.for_store(store).list()
    assert again.item_id != first and again.record_id == "m-1"
    return first, again.item_id


@pytest.mark.parametrize("later", [True, False], ids=["night-after", "night-at-earlier-cutoff"])
def test_a_record_deleted_then_imported_again_can_be_deleted_again_by_its_new_item(
    store: SqliteStore, home: Path, later: bool
) -> None:
    """Holds the filters of unfinished.earlier_attempt that tell a predecessor item's
    decision apart (``o.created_at >= opened``, and the operations other items were closed
    with). The reviewer's delete through the item a later night opened for the re-imported
    record is a first attempt, not an unfinished attempt of it (refused as "another
    request").

    The second case was a bug this audit found (fixed in memlife/review_queue/
    unfinished.py): ``created_at`` is the journal's wall clock, ``opened_at`` the opening
    night's cutoff, so a night whose cutoff lies before the predecessor's delete (a
    catch-up or late night, ``--now``) opened the follow-up item "before" that receipted
    delete, which was taken for an earlier attempt; the reviewer was refused for good
    though nothing was unfinished. The operations other items were closed with are no
    attempt of this one."""
    # after the first delete's operation (the journal's clock), or a day after T0: earlier
    second = datetime.now(UTC) + timedelta(seconds=1) if later else T0 + timedelta(days=1)
    _, again = _deleted_then_imported_again(store, home, second)
    out = resolve(store, again, "delete", "eve@example.com", policy=POLICY,
                  receipts=f"file://{home}/receipts")  # fmt: skip
    assert out["item"]["state"] == "resolved"
    assert store.get("m-1") is None


# -- 8. unfinished.py: a killed supersede is not finished as a supersede to another record --
def test_a_killed_supersede_is_not_finished_under_a_request_naming_another_replacement(
    store: SqliteStore, home: Path
) -> None:
    """Attacks ``op.replacement_id != replacement`` in unfinished.same_request. ana's
    supersede of m-old by m-a is killed after the supersede, before its receipt. ana then
    asks for a supersede by m-b: that is another request, refused until the night
    completes the first. Finished under it, the item would read "superseded" for a request
    naming m-b while the record points to m-a."""
    from memlife.errors import InjectedFault
    from memlife.faults import inject

    old = rec("m-old", "Lives in Porto.")
    a = rec("m-a", "Lives in Lisbon.", created_at=T0 - timedelta(days=1))
    b = rec("m-b", "Lives in Braga.", created_at=T0 - timedelta(days=1))
    store.put_many([old, a, b])
    night(store, "night-1", T0, finding(old))
    iid = item_id("m-old", "MISSING_OWNER", "u-1", NS)
    receipts = f"file://{home}/receipts"
    with inject("before_receipt"), pytest.raises(InjectedFault):
        resolve(store, iid, "supersede", "ana@example.com", by="m-a", policy=POLICY,
                now=T0 + timedelta(hours=1), receipts=receipts)  # fmt: skip
    left = store.get("m-old")
    assert left is not None and left.provenance.replaced_by == "m-a"  # the supersede ran
    with pytest.raises(ReviewError, match="another request"):
        resolve(store, iid, "supersede", "ana@example.com", by="m-b", policy=POLICY,
                now=T0 + timedelta(hours=2), receipts=receipts)  # fmt: skip
    item = ReviewQueue.for_store(store).get(iid)
    assert item is not None and item.state == "open"


# -- 9. queue.py: a record's items are its own actor's and namespace's ------------------------
def test_a_delete_never_closes_another_actors_item_left_under_an_old_style_id(
    store: SqliteStore, home: Path
) -> None:
    """Attacks ``(i.actor_id, i.namespace) == scope[i.item_id]`` in ReviewQueue.for_records.
    An item opened before the scope was in the id (``legacy_item_id``: record and reason
    only) is u-2's, about u-2's m-7, since erased; u-1 now has an m-7 with an item of its
    own. A reviewer's delete of u-1's m-7 closes u-1's other items: u-2's item, under the
    same old-style id, is another tenant's question and stays open, untouched."""
    from memlife.review_queue import ReviewItem, legacy_item_id

    queue = ReviewQueue.for_store(store)
    at = T0.isoformat()
    old = legacy_item_id("m-7", "STALE_VERIFICATION")
    theirs = ReviewItem(old, "m-7", "STALE_VERIFICATION", None, "u-2", "/users/u-2/facts",
                        "semantic", None, 1.0, "open", None, None, 1, "night-0", at,
                        "night-0", at, None, None, "h2")  # fmt: skip
    queue.backend.write_night([], [theirs], "night-0", at)
    mine = rec("m-7")
    store.put_many([mine])
    night(store, "night-1", T0 + timedelta(days=1), finding(mine))
    assert [i.item_id for i in queue.for_record("m-7", "u-1", NS)] == [
        item_id("m-7", "MISSING_OWNER", "u-1", NS)
    ]
    resolve(store, item_id("m-7", "MISSING_OWNER", "u-1", NS), "delete", "eve@example.com",
            policy=POLICY, now=T0 + timedelta(days=1, hours=1),
            receipts=f"file://{home}/receipts")  # fmt: skip
    assert store.get("m-7") is None
    left = queue.get(old)
    assert left is not None and (left.state, left.decision, left.reviewer) == ("open", None, None)


# -- candidates.py: a rerun's withheld findings survive the merge of planning processes -----
def test_merging_planning_processes_keeps_every_processs_withheld_items(
    store: SqliteStore,
) -> None:
    """Attacks ``out.withheld += p.withheld`` in ReviewCandidates.merge: a rerun withholds
    the POSSIBLE_UPDATE findings about its own replacements (run_planning.reviewable), and
    the review sweep must leave those items open. Planned in several processes, the parts
    are merged: each part's withheld ids reach the merged set, or the sweep closes them as
    "no longer found" on a rerun planned in parallel."""
    from memlife.review_queue.candidates import ReviewCandidates

    backend = ReviewQueue.for_store(store).backend
    parts = [ReviewCandidates(10), ReviewCandidates(10)]
    parts[0].withheld += ["item-a", "legacy-a"]
    parts[1].withheld += ["item-b"]
    parts[1].add([finding(rec("m-1"))], backend)
    merged = ReviewCandidates.merge(parts, 10, backend)
    assert sorted(merged.withheld) == ["item-a", "item-b", "legacy-a"]
    assert merged.new == 1


# -- sqlite.py: a dispute protects its own shard's record only ----------------------------
def test_disputed_records_are_read_per_actor_and_namespace(store: SqliteStore) -> None:
    """Attacks ``AND namespace=?`` in SqliteReviews.disputed: planning reads the disputed
    records of the shard it plans (a disputed record is never deleted, and pins what it
    would go with). u-1's dispute in /users/u-1/notes is about that namespace's record;
    the facts shard's list of disputed records stays empty, and another actor's too."""
    note = rec("m-n", namespace="/users/u-1/notes")
    store.put_many([note])
    night(store, "night-1", T0, finding(note))
    queue = ReviewQueue.for_store(store)
    queue.close(item_id("m-n", "MISSING_OWNER", "u-1", "/users/u-1/notes"), state="disputed",
                decision="dispute", reviewer="ana", at=T0, operation_id=None)  # fmt: skip
    assert queue.disputed("u-1", "/users/u-1/notes") == frozenset({"m-n"})
    assert queue.disputed("u-1", NS) == frozenset()
    assert queue.disputed("u-2", "/users/u-1/notes") == frozenset()


# -- review_sweep.py: the sweep of items not found again ---------------------------------------
def sweep(home: Path, store: SqliteStore, *, failed: tuple[tuple[str, str], ...] = ()) -> Any:
    """A dry run's sweep at T0 + 2 days over every open item (counts what it would close)."""
    from memlife.review_sweep import close_unfound
    from memlife.run_start import start_run
    from memlife.run_types import RunConfig

    ctx = start_run(RunConfig(dry_run=True, now=T0 + timedelta(days=2),
                              store=f"sqlite:///{home / 'memlife.db'}"))  # fmt: skip
    queue = ReviewQueue.for_store(store)
    return close_unfound(ctx, store, queue, queue.list(states=("open", "waiting")),
                         found=(), failed_shards=failed)  # fmt: skip


def test_the_sweep_reads_an_id_taken_by_another_actor_as_the_record_gone(
    store: SqliteStore, home: Path
) -> None:
    """Attacks ``_same_shard`` in review_sweep._closing: u-1's item is about u-1's m-1; the
    record was erased and u-2 took the id. u-2's record is no evidence about u-1's finding
    (its owner, its score): the item is closed as ``record_gone``, not cleared by, or left
    open on, another tenant's record."""
    mine = rec("m-1")
    store.put_many([mine])
    night(store, "night-1", T0, finding(mine))
    store.delete_many(["m-1"])
    store.put_many([rec("m-1", "Works at the harbour.", actor_id="u-2",
                        namespace="/users/u-2/facts")])  # fmt: skip
    assert dict(sweep(home, store)) == {"review_record_gone": 1}


def test_the_sweep_reads_a_pair_id_taken_by_another_actor_as_the_pair_gone(
    store: SqliteStore, home: Path
) -> None:
    """Attacks ``not _same_shard(newer, item)`` in review_sweep._finding_gone: a
    POSSIBLE_UPDATE item pairs u-1's m-old with u-1's m-new. m-new was erased and u-2 took
    its id with an active record: that is not a newer statement of u-1's, so the finding
    is gone and the item is closed (cleared), not kept open on another tenant's record."""
    old = rec("m-old", "Lives in Porto.", owner="team-a")
    new = rec("m-new", "Lives in Lisbon.", owner="team-a", created_at=T0 - timedelta(days=1))
    store.put_many([old, new])
    night(store, "night-1", T0, finding(old, Reason.POSSIBLE_UPDATE, pair="m-new"))
    store.delete_many(["m-new"])
    store.put_many([rec("m-new", "Works at the harbour.", actor_id="u-2", owner="team-b",
                        namespace="/users/u-2/facts", created_at=T0 - timedelta(days=2))])  # fmt: skip
    assert dict(sweep(home, store)) == {"review_cleared": 1}


def test_the_sweep_leaves_the_items_of_a_shard_whose_planning_failed(
    store: SqliteStore, home: Path
) -> None:
    """Attacks ``f"{i.actor_id}:{i.namespace}" not in skip_shards`` in close_unfound: a
    shard whose planning failed was not looked at tonight, so its items were not "found
    again" for want of a look, not of a finding. Its item about a record now gone stays
    for a night that plans the shard; another shard's is closed (the control)."""
    a = rec("m-a")
    b = rec("m-b", namespace="/users/u-1/notes")
    store.put_many([a, b])
    night(store, "night-1", T0, finding(a), finding(b))
    store.delete_many(["m-a", "m-b"])
    assert dict(sweep(home, store, failed=(("u-1", NS),))) == {"review_record_gone": 1}


def test_the_sweep_leaves_the_items_of_a_record_under_legal_hold(
    store: SqliteStore, home: Path
) -> None:
    """Attacks ``or record.held`` in review_sweep._closing: a held record is not planned
    like others (nothing acts on it), so the store's evidence that its finding is gone is
    not read: its MISSING_OWNER item stays open though an owner was set since."""
    r = rec("m-h", retention_class="legal_hold")
    store.put_many([r])
    night(store, "night-1", T0, finding(r))
    store.put_many([r.model_copy(update={"owner": "team-a"})])
    assert dict(sweep(home, store)) == {}


# -- report.py: a retried shard is one (actor, namespace), not one actor ---------------------
def test_the_report_keeps_every_namespace_of_one_actor(tmp_path: Path) -> None:
    """Attacks ``shard = (decisions[0].actor_id, decisions[0].namespace)`` in
    ReportWriter.write: a shard written twice (a retried batch) keeps its first rows, and a
    shard is an actor's namespace. An actor's second namespace in the same batch is
    another shard: its rows are in the report, not dropped as a retry of the first."""
    from memlife.report import ReportWriter

    facts = [Decision("m-1", "u-1", NS, Action.retain, [Reason.SCORE_OK], 0.9)]
    notes = [Decision("m-2", "u-1", "/users/u-1/notes", Action.retain, [Reason.SCORE_OK], 0.8)]
    w = ReportWriter(tmp_path / "report")
    w.write(facts)
    w.write(notes)
    w.write(facts)  # the retry: kept once
    w.close(parquet=False)
    lines = w.jsonl_path.read_text().splitlines()
    assert w.rows == 2 and len(lines) == 2
    assert ['"m-1"' in lines[0], '"m-2"' in lines[1]] == [True, True]


# -- run_planning.py: a batch plans each shard with its own disputed records -----------------
def test_a_batch_protects_each_shards_disputed_records_and_only_those(
    store: SqliteStore, home: Path
) -> None:
    """Attacks ``disputed(shard.actor_id, shard.namespace)`` in run_planning.shard_hints
    and ``AND namespace=?`` in SqliteReviews.disputed: a disputed record is never deleted,
    even expired. In one batch of two shards of u-1, the facts shard's expired m-a is
    disputed and retained (DISPUTED). The dispute on u-1's facts record m-b, since erased,
    is not about the notes record that took the id m-b: expired, it is deleted."""
    import json

    from memlife.pipeline import RunConfig
    from memlife.report import ReportWriter
    from memlife.run_planning import process_batch
    from memlife.run_start import start_run
    from memlife.run_types import Shard

    a = rec("m-a", expires_at=T0 - timedelta(days=1))
    erased = rec("m-b", "Likes jazz.")
    store.put_many([a, erased])
    night(store, "night-0", T0 - timedelta(days=2), finding(a), finding(erased))
    queue = ReviewQueue.for_store(store)
    for rid in ("m-a", "m-b"):
        queue.close(item_id(rid, "MISSING_OWNER", "u-1", NS), state="disputed",
                    decision="dispute", reviewer="ana", at=T0 - timedelta(days=2),
                    operation_id=None)  # fmt: skip
    store.delete_many(["m-b"])
    b = rec("m-b", "Likes jazz.", namespace="/users/u-1/notes", expires_at=T0 - timedelta(days=1))
    store.put_many([b])
    ctx = start_run(RunConfig(dry_run=True, now=T0, store=f"sqlite:///{home / 'memlife.db'}"))
    report = ReportWriter(home / "batch-report")
    out = process_batch(ctx, store, [Shard("u-1", NS), Shard("u-1", "/users/u-1/notes")], report)
    report.close(parquet=False)
    assert out.failed_shards == [] and out.shards == 2
    rows = {r["id"]: r for r in map(json.loads, report.jsonl_path.read_text().splitlines())}
    assert rows["m-a"]["action"] == "retain" and "DISPUTED" in rows["m-a"]["reasons"]
    assert rows["m-b"]["action"] == "delete_expired", rows["m-b"]


# -- resolving.py: a decision names a reviewer -------------------------------------------------
def test_a_blank_reviewer_identity_is_refused(store: SqliteStore) -> None:
    """Attacks ``not reviewer.strip()`` in resolve: every decision is receipted with the
    reviewer's identity. A reviewer of spaces only names nobody: refused before anything
    runs, the item stays open."""
    r = rec("m-1")
    store.put_many([r])
    night(store, "night-1", T0, finding(r))
    iid = item_id("m-1", "MISSING_OWNER", "u-1", NS)
    with pytest.raises(ReviewError, match="reviewer identity is required"):
        resolve(store, iid, "keep", "   ", policy=POLICY, now=T0 + timedelta(hours=1))
    item = ReviewQueue.for_store(store).get(iid)
    assert item is not None and (item.state, item.reviewer) == ("open", None)


def test_the_sweep_counts_a_verification_at_the_items_opening_instant_as_since(
    store: SqliteStore, home: Path
) -> None:
    """Attacks ``verified >= opened_at`` in review_sweep._finding_gone: a STALE_VERIFICATION
    item is cleared once the record was verified since the item was opened, that instant
    included (a verify stamped at the night's cutoff, the item's ``opened_at``). One
    second before it, the finding still holds and the item stays open (the control)."""
    r = rec("m-v", last_verified_at=T0 - timedelta(days=400))
    store.put_many([r])
    night(store, "night-1", T0, finding(r, Reason.STALE_VERIFICATION))
    store.put_many([r.model_copy(update={"last_verified_at": T0 - timedelta(seconds=1)})])
    assert dict(sweep(home, store)) == {}
    store.put_many([r.model_copy(update={"last_verified_at": T0})])
    assert dict(sweep(home, store)) == {"review_cleared": 1}


# -- cli/review.py: a decision run that failed exits 3 -----------------------------------------
def test_a_resolve_whose_delete_failed_exits_3_and_leaves_the_item_open(
    store: SqliteStore, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks ``status != "success" -> exit 3`` in `memlife review resolve` (the thirteenth
    audit left it untested). The record is rewritten by another connection after resolve's
    checks and before its delete: the delete is refused (its precondition, the reviewed
    content, no longer holds), the run is a partial failure, and a script calling the CLI
    must see exit 3, not 0; the item stays open and the rewritten record stays."""
    from typer.testing import CliRunner

    import memlife.quarantine as quarantine
    from memlife.cli import app

    r = rec("m-1")
    store.put_many([r])
    night(store, "night-1", T0, finding(r))
    iid = item_id("m-1", "MISSING_OWNER", "u-1", NS)
    real = quarantine.manual_run

    def run_then_rewrite(*args: Any, **kwargs: Any) -> Any:
        run = real(*args, **kwargs)  # resolve has checked the record: now it changes
        with SqliteStore(home / "memlife.db") as other:
            other.put_many([rec("m-1", "Lives in Porto now.")])
        return run

    monkeypatch.setattr(quarantine, "manual_run", run_then_rewrite)
    res = CliRunner().invoke(
        app, ["review", "resolve", iid, "--decision", "delete", "--reviewer", "eve@example.com",
              "--json"],
    )  # fmt: skip
    assert res.exit_code == 3, res.output
    left = store.get("m-1")
    assert left is not None and left.content == "Lives in Porto now."
    item = ReviewQueue.for_store(store).get(iid)
    assert item is not None and item.state == "open"


# -- lease.scoped on every manual run: a failure gives the store's lease back ------------------
def _leases(store: SqliteStore) -> int:
    return int(store.connection.execute("SELECT COUNT(*) FROM leases").fetchone()[0])


@pytest.mark.parametrize("entry", ["resolve", "place_hold", "import_update"])
def test_a_manual_run_that_fails_gives_the_stores_lease_back(
    store: SqliteStore, home: Path, tmp_path: Path, entry: str
) -> None:
    """A review decision, a hold and an import's updates each take the store's lifecycle
    lease for their run. One that raised part way kept it, renewed by its heartbeat for as
    long as the process lived: in a review UI or an agent's process that is for good, and
    the nightly run (another process) found the store held and could not start. Each is
    now given back however the call ends (``lease.scoped``, as erase was)."""
    from memlife.faults import InjectedFault, inject
    from memlife.holds import place_hold
    from memlife.importer import import_file

    r = rec("m-1")
    store.put_many([r])
    night(store, "night-1", T0, finding(r))
    line = tmp_path / "update.jsonl"
    line.write_text(rec("m-1", "Lives in Porto.").to_json() + "\n")
    calls = {
        "resolve": lambda: resolve(store, item_id("m-1", "MISSING_OWNER", "u-1", NS), "keep",
                                   "eve@example.com", policy=POLICY),
        "place_hold": lambda: place_hold(store, ids=["m-1"], policy=POLICY),
        "import_update": lambda: import_file(store, line, policy=POLICY, update=True,
                                             workers=0),
    }  # fmt: skip
    with inject("before_receipt"), pytest.raises(InjectedFault):
        calls[entry]()
    assert _leases(store) == 0  # nothing of this process's left in the lease table
    from memlife import lease

    assert not any(h.backend.connection is store.connection for h in lease._HELD.values())
