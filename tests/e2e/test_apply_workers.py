"""An apply run planned in two processes (pipeline.plan_in_processes) changes the store
exactly as one process does: same records after, same operations receipted, same counts,
the invariants kept; and the night after changes nothing. The children stage; only the
parent commits (after the gate), so this is the one place where that split is checked
end to end on the local engine."""

from __future__ import annotations

import shutil
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from memlife import pipeline
from memlife.pipeline import RunConfig, planning_workers, run_local
from memlife.run_types import RunSummary
from tests.support.lifecycle import (
    CUTOFF,
    assert_no_erased_content_active,
    check_invariants,
    gate_cases,
    operation_receipts,
    seed,
    snapshot,
)
from tests.support.planning import parent_parts
from tests.support.replacement_ids import of_receipts, renamed, same_store

RECORDS = 2000  # 20 actors, ~240 shards: two planning processes with workers=2


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("apply-workers") / "seed.db"
    seed(db, records=RECORDS)
    return db


def _apply(base: Path, seeded: Path, workers: int, now=CUTOFF) -> RunSummary:
    db = base / "memlife.db"
    if not db.exists():
        base.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(seeded, db)
    return run_local(
        RunConfig(dry_run=False, now=now, store=f"sqlite:///{db}",
                  receipts=f"file://{base / 'receipts'}", eval_cases=gate_cases(db),
                  workers=workers)
    )  # fmt: skip


def _ops(receipts: Path) -> Counter[tuple]:
    # operation ids name the store by its path: runs on two copies compare by what was done;
    # a replacement by what it supersedes (its id is keyed by its store's run secret)
    ops = operation_receipts(receipts).values()
    ids = of_receipts(ops)
    return Counter(
        renamed((o["action"], o["record_id"], o["replacement_id"], o["outcome"]), ids) for o in ops
    )


def test_two_processes_apply_what_one_applies(
    tmp_path: Path, seeded: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert planning_workers(RunConfig(dry_run=False, workers=2), 100) == 2
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path / "home"))
    before = snapshot(seeded)
    one = _apply(tmp_path / "one", seeded, 1)
    local_parts = parent_parts(monkeypatch)
    two = _apply(tmp_path / "two", seeded, 2)
    assert (
        local_parts and sum(local_parts) < two.shards
    )  # the parent planned part, a child the rest

    assert one.status == two.status == "success"
    life = two.lifecycle
    assert life["deleted"] > 0 and life["consolidated"] > 0 and life["superseded"] > 0
    assert two.lifecycle == one.lifecycle and two.counts == one.counts
    after = snapshot(tmp_path / "two" / "memlife.db")
    mine, theirs = same_store(after, snapshot(tmp_path / "one" / "memlife.db"))
    assert mine == theirs  # replacements named by what they supersede (replacement_ids.py)
    assert _ops(tmp_path / "two" / "receipts") == _ops(tmp_path / "one" / "receipts")
    check_invariants(before, after, tmp_path / "two" / "receipts")
    # every decision reached the report, from both processes
    assert sum(1 for _ in Path(two.report).open()) == RECORDS

    # the next night, in two processes again: nothing left to do, nothing written
    receipts = set(operation_receipts(tmp_path / "two" / "receipts"))
    again = _apply(tmp_path / "two", seeded, 2, now=CUTOFF + timedelta(hours=1))
    assert again.lifecycle["consolidated"] == again.lifecycle["deleted"] == 0
    assert snapshot(tmp_path / "two" / "memlife.db") == after
    assert set(operation_receipts(tmp_path / "two" / "receipts")) == receipts


