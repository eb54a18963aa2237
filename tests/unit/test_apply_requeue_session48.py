"""Session 48 (audit 48iii): an operator's requeue of a terminal failure (`memlife ops
resolve --decision requeue`) runs the operation again as a new attempt. It must not leave a
replacement active beside the sources it names.
"""

from __future__ import annotations

from datetime import timedelta

from memlife.apply import Tally
from memlife.journal import OpKind, open_journal
from memlife.model import Status, content_sha256
from tests.unit.test_ops_engine import POLICY, T0, db, executor, item, rec  # noqa: F401


def plan_group(store, sink):  # noqa: ANN001, ANN201
    """A journaled group (replacement m-r of m-a and m-b) whose night died before applying."""
    a, b = rec("m-a", "Likes tea."), rec("m-b", "Likes green tea.")
    store.put_many([a, b])
    ex = executor(store, sink, T0)
    repl = rec("m-r", "Likes green tea.", provenance={"supersedes": ["m-a", "m-b"]})
    write = ex.new_op(OpKind.write_replacement, "u-1", a.namespace, "m-r", ["CONSOLIDATION"],
                      content_sha256(repl.content), payload=repl.to_json())  # fmt: skip
    sups = [
        ex.new_op(
            OpKind.supersede,
            "u-1",
            a.namespace,
            x.id,
            ["SAME_SUBJECT"],
            x.sha256,
            replacement="m-r",
        )  # fmt: skip
        for x in (a, b)
    ]
    ex.journal.plan([write, *sups])
    return write.operation_id


def active(store, ids):  # noqa: ANN001, ANN201
    return [i for i in ids if (r := store.get(i)) is not None and r.status is Status.active]


def test_a_requeued_replacement_write_never_stands_beside_its_active_sources(db) -> None:  # noqa: F811
    """The adversary: another actor's record holds the replacement's id, so the write fails
    SCOPE_CHANGED (terminal) and its supersedes end REPLACEMENT_NOT_WRITTEN. That record
    goes, and the operator requeues the write alone (the one whose cause is fixed). What
    must hold: the group is never left half done, a replacement active while every source
    it names stays active (two active copies of one fact)."""
    store, sink = db
    write_id = plan_group(store, sink)
    other = rec("m-r", "Plays chess.", actor_id="u-2", namespace="/users/u-2/facts")
    store.put_many([other])
    first = Tally()
    executor(store, sink, T0 + timedelta(days=1), key="n1").resume_due(first)
    assert {f["code"] for f in first.failures} == {"SCOPE_CHANGED", "REPLACEMENT_NOT_WRITTEN"}
    store.delete_many(["m-r"])  # u-2's record goes: the id is free again
    journal = open_journal(store)
    journal.resolve(
        write_id, "requeued", at=T0 + timedelta(days=2), retry_at=T0 + timedelta(days=2)
    )
    executor(store, sink, T0 + timedelta(days=3), key="n3").resume_due(Tally())
    both = active(store, ["m-r", "m-a", "m-b"])
    assert both in (["m-a", "m-b"], ["m-r"]), f"two active copies: {both}"
