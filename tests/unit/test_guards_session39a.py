"""Guards left untested by the thirty-eighth audit (session 39): the resume of a
consolidation group after a crash and its take-back (memlife/apply/group_resume.py:
resume_group, _sources_moved, _take_back), the retry queue (memlife/apply/resume.py),
commit_group, and the write and delete appliers as they serve it.

Each test kills a night right after its first replacement write (the seeded scenario of
test_guards_session38e), changes the store between the crash and the rerun (a hold, an
edit, a tenant taking the id, an erasure, a dry run), reruns, and checks what the rerun
took back and what its receipts say. One test held a real bug (fixed in session 39): a
replacement the user restated online between the crash and the rerun was deleted.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.apply import Executor, Tally
from memlife.apply.group_resume import resume_group
from memlife.apply.lifecycle import run_lifecycle
from memlife.audit import FileSink
from memlife.erase import erase
from memlife.faults import InjectedFault, inject
from memlife.journal import Operation, OpKind, OpState, Outcome, open_journal
from memlife.ledger import AccessLedger
from memlife.model import MemoryRecord, Status
from memlife.online.memory import LongTermMemory
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.support.gate import NOW, rec, write_cases
from tests.support.lifecycle import check_invariants, operation_receipts, snapshot
from tests.unit.test_guards_session33 import NS, POLICY, T0, held
from tests.unit.test_guards_session33 import rec as rec33
from tests.unit.test_guards_session36e import Env, executor
from tests.unit.test_guards_session38e import night
from tests.unit.test_withdrawn_replacement import hold, killed_after_write

WITHDRAWN = "CONSOLIDATION_WITHDRAWN"


@pytest.fixture()
def uenv(home: Path) -> Iterator[Env]:
    store = SqliteStore(home / "memlife.db")
    yield store, open_journal(store), FileSink(home / "receipts")
    store.close()


def receipts_for(home: Path, rid: str) -> list[dict[str, Any]]:
    """Every operation receipt about ``rid``, as (action, outcome, reasons) dicts."""
    return [o for o in operation_receipts(home / "receipts").values() if o["record_id"] == rid]


def withdrawals(home: Path, rid: str) -> list[dict[str, Any]]:
    return [o for o in receipts_for(home, rid) if WITHDRAWN in o["reason_codes"]]


def stored(home: Path, rid: str) -> MemoryRecord | None:
    store = SqliteStore(home / "memlife.db")
    try:
        return store.get(rid)
    finally:
        store.close()


def overwrite(home: Path, record: MemoryRecord) -> None:
    store = SqliteStore(home / "memlife.db")
    try:
        assert not store.put_many([record]).failed
    finally:
        store.close()


def planned_deletes(home: Path, rid: str) -> list[Any]:
    store = SqliteStore(home / "memlife.db")
    try:
        return [o for o in open_journal(store).for_record(rid) if o.kind is OpKind.delete]
    finally:
        store.close()


# -- _take_back: only our record as written goes ------------------------------------------


@pytest.mark.parametrize("field", ["actor_id", "namespace"])
def test_another_tenants_record_under_the_replacements_id_is_not_taken_back(
    home: Path, field: str
) -> None:
    """Attacks the ``(current.actor_id, current.namespace, ...)`` comparison in
    group_resume.py::_take_back. Between the crash and the rerun the replacement's id was
    taken by another actor's record (or one of u-1's in another namespace) with the same
    text and the same sources listed. Mutant (actor or namespace dropped from the tuple):
    the rerun deletes the other tenant's record under u-1's withdrawn group (invariant 8)."""
    cases, rid, sources, _ = killed_after_write(home)
    ours = stored(home, rid)
    assert ours is not None
    other = {"actor_id": "u-2"} if field == "actor_id" else {"namespace": "/users/u-1/other"}
    overwrite(home, ours.model_copy(update=other))
    hold(home, sources[:1])
    summary = night(cases)
    assert summary.status == "success"
    after = stored(home, rid)
    assert after is not None and getattr(after, field) == other[field]
    assert withdrawals(home, rid) == []
    assert summary.other.get("consolidation_withdrawn_removed", 0) == 0


def test_a_replacement_whose_sources_list_changed_is_not_taken_back(home: Path) -> None:
    """Attacks ``set(current.provenance.supersedes) != set(ours...)`` in
    group_resume.py::_take_back. The record under the replacement's id now lists another
    set of sources (a later consolidation's record, rewritten under the id): not ours.
    Mutant (the sources not compared): it is deleted under our group's withdrawal."""
    cases, rid, sources, _ = killed_after_write(home)
    ours = stored(home, rid)
    assert ours is not None
    prov = ours.provenance.model_copy(update={"supersedes": sources[:1]})
    overwrite(home, ours.model_copy(update={"provenance": prov}))
    hold(home, sources[:1])
    summary = night(cases)
    assert summary.status == "success"
    assert stored(home, rid) is not None
    assert withdrawals(home, rid) == []


def test_a_replacement_whose_text_was_edited_since_the_crash_is_kept(home: Path) -> None:
    """Attacks ``current.content`` in _take_back's comparison. The user edited the
    replacement's text between the crash and the rerun. Mutant (content not compared):
    the user's edit is deleted as if it were the withdrawn group's replacement."""
    cases, rid, sources, _ = killed_after_write(home)
    ours = stored(home, rid)
    assert ours is not None
    overwrite(home, ours.model_copy(update={"content": "Moved to Porto last spring."}))
    hold(home, sources[:1])
    assert night(cases).status == "success"
    kept = stored(home, rid)
    assert kept is not None and kept.content == "Moved to Porto last spring."
    assert withdrawals(home, rid) == []


def cat_scenario(home: Path) -> tuple[str, str]:
    """Two duplicates with deadlines, consolidated; the night dies after the replacement
    write. Returns the cases file and the replacement's id."""
    home.mkdir(parents=True, exist_ok=True)
    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many([
            rec("m-cat1", "facts", "Has a cat named Tom.", subject="cat", age=20,
                expires=NOW + timedelta(days=10)),
            rec("m-cat2", "facts", "Has a cat named Tom.", subject="cat", age=10,
                expires=NOW + timedelta(days=20)),
            rec("m-x", "facts", "Lives in Rome.", subject="city", age=10),
        ])  # fmt: skip
    finally:
        store.close()
    cases = write_cases(home / "cases.yaml", [
        {"id": "c", "query": "Where does the user live?", "actor_id": "u-1",
         "must_retrieve": ["m-x"], "impact": "high"},
    ])  # fmt: skip
    with inject("after_replacement_write"), pytest.raises(InjectedFault):
        night(cases)
    (rid,) = [i for i in snapshot(home / "memlife.db") if i.startswith("r-")]
    return cases, rid


def test_a_replacement_restated_online_since_the_crash_is_not_deleted(home: Path) -> None:
    """Attacks _take_back's idea of "our record as written" (shard, content, sources
    only). Between the crash and the rerun the user edits both sources (the group is
    withdrawn on the rerun) and then says "Has a cat named Tom." again: remember finds the
    replacement, the only active record saying it, and refreshes it (verified now, no
    deadline) and answers that it already knows it. The rerun deletes it as the withdrawn
    group's replacement: no record says what the user just restated."""
    cases, rid = cat_scenario(home)
    store = SqliteStore(home / "memlife.db")
    for sid, text in (("m-cat1", "Has a cat named Tim."), ("m-cat2", "Has a dog named Tam.")):
        was = store.get(sid)
        assert was is not None
        store.put_many([was.model_copy(update={"content": text})])
    with LongTermMemory(store, ledger=AccessLedger(home / "ledger", flush_seconds=None)) as mem:
        said = mem.remember("u-1", "/users/u-1/facts", "cat", "Has a cat named Tom.", at=NOW)
    assert said.refreshed_duplicate_of == rid
    restated = stored(home, rid)
    assert restated is not None and restated.expires_at is None
    assert night(cases).status == "success"
    active = [r for r in snapshot(home / "memlife.db").values() if r["status"] == "active"]
    assert "Has a cat named Tom." in {r["content"] for r in active}, withdrawals(home, rid)


# -- the take-back and erasure, forget, dry runs, receipts --------------------------------


def test_an_erasure_between_crash_and_rerun_leaves_one_receipt_for_the_replacement(
    home: Path,
) -> None:
    """Attacks ``if not o.payload: continue`` and ``current is None`` in _take_back. An
    erasure of one source's text after the crash took every copy (the replacement too)
    and forgot the write's payload. The rerun withdraws the group and must neither take
    back again (a second receipt for one deletion) nor fail on the gone record."""
    cases, rid, sources, before = killed_after_write(home)
    store = SqliteStore(home / "memlife.db")
    try:
        done = erase(store, "u-1", ids=sources[:1], policy="policies/default.yaml", now=NOW)
    finally:
        store.close()
    assert rid in done["erased"]
    summary = night(cases)
    assert summary.status == "success"
    assert stored(home, rid) is None
    went = [o for o in receipts_for(home, rid) if o["outcome"] in ("deleted", "already_absent")]
    assert [(o["action"], o["outcome"]) for o in went] == [("erase", "deleted")]
    assert planned_deletes(home, rid) == []


def test_a_replacement_forgotten_online_goes_once_with_a_verified_content_free_receipt(
    home: Path,
) -> None:
    """Attacks the take-back's receipt (lifecycle of the planned delete, reasons, run
    seal). The user forgot the replacement (pending_delete) between crash and rerun: the
    rerun takes it back under one delete receipt with CONSOLIDATION_WITHDRAWN; ``receipts
    verify`` passes on the run and no receipt holds the replacement's text."""
    cases, rid, sources, before = killed_after_write(home)
    store = SqliteStore(home / "memlife.db")
    with LongTermMemory(store, ledger=AccessLedger(home / "ledger", flush_seconds=None)) as mem:
        assert mem.forget([rid], actor="u-1") == [rid]
    hold(home, sources[:1])
    summary = night(cases)
    assert summary.status == "success"
    assert stored(home, rid) is None
    (gone,) = withdrawals(home, rid)
    assert (gone["action"], gone["outcome"]) == ("delete", "deleted")
    assert summary.other["consolidation_withdrawn_removed"] == 1
    code, out, err = invoke("receipts", "verify", summary.run_id)
    assert code == 0 and "verified" in out, (out, err)
    text = "Lives in Lisbon, Portugal."
    files = list((home / "receipts").rglob("*.json"))
    assert files and all(text not in f.read_text() for f in files)
    check_invariants(before, snapshot(home / "memlife.db"), home / "receipts")


def test_a_dry_run_after_the_crash_takes_nothing_back(home: Path) -> None:
    """Attacks the dry run's skip of the retry queue (pipeline) and commit_group's
    ``ex.dry_run`` return: a dry run after the crash, with the group now withdrawn, must
    not delete the replacement nor journal a take-back; the real rerun then does, once."""
    cases, rid, sources, _ = killed_after_write(home)
    hold(home, sources[:1])
    dry = run_local(RunConfig(dry_run=True, now=NOW, eval_cases=cases))
    assert dry.status == "success"
    assert stored(home, rid) is not None
    assert planned_deletes(home, rid) == [] and withdrawals(home, rid) == []
    assert night(cases).status == "success"
    assert stored(home, rid) is None
    assert len(withdrawals(home, rid)) == 1


# -- the write's own tombstone check (test_erase_copies' version patches a moved name) ----


def test_an_erase_after_the_source_check_is_refused_inside_the_write(home: Path) -> None:
    """Attacks write.py's ``ERASED_CONTENT/ERASED_SOURCE`` branch (skipped, payload
    forgotten). tests/e2e/test_erase_copies.py's test of it patches
    ``memlife.apply.groups._sources_moved``, which moved to group_resume.py this session:
    it fails with AttributeError and holds nothing. Here an erasure lands right after the
    sources were re-checked; the write meets its tombstone: withdrawn (erased), no copy
    of the text in the store or the journal's payloads."""
    import memlife.apply.group_resume as gr

    cases, rid, sources, _ = killed_after_write(home)
    checked = gr._sources_moved
    fired: list[str] = []

    def check_then_erase(ex: Any, write: Any, rest: Any) -> bool:
        moved = checked(ex, write, rest)
        if not fired and any(o.record_id == sources[0] for o in rest):
            fired.append(sources[0])
            other = SqliteStore(home / "memlife.db")
            try:
                erase(other, "u-1", ids=sources[:1], policy="policies/default.yaml", now=NOW)
            finally:
                other.close()
        return moved

    mp = pytest.MonkeyPatch()
    mp.setattr(gr, "_sources_moved", check_then_erase)
    try:
        summary = night(cases)
    finally:
        mp.undo()
    assert fired and summary.status == "success"
    assert summary.other["consolidation_withdrawn_erased"] == 1
    text = "Lives in Lisbon, Portugal."
    after = snapshot(home / "memlife.db")
    assert all(text not in r["content"] for r in after.values())
    store = SqliteStore(home / "memlife.db")
    try:
        rows = store.connection.execute("SELECT payload FROM operations").fetchall()
    finally:
        store.close()
    assert all(text not in (p or "") for (p,) in rows)


# -- resume_group: a group resumed from its supersedes alone --------------------------------


def group(ex: Executor, rid: str, sources: list[MemoryRecord]) -> list[Operation]:
    """A consolidation group as commit_group journals it: the write of ``rid``, then one
    supersede per source (the supersede's key is its record: shared across groups)."""
    repl = rec33(rid, "Likes green tea.", provenance={"supersedes": [s.id for s in sources]})
    return ex.journal.plan([
        ex.new_op(OpKind.write_replacement, "u-1", NS, rid, ["CONSOLIDATION"], repl.sha256,
                  payload=repl.to_json(), key_ids=[rid]),
        *(ex.new_op(OpKind.supersede, "u-1", NS, s.id, ["SAME_SUBJECT"], s.sha256,
                    replacement=rid) for s in sources),
    ])  # fmt: skip


@pytest.mark.parametrize("ended", ["failed", "erased"])
def test_supersedes_resumed_without_their_ended_write_end_once_with_it(
    uenv: Env, ended: str
) -> None:
    """Attacks ``if not write and rest:`` (the lookup of the group's write by replacement
    id and run) in group_resume.py::resume_group. The write ended (a terminal failure, or
    withdrawn by an erasure: skipped) and the process died before its supersedes were
    closed; the retry queue resumes the supersedes alone. They end with their write, once
    (REPLACEMENT_NOT_WRITTEN, or skipped). Mutant (no lookup): they are run, the applier
    finds no replacement and fails them REPLACEMENT_MISSING, retryable: retried and
    counted as failures night after night for a write that will never come."""
    store = uenv[0]
    a, b = rec33("m-a"), rec33("m-b", "Likes tea a lot.")
    store.put_many([a, b])
    ex = executor(uenv)
    write, *rest = group(ex, "m-r", [a, b])
    if ended == "failed":
        ex.journal.transition(write.operation_id, OpState.FAILED, outcome=Outcome.failed,
                              error="LEGAL_HOLD", next_retry_at=None, by=ex.mover)  # fmt: skip
    else:
        ex.journal.transition(write.operation_id, OpState.APPLIED, outcome=Outcome.skipped,
                              by=ex.mover)  # fmt: skip
        ex.journal.transition(write.operation_id, OpState.RECEIPTED, by=ex.mover)
    ex.resume_due(Tally())
    assert store.get("m-r") is None
    assert {r.id: r.status for r in (store.get("m-a"), store.get("m-b")) if r} == dict.fromkeys(
        ("m-a", "m-b"), Status.active
    )
    ends = {
        (o.state, o.outcome, o.last_error, o.next_retry_at)
        for o in ex.journal.by_run(ex.run_id)
        if o.kind is OpKind.supersede
    }
    if ended == "failed":  # ended here, once: not retried night after night
        assert ends == {(OpState.FAILED, Outcome.failed, "REPLACEMENT_NOT_WRITTEN", None)}
    else:
        assert ends == {(OpState.RECEIPTED, Outcome.skipped, None, None)}


def test_a_group_whose_shared_source_ended_in_an_earlier_group_is_withdrawn(uenv: Env) -> None:
    """Attacks ``any(_ended(o) and o.outcome is not Outcome.superseded for o in rest)`` in
    group_resume.py::_sources_moved. Two groups of one run share m-a (its supersede is
    one operation, keyed by the record). The first group was withdrawn (m-a quarantined,
    then restored): m-a's supersede ended skipped. Mutant (the ended supersede not asked):
    the second group writes its replacement with m-a's claim while m-a stays active
    beside it, never superseded (a duplicate served twice)."""
    store = uenv[0]
    a, b, c = rec33("m-a"), rec33("m-b", "Likes tea a lot."), rec33("m-c", "Drinks tea.")
    store.put_many([a, b, c])
    ex = executor(uenv)
    first = group(ex, "m-r1", [a, b])
    store.set_status(["m-a"], Status.quarantined, at=T0)
    resume_group(ex, first, Tally())
    assert store.get("m-r1") is None
    store.put_many([a])  # back as it was
    second = group(ex, "m-r2", [a, c])
    assert second[1].state is OpState.RECEIPTED  # m-a's supersede: the first group's
    tally = Tally()
    resume_group(ex, second, tally)
    assert tally.counts["consolidation_withdrawn_changed"] == 1
    assert store.get("m-r2") is None


def test_a_group_whose_source_was_deleted_before_the_write_is_withdrawn(uenv: Env) -> None:
    """Attacks ``r is None`` in group_resume.py::_sources_moved. m-b was deleted (another
    writer) after the group was read. Mutant (a gone source not asked about: ``r is not
    None and ...``): the replacement is written carrying m-b's claim, m-a superseded by
    it, though m-b's text is no longer in the store (a deleted claim brought back)."""
    store = uenv[0]
    a, b = rec33("m-a"), rec33("m-b", "Likes tea a lot.")
    store.put_many([a, b])
    ex = executor(uenv)
    planned = group(ex, "m-r", [a, b])
    store.delete_many(["m-b"])
    tally = Tally()
    resume_group(ex, planned, tally)
    assert tally.counts["consolidation_withdrawn_changed"] == 1
    assert store.get("m-r") is None
    kept = store.get("m-a")
    assert kept is not None and kept.status is Status.active


def test_a_resumed_group_reads_only_its_own_runs_write(uenv: Env) -> None:
    """Attacks ``o.run_id == rest[0].run_id`` in resume_group's lookup of the write. An
    earlier run's group of the same replacement id was withdrawn by an erasure (its write
    receipted skipped). This run wrote the replacement, then died before its supersedes.
    Mutant (any run's write): the earlier run's skipped write withdraws this group, its
    supersedes are skipped, and the written replacement stays active beside both of its
    still-active sources (each claim served twice)."""
    store = uenv[0]
    a, b = rec33("m-a"), rec33("m-b", "Likes tea a lot.")
    store.put_many([a, b])
    old = executor(uenv, "run-old")
    earlier = group(old, "m-r", [a, b])
    run_lifecycle(
        old, earlier[:1], Tally(), lambda ops: {o.operation_id: Outcome.skipped for o in ops}
    )
    run_lifecycle(
        old, earlier[1:], Tally(), lambda ops: {o.operation_id: Outcome.skipped for o in ops}
    )
    ex = executor(uenv, "run-new")
    now = group(ex, "m-r", [a, b])
    (written,) = run_lifecycle(ex, now[:1], Tally())
    assert written.outcome is Outcome.written  # then the crash
    ex.resume_due(Tally())
    for sid in ("m-a", "m-b"):
        r = store.get(sid)
        assert r is not None and r.status is Status.superseded
        assert r.provenance.replaced_by == "m-r"


def killed_group(ex: Executor, rid: str, sources: list[MemoryRecord]) -> list[Operation]:
    """The group journaled and its replacement written, then the process died."""
    planned = group(ex, rid, sources)
    with inject("after_replacement_write"), pytest.raises(InjectedFault):
        resume_group(ex, planned, Tally())
    assert ex.store.get(rid) is not None
    return [o for o in ex.journal.by_run(ex.run_id) if o.operation_id in
            {p.operation_id for p in planned}]  # fmt: skip


def in_order(ops: list[Operation]) -> list[Operation]:
    return sorted(ops, key=lambda o: o.kind is not OpKind.write_replacement)


def test_two_groups_withdrawn_in_one_run_each_take_back_their_own_replacement(
    uenv: Env,
) -> None:
    """Attacks ``key_ids=[o.operation_id, WITHDRAWN]`` in _take_back (the take-back's
    operation id names the write it takes back). Two groups of one run were killed after
    their writes; both are withdrawn on the rerun. Mutant (``key_ids=[WITHDRAWN]``): both
    take-backs get one operation id, the second is the first's (already done), and the
    second group's replacement stays active beside its sources."""
    store = uenv[0]
    a, b = rec33("m-a"), rec33("m-b", "Likes tea a lot.")
    c, d = rec33("m-c", "Lives in Oslo."), rec33("m-d", "Lives in Oslo, Norway.")
    store.put_many([a, b, c, d])
    ex = executor(uenv)
    first, second = killed_group(ex, "m-r1", [a, b]), killed_group(ex, "m-r2", [c, d])
    store.set_status(["m-a", "m-c"], Status.quarantined, at=T0)
    tally = Tally()
    resume_group(ex, in_order(first), tally)
    resume_group(ex, in_order(second), tally)
    assert store.get("m-r1") is None and store.get("m-r2") is None
    assert tally.counts["consolidation_withdrawn_removed"] == 2


def test_a_take_back_retried_after_the_replacement_was_edited_deletes_nothing(
    home: Path,
) -> None:
    """Attacks the take-back's ``current.sha256`` (the planned delete's precondition) in
    _take_back. The take-back's delete was throttled (retryable, nothing deleted); before
    its retry the user rewrote the replacement's text. Mutant (no precondition): the
    retry deletes the user's new text under CONSOLIDATION_WITHDRAWN."""
    from tests.unit.test_guards_session36e import DeletesThrottledOnce

    store = DeletesThrottledOnce(home / "memlife.db")
    try:
        senv = (store, open_journal(store), FileSink(home / "receipts"))
        a, b = rec33("m-a"), rec33("m-b", "Likes tea a lot.")
        store.put_many([a, b])
        ex = executor(senv)
        ops = killed_group(ex, "m-r", [a, b])
        store.set_status(["m-b"], Status.quarantined, at=T0)
        resume_group(ex, in_order(ops), Tally())
        (pending,) = [o for o in ex.journal.for_record("m-r") if o.kind is OpKind.delete]
        assert pending.last_error == "THROTTLED" and pending.next_retry_at is not None
        was = store.get("m-r")
        assert was is not None
        store.put_many([was.model_copy(update={"content": "Likes oolong, not green tea."})])
        later = Executor(run_id="run-later", run_key="later", policy=POLICY,
                         cutoff=pending.next_retry_at, store=store, journal=senv[1],
                         sink=senv[2])  # fmt: skip
        later.resume_due(Tally())
        kept = store.get("m-r")
        assert kept is not None and kept.content == "Likes oolong, not green tea."
    finally:
        store.close()


class ReplacementThrottledOnce(SqliteStore):
    """The store's first replacement write is throttled (retryable, nothing written)."""

    throttled = False

    def put_replacement(self, record: MemoryRecord) -> Any:
        from memlife.stores.base import BatchResult, ItemFailure

        if not self.throttled:
            self.throttled = True
            return BatchResult(failed=[ItemFailure(record.id, "THROTTLED", retryable=True)])
        return super().put_replacement(record)


def test_a_write_retried_after_a_source_changed_is_withdrawn(home: Path) -> None:
    """Attacks ``o.state is OpState.PLANNED or retryable(o)`` (the sources asked again
    before a retried write) in _sources_moved. The write was throttled; before its retry
    m-b was rewritten. Mutant (PLANNED only): the retry writes the replacement with m-b's
    old claim, supersedes m-a by it, and m-b's supersede is refused STALE: the old claim
    is served again beside the new one."""
    store = ReplacementThrottledOnce(home / "memlife.db")
    try:
        senv = (store, open_journal(store), FileSink(home / "receipts"))
        a, b = rec33("m-a"), rec33("m-b", "Likes tea a lot.")
        store.put_many([a, b])
        ex = executor(senv)
        resume_group(ex, group(ex, "m-r", [a, b]), Tally())
        (write,) = [o for o in ex.journal.for_record("m-r") if o.kind is OpKind.write_replacement]
        assert write.last_error == "THROTTLED" and write.next_retry_at is not None
        store.put_many([b.model_copy(update={"content": "Drinks only coffee now."})])
        later = Executor(run_id="run-later", run_key="later", policy=POLICY,
                         cutoff=write.next_retry_at, store=store, journal=senv[1],
                         sink=senv[2])  # fmt: skip
        tally = Tally()
        later.resume_due(tally)
        assert tally.counts["consolidation_withdrawn_changed"] == 1
        assert store.get("m-r") is None
        kept = store.get("m-a")
        assert kept is not None and kept.status is Status.active
    finally:
        store.close()


@pytest.mark.parametrize("differs", ["content", "sources"])
def test_a_held_record_under_the_replacements_id_is_no_written_replacement(
    uenv: Env, differs: str
) -> None:
    """Attacks ``written = current.content == record.content and set(...supersedes) ==
    set(...)`` in appliers/write.py. A held record took the replacement's id; it says
    other words (same sources listed), or the same words for other sources. Mutant (one
    side of the ``and`` dropped): it counts as our written replacement and both sources are
    superseded by a held record that is not the group's replacement (invariant 3)."""
    store = uenv[0]
    a, b = rec33("m-a"), rec33("m-b", "Likes tea a lot.")
    store.put_many([a, b])
    ex = executor(uenv)
    planned = group(ex, "m-r", [a, b])
    ours = MemoryRecord.model_validate_json(planned[0].payload or "")
    if differs == "content":
        theirs = ours.model_copy(update={"content": "Moved to Lisbon in May."})
    else:
        prov = ours.provenance.model_copy(update={"supersedes": ["m-z"]})
        theirs = ours.model_copy(update={"provenance": prov})
    store.put_many([held(theirs)])
    resume_group(ex, planned, Tally())
    assert store.get("m-r") == held(theirs)
    for sid in ("m-a", "m-b"):
        r = store.get(sid)
        assert r is not None and r.status is Status.active
    (write,) = [o for o in ex.journal.for_record("m-r") if o.kind is OpKind.write_replacement]
    assert (write.state, write.last_error) == (OpState.FAILED, "LEGAL_HOLD")
