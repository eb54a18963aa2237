"""Session 46 (audit 46g): guards that keep two namespaces of ONE actor apart, where the existing tests
hold them only against another actor (u-2). Each test names the guard and the mutant
(the comparison narrowed to the actor alone) it kills."""

from __future__ import annotations

from datetime import timedelta

from memlife.journal import OpKind, OpState, Outcome
from memlife.review_queue import ReviewItem, ReviewQueue, item_id, legacy_item_id
from memlife.stores.sqlite import SqliteStore
from tests.unit.test_guards_session33 import NS, T0, rec
from tests.unit.test_guards_session36e import Env, env, executor, plan, run_one  # noqa: F401

ARCHIVE = "/users/u-1/archive"  # the same actor's other namespace


def test_a_source_gone_is_not_excused_by_a_delete_in_the_actors_other_namespace(
    env: Env,  # noqa: F811
) -> None:
    """Guard: ``(other.actor_id, other.namespace) == (op.actor_id, op.namespace)`` in
    ``apply/appliers/base.py::_removed_since``. u-1's m-a in /facts, planned for a
    supersede, vanished by no operation; u-1 then wrote a record under the id in /archive
    and a night's delete removed it. That delete is of another record: the supersede must
    fail RECORD_MISSING. Mutant (actor only) -> journaled skipped, the loss unreported."""
    store = env[0]
    a, r = rec("m-a"), rec("m-r", "Likes green tea.")
    store.put_many([a, r])
    ex = executor(env)
    op = plan(ex, OpKind.supersede, a, ["SAME_SUBJECT"], replacement="m-r")
    store.delete_many(["m-a"])  # gone by other means (another tool)
    theirs = rec("m-a", "Plays the cello.", namespace=ARCHIVE, expires_at=T0 - timedelta(days=1))
    store.put_many([theirs])
    other = executor(env, "run-b")
    gone = run_one(other, plan(other, OpKind.delete, theirs, ["HARD_EXPIRED"]))
    assert (gone.state, gone.outcome) == (OpState.RECEIPTED, Outcome.deleted)
    done = run_one(ex, op)
    assert (done.state, done.last_error) == (OpState.FAILED, "RECORD_MISSING")


def test_an_old_style_item_of_the_actors_other_namespace_is_not_this_records(
    home,  # noqa: ANN001
) -> None:
    """Guard: ``(i.actor_id, i.namespace) == scope[i.item_id]`` in
    ``ReviewQueue.for_records``. An item opened before the scope was in its id
    (``legacy_item_id``: record and reason only) is about u-1's m-7 in /archive, since
    gone; u-1's new m-7 lives in /facts. The /facts record's items must not include it (a
    reviewer's delete there would close it, a resolve answer it). Mutant (actor only) ->
    /archive's question is listed as /facts's."""
    store = SqliteStore(home / "memlife.db")
    try:
        queue = ReviewQueue.for_store(store)
        at = T0.isoformat()
        old = legacy_item_id("m-7", "STALE_VERIFICATION")
        archived = ReviewItem(old, "m-7", "STALE_VERIFICATION", None, "u-1", ARCHIVE,
                              "semantic", None, 1.0, "open", None, None, 1, "night-0", at,
                              "night-0", at, None, None, "h2")  # fmt: skip
        mine = ReviewItem(item_id("m-7", "MISSING_OWNER", "u-1", NS), "m-7", "MISSING_OWNER",
                          None, "u-1", NS, "semantic", None, 1.0, "open", None, None, 1,
                          "night-1", at, "night-1", at, None, None, "h1")  # fmt: skip
        queue.backend.write_night([], [archived, mine], "night-1", at)
        assert [i.item_id for i in queue.for_record("m-7", "u-1", NS)] == [mine.item_id]
        assert [i.item_id for i in queue.for_record("m-7", "u-1", ARCHIVE)] == [old]
    finally:
        store.close()
