"""Session 46 (audit 46b): mutation survivors left by audit 45j (docs/adversarial-review.md, "forty-fifth
audit j"): tests that pin what those mutations let slip.

Each test names the mutation it kills (file, function, change). Real SQLite stores and
journals, moto for DynamoDB; the only hooks are at the network boundary (a botocore event
that counts requests) and the journal's clock.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import memlife.journal.sqlite as journal_sqlite
from memlife.apply.appliers.hold_release import release_payload
from memlife.journal import Operation, OpKind, OpState, Outcome
from memlife.journal.base import operation_id
from memlife.journal.dynamodb import TRANSACT_MAX, DynamoJournal
from memlife.model import RetentionClass, Status
from memlife.online.memory import LongTermMemory
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.aws_state import aws_state
from tests.support.gate import NOW
from tests.unit.test_counts_session45 import OUTCOMES
from tests.unit.test_gate_review24 import COFFEE, DOG, OTHER, TEA, VARIANTS
from tests.unit.test_gate_staged import seed, tea_case, write_cases
from tests.unit.test_guards_session33 import NS, T0, rec
from tests.unit.test_guards_session36e import env, executor, plan, run_one, stored  # noqa: F401
from tests.unit.test_mutations_session45 import _written_then


# -- run_commit.commit_run: gate_kept_records --------------------------------------------------
def _every_record_lands(life: dict[str, int]) -> None:
    assert life["processed"] == sum(life[k] for k in OUTCOMES), life


def test_a_merge_the_gate_blocks_keeps_its_records_retained(home: Path, tmp_path: Path) -> None:
    """The gate blocks the night's tea/coffee merge (a high-impact case it would lose):
    both sources stay as they are, so the run's outcome counts must still cover every
    processed record (the two kept count as retained).
    (Kills dropping ``groups_blocked(gate) or`` from the gate_kept_records condition in
    run_commit.commit_run.)"""
    seed(home, [TEA, COFFEE, DOG])
    cases = write_cases(tmp_path / "cases.yaml", [tea_case()])
    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))
    assert summary.gate is not None and summary.gate["supersedes_blocked"] is True
    assert summary.other["gate_blocked_groups"] == 1
    _every_record_lands(summary.lifecycle)


def test_a_merge_no_case_covers_keeps_its_records_retained(home: Path, tmp_path: Path) -> None:
    """The only case names a mistyped namespace: it checks nothing, so the gate withholds
    the tea/coffee merge (GATE_UNCOVERED) after staging it. Both sources stay: every
    processed record must land in an outcome.
    (Kills dropping ``or g.replacement.id in held_ids`` from the gate_kept_records
    condition in run_commit.commit_run.)"""
    case, _ = VARIANTS["typo-namespace"]
    seed(home, [TEA, COFFEE, DOG, OTHER])
    cases = write_cases(tmp_path / "cases.yaml", [case])
    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))
    assert (summary.gate or {})["uncovered"]["groups"]
    assert summary.other["gate_withheld_groups"] == 1
    _every_record_lands(summary.lifecycle)


# -- appliers/hold_release._held_since ---------------------------------------------------------
def test_a_release_in_the_same_clock_tick_as_its_hold_lifts_it(
    env: Any,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The journal's clock reads one instant for the hold and the release that follows it
    (a coarse clock): the hold being released is not a hold "placed since" the release,
    so the release lifts it, as it does a tick later.
    (Kills ``h.created_at > o.created_at`` -> ``>=`` in hold_release._held_since.)"""
    monkeypatch.setattr(journal_sqlite, "utcnow", lambda: T0)
    store = env[0]
    store.put_many([rec("m-a")])
    placed = run_one(executor(env), plan(executor(env), OpKind.hold, rec("m-a"), ["LEGAL_HOLD"]))
    assert placed.outcome is Outcome.held
    ex = executor(env, "run-b")
    op = plan(ex, OpKind.hold_release, stored(store, "m-a"), ["HOLD_RELEASED"],
              payload=release_payload(RetentionClass.standard))  # fmt: skip
    done = run_one(ex, op)
    assert (done.state, done.outcome, done.last_error) == (
        OpState.RECEIPTED,
        Outcome.released,
        None,
    )
    assert stored(store, "m-a").retention_class is RetentionClass.standard


