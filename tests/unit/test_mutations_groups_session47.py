"""Session 47 (audit 47b): mutations of a consolidation group's withdrawal that no test killed (session 46
"Left alive": ``_none_superseded``'s journal check, ``status._done``, ``_take_back`` without
the kept payloads). In the first two a member is superseded into the replacement before
the other member is edited: the group can no longer be withdrawn, since taking the
replacement back would leave the superseded member pointing at a deleted record. In the
others the record under the replacement's id is no longer ours as written: it stays.
Real SQLite store and journal; the faults are the store's own answer (one member's status
write throttled once), a checkpoint crash (memlife.faults) and, as in
test_mutations_b_session46, another process's write right after the supersede applier's read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memlife.apply import Executor, Tally
from memlife.apply.appliers import status as status_applier
from memlife.apply.group_resume import resume_group
from memlife.apply.lifecycle import run_lifecycle
from memlife.audit import FileSink
from memlife.faults import InjectedFault, inject
from memlife.journal import OpKind, Outcome, open_journal
from memlife.model import MemoryRecord, Status
from memlife.stores.base import BatchResult, ItemFailure
from memlife.stores.sqlite import SqliteStore
from tests.unit.test_guards_session33 import POLICY, rec
from tests.unit.test_guards_session36e import _group, env, executor  # noqa: F401
from tests.unit.test_mutations_session45 import _written_then


class StatusOfBThrottledOnce(SqliteStore):
    """The first status write naming m-b is throttled for m-b (retryable, not written); the
    batch's other rows are written. A boundary fault: the store's own per-item answer."""

    throttled = False

    def set_status_unless_held(self, ids: Any, status: Any, **kw: Any) -> BatchResult:
        if self.throttled or "m-b" not in ids:
            return super().set_status_unless_held(ids, status, **kw)
        self.throttled = True
        rest = [i for i in ids if i != "m-b"]
        if kw.get("expect"):
            kw["expect"] = {i: r for i, r in kw["expect"].items() if i != "m-b"}
        res = super().set_status_unless_held(rest, status, **kw)
        res.failed.append(ItemFailure("m-b", "THROTTLED", retryable=True))
        return res


def _env(home: Path) -> tuple[StatusOfBThrottledOnce, Any, FileSink]:
    store = StatusOfBThrottledOnce(home / "memlife.db")
    return store, open_journal(store), FileSink(home / "receipts")


def _edited_b() -> MemoryRecord:
    return rec("m-b", "Likes coffee now.")


def _edit_b(store: SqliteStore) -> None:
    store.put_many([_edited_b()])


def _replacement_kept(store: SqliteStore) -> None:
    """m-a is superseded by m-r, and m-r is still there (not taken back)."""
    a = store.get("m-a")
    assert a is not None and (a.status, a.provenance.replaced_by) == (Status.superseded, "m-r")
    assert store.get("m-r") is not None, "m-a is superseded into a replacement taken back"


def test_a_group_one_of_whose_supersedes_is_journaled_is_not_withdrawn_by_the_retry(
    home: Path,
) -> None:
    """The adversary throttles m-b's supersede on the night of the write (m-a's is done and
    receipted), then the user edits m-b before the retry queue runs. The retry must not
    withdraw the group: m-a is superseded into m-r already, so m-r stays. (Kills dropping
    the journal check in group_resume._none_superseded: the retry, alone in its batch,
    looks withdrawable, m-b's STALE withdraws it and m-r is deleted under m-a.)"""
    throttled = _env(home)
    store = throttled[0]
    try:
        srcs = [rec("m-a"), rec("m-b", "Likes tea a lot.")]
        store.put_many(srcs)
        ex = executor(throttled)
        resume_group(ex, _group(ex, srcs), Tally())
        ops = {o.record_id: o for o in ex.journal.by_run(ex.run_id)}
        assert ops["m-a"].outcome is Outcome.superseded
        assert ops["m-b"].last_error == "THROTTLED" and ops["m-b"].next_retry_at is not None
        _edit_b(store)
        later = Executor(run_id="run-later", run_key="later", policy=POLICY,
                         cutoff=ops["m-b"].next_retry_at, store=store, journal=throttled[1],
                         sink=throttled[2])  # fmt: skip
        later.resume_due(Tally())
        _replacement_kept(store)
        assert not [o for o in throttled[1].for_record("m-r") if o.kind is OpKind.delete]
    finally:
        store.close()


def test_a_supersede_found_done_at_the_rerun_keeps_the_group_from_being_withdrawn(
    home: Path,
) -> None:
    """The adversary throttles m-b's supersede and kills the night right after m-a's was
    written (before the journal heard of it), then edits m-b. On the rerun the journal
    names no supersede done, but the applier finds m-a superseded by m-r already: the group
    must not be withdrawn; m-a's supersede is journaled done and m-r stays. (Kills
    ``_done`` in appliers/status.py returning ``set()``: m-b's STALE withdraws the group,
    m-a is journaled skipped while the store holds it superseded, and m-r is deleted.)"""
    throttled = _env(home)
    store = throttled[0]
    try:
        srcs = [rec("m-a"), rec("m-b", "Likes tea a lot.")]
        store.put_many(srcs)
        ex = executor(throttled)
        planned = _group(ex, srcs)
        finished = run_lifecycle(ex, planned[:1], Tally())
        with inject("after_supersede"), pytest.raises(InjectedFault):
            resume_group(ex, [*finished, *planned[1:]], Tally())
        assert store.get("m-a").status is Status.superseded  # written, not journaled
        _edit_b(store)
        now = {o.operation_id: o for o in ex.journal.by_run(ex.run_id)}
        resume_group(ex, [now[o.operation_id] for o in [*finished, *planned[1:]]], Tally())
        _replacement_kept(store)
        ops = {(o.record_id, o.kind): o for o in ex.journal.by_run(ex.run_id)}
        assert ops[("m-a", OpKind.supersede)].outcome is Outcome.superseded
        assert ("m-r", OpKind.delete) not in ops
    finally:
        store.close()


# -- group_resume._as_written without the write's payload (a receipted write) ------------------
def _user_edit(r: MemoryRecord) -> MemoryRecord:
    return r.model_copy(update={"content": "Likes oolong, not green tea."})


def _moved_away(r: MemoryRecord) -> MemoryRecord:
    return r.model_copy(update={"namespace": "/users/u-1/other"})


def _sources_dropped(r: MemoryRecord) -> MemoryRecord:
    return r.model_copy(update={"provenance": r.provenance.model_copy(update={"supersedes": []})})


@pytest.mark.parametrize("rewrite", [_user_edit, _moved_away, _sources_dropped])
def test_a_receipted_replacement_rewritten_since_is_not_taken_back(
    env: Any,  # noqa: F811
    rewrite: Callable[[MemoryRecord], MemoryRecord],
) -> None:
    """m-a and m-b merged into m-r; the write was receipted (its payload went with the
    receipt), then the night stopped. Before the rerun the adversary rewrites the record
    under m-r (the user's new text; moved to another namespace; re-imported with the same
    text as a plain record, no sources) and quarantines m-b, so the group is withdrawn.
    What is under m-r is no longer our replacement as written: it stays, and no delete of
    it is planned. (Kills, in group_resume._as_written's branch without a payload,
    dropping the (actor, namespace, sha256) comparison, or ``and
    bool(current.provenance.supersedes)``.)"""
    store = env[0]

    def rewrite_then_forget(s: SqliteStore, b: MemoryRecord) -> None:
        s.put_many([rewrite(s.get("m-r"))])
        s.set_status([b.id], Status.quarantined)

    ops = _written_then(env, 1, rewrite_then_forget)
    assert ops[("m-r", OpKind.write_replacement)].payload is None  # the receipt took it
    assert ("m-r", OpKind.delete) not in ops
    kept = store.get("m-r")
    assert kept is not None and kept == rewrite(kept)


# -- resume_group: the take-back at the supersedes gets the write's kept payload ---------------
def test_a_replacement_relisted_between_its_write_and_the_supersedes_is_not_taken_back(
    env: Any,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The group is written and superseded in one resume. Right after the supersede
    applier's read (another process's writes before the supersedes' own), the adversary
    rewrites the record under m-r to list other sources (m-a alone) and edits m-b: the
    group is withdrawn at its write. What is under m-r is no longer our replacement as
    written (its sources differ): it stays. (Kills ``_take_back(ex, done, tally)`` for the
    write with its kept payload in resume_group: without it only "some sources" is asked.)"""
    store = env[0]
    srcs = [rec("m-a"), rec("m-b", "Likes tea a lot.")]
    store.put_many(srcs)
    ex = executor(env)
    planned = _group(ex, srcs)
    real, raced = status_applier.get_many, []

    def read_then_move(s: Any, ids: list[str]) -> Any:
        found = real(s, ids)
        if not raced and "m-b" in ids:
            raced.append(True)
            r = store.get("m-r")
            prov = r.provenance.model_copy(update={"supersedes": ["m-a"]})
            store.put_many([r.model_copy(update={"provenance": prov}), _edited_b()])
        return found

    monkeypatch.setattr(status_applier, "get_many", read_then_move)
    resume_group(ex, planned, Tally())
    assert raced, "the race did not happen"
    ops = {(o.record_id, o.kind) for o in ex.journal.by_run(ex.run_id)}
    assert ("m-r", OpKind.delete) not in ops
    kept = store.get("m-r")
    assert kept is not None and kept.provenance.supersedes == ["m-a"]