def test_an_injected_consolidator_sees_every_group(
    tmp_path: Path, seeded: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consolidator handed to run() lives in this process: planning stays here (children
    would build the default one and the injected one would see only the parent's share)."""
    from memlife.consolidate.extractive import ExtractiveConsolidator
    from memlife.policy import load_policy

    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path / "home"))
    inner = ExtractiveConsolidator(policy=load_policy(None))
    seen: list[str] = []

    class Counting:
        name = inner.name

        def consolidate(self, group):  # noqa: ANN001, ANN202
            seen.append(group.key)
            return inner.consolidate(group)

    base = tmp_path / "injected"
    base.mkdir()
    db = base / "memlife.db"
    shutil.copyfile(seeded, db)
    cfg = RunConfig(dry_run=False, now=CUTOFF, store=f"sqlite:///{db}",
                    receipts=f"file://{base / 'receipts'}", eval_cases=gate_cases(db), workers=2)  # fmt: skip
    summary = pipeline.run(cfg, consolidator=Counting())
    assert summary.lifecycle["consolidated"] > 0
    reference = _apply(tmp_path / "ref", seeded, 1)
    assert summary.lifecycle == reference.lifecycle
    assert len(seen) == len(set(seen)) >= summary.lifecycle["consolidated"]


def test_an_erasure_between_the_childrens_staging_and_the_commit(
    tmp_path: Path, seeded: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An adversary erases, on another connection, sources of replacements that a child
    process staged, after every child has returned and before the parent commits: the
    parent's commit refuses those replacements (tombstones, checked in the write's own
    transaction), the erased content is active nowhere, and every other actor ends as a
    run without the erasure leaves it."""
    from memlife.erase import erase
    from memlife.model import Status
    from memlife.stores.sqlite import SqliteStore

    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path / "home"))
    before = snapshot(seeded)
    ref = _apply(tmp_path / "ref", seeded, 1)
    ref_after = snapshot(tmp_path / "ref" / "memlife.db")
    assert ref.lifecycle["consolidated"] > 0
    # the first actor's shards make the first part, which the child takes first: erase the
    # sources of every replacement the reference run built for that actor
    first_actor = min(r["actor_id"] for r in before.values())
    sources = sorted(
        rid
        for rid, rec in ref_after.items()
        if rec["actor_id"] == first_actor and rec["status"] == Status.superseded.value
    )
    assert sources, "the first actor has a consolidation to race"

    race = tmp_path / "race"
    erased: list[str] = []
    checkpoint = pipeline.checkpoint

    def erase_then(point: str) -> None:
        if point == "after_stage" and not erased:
            with SqliteStore(race / "memlife.db") as other:
                erase(other, first_actor, ids=sources, receipts=f"file://{race / 'receipts'}",
                      now=CUTOFF)  # fmt: skip
            erased.extend(sources)
        checkpoint(point)

    monkeypatch.setattr(pipeline, "checkpoint", erase_then)
    local_parts = parent_parts(monkeypatch)
    summary = _apply(race, seeded, 2)
    assert erased == sources
    assert local_parts and sum(local_parts) < summary.shards  # a child planned a part

    after = snapshot(race / "memlife.db")
    assert not set(sources) & set(after), "an erased record survived"
    with SqliteStore(race / "memlife.db") as store:
        assert_no_erased_content_active(store, first_actor)
    for rid, rec in after.items():
        if rec["actor_id"] == first_actor and rec["status"] == Status.active.value:
            assert not set(rec["provenance"]["supersedes"]) & set(sources), rid
    check_invariants(before, after, race / "receipts")
    # the refusals are counted, never retried, and nothing else moved
    assert summary.lifecycle["consolidated"] < ref.lifecycle["consolidated"]
    mine, theirs = same_store(after, ref_after)  # replacements named by what they supersede
    assert {rid: rec for rid, rec in mine.items() if rec["actor_id"] != first_actor} == {
        rid: rec for rid, rec in theirs.items() if rec["actor_id"] != first_actor
    }

    # the night after: the store is settled, a rerun changes nothing
    again = _apply(race, seeded, 2, now=CUTOFF + timedelta(hours=1))
    assert again.lifecycle["consolidated"] == again.lifecycle["superseded"] == 0
    assert snapshot(race / "memlife.db") == after
