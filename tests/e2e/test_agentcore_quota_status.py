"""A quota that stops a shard part-way through its status changes (AgentCore): what the
store did is journaled and receipted tonight, the rest waits for the next night."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.journal import OpState
from memlife.model import MemoryRecord, MemoryType, Provenance, Source, Status
from memlife.pipeline import RunConfig, RunSummary, run_local
from memlife.run_types import Shard
from tests.e2e.test_agentcore_nightly import ac, harness, home, journal  # noqa: F401
from tests.fakes.agentcore import bulk_load
from tests.support.lifecycle import ANCHOR, CUTOFF, gate_cases, operation_receipts

SUBJECTS = ("tea", "music", "city")
SAYS = {"tea": "green tea", "music": "jazz", "city": "Lisbon"}


def preference(subject: str, k: int) -> MemoryRecord:
    return MemoryRecord(
        id=f"p-{subject}-{k}", actor_id="u-s", namespace="/users/u-s/preferences",
        memory_type=MemoryType.semantic, subject=subject, source=Source.user_stated,
        content=f"Prefers {SAYS[subject]}." if k == 0 else f"Still prefers {SAYS[subject]}.",
        created_at=ANCHOR - timedelta(days=40 - k),
    )  # fmt: skip


def night(env: dict, now: Any, cases: str) -> RunSummary:
    """An apply run with an evaluation set (the gate is required here); its verdict passes
    (the gate's own tests are elsewhere)."""
    config = RunConfig(
        dry_run=False, now=now, store=env["url"], receipts=env["sink"], eval_cases=cases
    )
    return run_local(config, gate=lambda *a: {"blocked": False})


def test_a_quota_stop_between_status_batches_keeps_the_batches_done(ac: dict) -> None:  # noqa: F811
    """Two groups' supersedes fail one night (a 500 on each item) and wait in the retry
    queue; the next night retries them, one status call per group, and the quota stops
    the second call. The first group's records are superseded and receipted that night;
    the second's wait, whole, for the night after."""
    store, fake = ac["store"], ac["fake"]
    recs = [preference(s, k) for s in SUBJECTS for k in (0, 1)]
    bulk_load(store, fake, recs)
    cases = gate_cases(ac["home"] / "none.db", recs)
    failing = [r.id for r in recs if r.subject != "tea"]
    fake.fail_next_updates(failing, 500, times=100)  # every try tonight fails
    first = night(ac, CUTOFF, cases)
    assert first.lifecycle["superseded"] == 2 and first.lifecycle["failed"] == 4
    queued = {o.record_id for o in journal(ac).by_run(first.run_id) if o.state is OpState.FAILED}
    assert queued == set(failing)

    fake.clear_scripts()
    fake.quota_next(1, "update", skip=1)  # the retry's second group
    second = night(ac, CUTOFF + timedelta(days=1), cases)
    assert second.failed_shards == [Shard("u-s", "/users/u-s/preferences").failed("QUOTA_EXCEEDED")]
    assert second.other["retry_queue_superseded"] == 2
    assert json.loads(Path(str(second.receipt)).read_text())["retry_queue_failed"] == 2
    done = superseded(ac)
    assert len(done) == 4 and {o["run_id"] for o in done.values()} == {first.run_id}
    assert {store.get(r).status for r in done} == {Status.superseded}
    waiting = set(failing) - set(done)
    assert len(waiting) == 2 and {store.get(r).status for r in waiting} == {Status.active}
    assert len({store.get(r).subject for r in waiting}) == 1  # one group waits, whole

    third = night(ac, CUTOFF + timedelta(days=2), cases)
    assert third.status == "success" and third.other["retry_queue_superseded"] == 2
    assert set(superseded(ac)) == {r.id for r in recs}
    assert {store.get(r.id).status for r in recs} == {Status.superseded}
    assert all(o.state is OpState.RECEIPTED for o in journal(ac).by_run(first.run_id))


def superseded(env: dict) -> dict[str, dict]:
    """Supersede receipts by record id."""
    ops = operation_receipts(env["receipts"]).values()
    return {o["record_id"]: o for o in ops if o["action"] == "supersede"}


def test_a_quota_stop_inside_one_groups_status_change_keeps_the_chunks_done(
    ac: dict,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One group of 150 originals: AgentCore takes its status change in chunks of 100, and
    the quota stops the second chunk. The first hundred are superseded tonight and
    receipted so (before: all 150 journaled failed, and receipted a night late). Since
    session 46 a night merges at most 99 members of a group (group_plan.MAX_MEMBERS, one
    DynamoDB transaction); the bound is lifted here: the chunking is the store's, for any
    status change of more than 100 records."""
    import memlife.group_plan

    monkeypatch.setattr(memlife.group_plan, "MAX_MEMBERS", 10**6)
    store, fake = ac["store"], ac["fake"]
    recs = [
        MemoryRecord(
            id=f"t-{k:03d}", actor_id="u-s", namespace="/users/u-s/preferences",
            memory_type=MemoryType.semantic, subject="tea", source=Source.user_stated,
            content=f"Prefers green tea ({k}).", created_at=ANCHOR - timedelta(days=40, minutes=k),
        )
        for k in range(150)
    ]  # fmt: skip
    bulk_load(store, fake, recs)
    cases = gate_cases(ac["home"] / "none.db", recs)
    fake.quota_next(1, "update", skip=1)
    first = night(ac, CUTOFF, cases)
    assert first.lifecycle["superseded"] == 100 and first.lifecycle["failed"] == 50
    tonight = superseded(ac)
    assert len(tonight) == 100 and {o["run_id"] for o in tonight.values()} == {first.run_id}
    (replacement,) = {o["replacement_id"] for o in tonight.values()}
    assert {store.get(r).status for r in tonight} == {Status.superseded}
    assert {store.get(r).provenance.replaced_by for r in tonight} == {replacement}
    waiting = {r.id for r in recs} - set(tonight)
    assert {store.get(r).status for r in waiting} == {Status.active}

    later = night(ac, CUTOFF + timedelta(days=1), cases)
    assert later.status == "success" and later.other["retry_queue_superseded"] == 50
    done = superseded(ac)
    assert set(done) == {r.id for r in recs} and done.items() >= tonight.items()
    assert {store.get(r.id).provenance.replaced_by for r in recs} == {replacement}
    assert store.get(replacement).status is Status.active


def test_a_hold_stopped_by_the_quota_part_way_keeps_the_holds_it_placed(ac: dict) -> None:  # noqa: F811
    """A hold over 8 records is one write per record; the quota stops the fourth. The
    three written are journaled and receipted held by this hold (before: all 8 journaled
    failed, though 3 were held). Placing it again finishes the five queued, claiming none twice."""
    from memlife.holds import place_hold

    store, fake = ac["store"], ac["fake"]
    recs = [preference(s, k) for s in SUBJECTS for k in (0, 1)][:6]
    recs += [preference("tea", 2), preference("city", 2)]
    bulk_load(store, fake, recs)
    ids = [r.id for r in recs]
    fake.quota_next(1, "update", skip=3)
    first = place_hold(store, ids=ids, receipts=ac["sink"], now=CUTOFF)
    got = {o["record_id"]: o for o in operation_receipts(ac["receipts"]).values()}
    assert len(got) == 3 and {o["outcome"] for o in got.values()} == {"held"}, first
    assert sorted(first["held"]) == sorted(got)
    assert {store.get(i).retention_class.value for i in got} == {"legal_hold"}
    again = place_hold(store, ids=ids, receipts=ac["sink"], now=CUTOFF)
    assert again["status"] == "success"  # the five queued are finished first, then all 8 held
    assert {store.get(i).retention_class.value for i in ids} == {"legal_hold"}
    got = [o for o in operation_receipts(ac["receipts"]).values() if o["outcome"] == "held"]
    assert sorted(o["record_id"] for o in got) == sorted(ids)  # each hold claimed once
    assert {o["run_id"] for o in got} == {first["run_id"]}


def test_sources_brought_back_when_their_replacement_is_erased_keep_the_chunks_done(
    ac: dict,  # noqa: F811
) -> None:
    """Erasing one of 150 sources withdraws their replacement and brings the other 149 back
    (reactivate: one status change, AgentCore's chunks of 100); the quota stops the second
    chunk. The hundred brought back are receipted so by this erasure (review of session
    20: they were journaled failed)."""
    from memlife.erase import erase

    store, fake = ac["store"], ac["fake"]
    sources = [
        MemoryRecord(
            id=f"s-{k:03d}", actor_id="u-s", namespace="/users/u-s/preferences",
            memory_type=MemoryType.semantic, subject="tea", content=f"Prefers green tea ({k}).",
            created_at=ANCHOR - timedelta(days=40), status=Status.superseded,
            provenance=Provenance(replaced_by="r-1"),
        )
        for k in range(150)
    ]  # fmt: skip
    replacement = MemoryRecord(
        id="r-1", actor_id="u-s", namespace="/users/u-s/preferences",
        memory_type=MemoryType.semantic, subject="tea", content="Prefers green tea.",
        created_at=ANCHOR - timedelta(days=30),
        provenance=Provenance(supersedes=[s.id for s in sources]),
    )  # fmt: skip
    bulk_load(store, fake, [*sources, replacement])
    fake.quota_next(1, "update", skip=1)
    got = erase(store, "u-s", ids=["s-000"], receipts=ac["sink"], now=CUTOFF)
    assert got["counts"]["restored"] == 100 and got["counts"]["failed"] == 49
    back = {o["record_id"] for o in operation_receipts(ac["receipts"]).values()
            if o["outcome"] == "restored"}  # fmt: skip
    assert len(back) == 100
    assert {store.get(i).status for i in back} == {Status.active}
    rest = {s.id for s in sources[1:]} - back
    assert len(rest) == 49 and {store.get(i).status for i in rest} == {Status.superseded}