# -- appliers/update.py: UPDATE_ABANDONED ------------------------------------------------------
def test_a_replayed_update_already_written_is_finished_not_abandoned(env: Any) -> None:  # noqa: F811
    """`import --update` wrote m-a's new line and was killed before its receipt; the next
    run's retry queue finds the record already as the line says. Nothing newer was written
    over it, so the update is finished (receipted, updated), not ended UPDATE_ABANDONED.
    (Kills dropping ``and old != new`` in the update applier.)"""
    store = env[0]
    old = rec("m-a")
    new = old.model_copy(update={"owner": "team-b"})
    store.put_many([old])
    op = plan(executor(env), OpKind.update, old, ["IMPORT_UPDATE"], payload=new.model_dump_json())
    store.put_many([new])  # the interrupted import's write, before its receipt
    done = run_one(executor(env, "run-b"), op)
    assert (done.state, done.outcome, done.last_error) == (OpState.RECEIPTED, Outcome.updated, None)
    assert stored(store, "m-a").owner == "team-b"


# -- group_resume._restated_since (no payload) -------------------------------------------------
def test_a_receipted_replacement_restated_since_is_kept_when_withdrawn(env: Any) -> None:  # noqa: F811
    """m-a and m-b merged into m-r; the write was receipted (its payload gone with the
    receipt), then the night stopped. The user says m-r's text again (``remember``: it is
    verified again, "kept"), and quarantines m-b. The resumed group is withdrawn, but m-r
    is the user's now: it stays, counted kept-restated, and no delete of it is planned.
    (Kills the payload-less branch of group_resume._restated_since: ``return False`` there,
    or ``seen > o.updated_at`` flipped.)"""

    def restate_then_forget(store: SqliteStore, b: Any) -> None:
        r = stored(store, "m-r")
        with LongTermMemory(store) as mem:
            mem.remember(r.actor_id, r.namespace, r.subject, r.content)
        assert stored(store, "m-r").last_verified_at != r.last_verified_at
        store.set_status([b.id], Status.quarantined)

    ops = _written_then(env, 1, restate_then_forget)
    assert ("m-r", OpKind.delete) not in ops
    assert stored(env[0], "m-r").status is Status.active


# -- journal/dynamodb.py: TRANSACT_MAX in _all_at_once -----------------------------------------
def _ops(n: int) -> list[Operation]:
    rid = [f"m-{i:03d}" for i in range(n)]
    return [Operation(operation_id=operation_id("run-1", OpKind.supersede, [r]), run_id="run-1",
                      kind=OpKind.supersede, actor_id="u-1", namespace=NS, record_id=r,
                      reasons=["SAME_SUBJECT"], policy_version="p1", replacement_id="m-r")
            for r in rid]  # fmt: skip


@pytest.mark.parametrize(
    ("n", "sent"), [(1, []), (TRANSACT_MAX, [TRANSACT_MAX]), (TRANSACT_MAX + 1, [])]
)
def test_a_group_is_one_transaction_up_to_dynamodbs_limit(n: int, sent: list[int]) -> None:
    """A group of exactly 100 operations (DynamoDB's TransactWriteItems limit) is planned
    in one transaction: a night stopped part way never leaves some of them planned. One
    more goes put by put: a 101-item transaction is a request DynamoDB refuses; a single
    operation needs no transaction (twice the write cost).
    (Kills ``<= TRANSACT_MAX`` -> ``<``, the bound dropped, and ``1 <`` -> ``0 <`` in
    DynamoJournal._all_at_once.)"""
    with aws_state("inprocess") as (_, state):
        seen: list[int] = []

        def count(params: dict[str, Any], **_: Any) -> None:
            seen.append(len(json.loads(params["body"].decode())["TransactItems"]))

        state.ddb.meta.events.register("before-call.dynamodb.TransactWriteItems", count)
        planned = DynamoJournal(state).plan(_ops(n))
        assert seen == sent
        assert len(planned) == n and {o.state for o in planned} == {OpState.PLANNED}


# -- online/memory.py: _store_lock -------------------------------------------------------------
def test_two_memories_over_one_store_share_one_lock(tmp_path: Path) -> None:
    """An agent keeps its own LongTermMemory and a LangGraph store adapter opens a second
    over the same store object: between one's duplicate check and its insert the other
    must not write (SQLite's data_version does not see a write on the same connection), so
    both take the one lock of that store; a memory over another store object takes its own.
    (Kills ``self._lock = _store_lock(store)`` -> ``threading.RLock()`` in
    LongTermMemory.__init__.)"""
    with SqliteStore(tmp_path / "a.db") as a, SqliteStore(tmp_path / "b.db") as b:
        one, two, other = LongTermMemory(a), LongTermMemory(a), LongTermMemory(b)
        assert one._lock is two._lock
        assert other._lock is not one._lock
