"""A rerun of a night (same cutoff: the same run) leaves the review queue as a clean run
leaves it: no item about the run's own replacements (the next night's), every finding the
first attempt made, and no more new items than the nightly budget allows the run in all.
Found by the session 22 review of the rerun filter (`run_planning.reviewable`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife import faults
from memlife.faults import InjectedFault
from memlife.journal import OpKind, open_journal
from memlife.model import MemoryRecord
from memlife.pipeline import RunConfig, run_local
from memlife.policy import resolve_policy_path
from memlife.review_queue import ReviewQueue
from memlife.stores.sqlite import SqliteStore

DAY1 = datetime(2026, 1, 5, 8, tzinfo=UTC)
DAY40 = DAY1 + timedelta(days=39)
NIGHT = DAY40 + timedelta(days=2)
ACTOR, NS = "u-7", "/team/notes"  # no owner for this namespace: every record MISSING_OWNER
COFFEE = "I drink a large black coffee every morning."
TEA = "I gave up coffee in October; my mornings are green tea now."


@pytest.fixture()
def home(offline_home: Path) -> Path:
    return offline_home


def seed(home: Path, records: list[tuple[str, str, datetime]]) -> None:
    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many([
            MemoryRecord(id=i, actor_id=ACTOR, namespace=NS, memory_type="semantic", content=text,
                         created_at=at, source="agent_inferred", confidence=0.6)
            for i, text, at in records
        ])  # fmt: skip
    finally:
        store.close()


def night(now: datetime = NIGHT, **kw: object) -> object:
    return run_local(RunConfig(dry_run=False, now=now, **kw))  # type: ignore[arg-type]


def queue(home: Path) -> list[tuple]:
    store = SqliteStore(home / "memlife.db")
    try:
        return sorted((i.record_id, i.reason, i.pair_id, i.nights, i.state)
                      for i in ReviewQueue.for_store(store).list())  # fmt: skip
    finally:
        store.close()


def written(home: Path, run_id: str) -> set[str]:
    store = SqliteStore(home / "memlife.db")
    try:
        ops = open_journal(store).by_run(run_id)
        return {o.record_id for o in ops if o.kind is OpKind.write_replacement}
    finally:
        store.close()


# x says coffee; a1 and a2 say the same newer thing and merge into R. On a rerun, x's
# newer statement is R: a POSSIBLE_UPDATE pair the first attempt never saw.
PAIRED = [("x", COFFEE, DAY1), ("a1", TEA, DAY40), ("a2", TEA, DAY40 + timedelta(hours=3))]


def test_a_finding_whose_pair_is_the_runs_replacement_keeps_its_other_findings(
    home: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    clean_home = tmp_path_factory.mktemp("clean")
    monkeypatch.setenv("MEMLIFE_HOME", str(clean_home))
    seed(clean_home, PAIRED)
    clean = night()
    assert clean.lifecycle["consolidated"] == 1
    expected = queue(clean_home)
    assert ("x", "MISSING_OWNER", None, 1, "open") in expected

    # the same night killed after its replacement was written, before the queue step
    monkeypatch.setenv("MEMLIFE_HOME", str(home))
    seed(home, PAIRED)
    with faults.inject("after_commit_groups"), pytest.raises(InjectedFault):
        night()
    rerun = night()
    assert written(home, rerun.run_id)
    assert queue(home) == expected  # x's MISSING_OWNER is opened, nothing about R is

    # and a rerun of the completed night carries what it found: x's item included
    again = night()
    assert queue(home) == expected
    assert again.other["review_carried"] == len(expected)
    assert again.other.get("review_opened", 0) == 0


def test_a_rerun_over_the_budget_opens_nothing_the_first_attempt_left_waiting(
    home: Path, tmp_path: Path
) -> None:
    facts = ["likes hiking", "owns a bike", "speaks Welsh", "plays chess", "keeps bees",
             "grows tomatoes", "collects stamps"]  # fmt: skip
    seed(home, [(f"m{i}", f"The user {f}.", DAY1 + timedelta(days=i)) for i, f in enumerate(facts)])
    policy = tmp_path / "budget.yaml"
    text = resolve_policy_path(None).read_text()
    assert "nightly_budget: 500" in text
    policy.write_text(text.replace("nightly_budget: 500", "nightly_budget: 2"))
    first = night(policy=str(policy))
    assert first.other["review_opened"] == 2 and first.other["review_waiting"] == len(facts) - 2
    opened = queue(home)
    again = night(policy=str(policy))
    assert again.run_id == first.run_id
    assert again.other.get("review_opened", 0) == 0
    assert again.other["review_waiting"] == len(facts) - 2
    assert queue(home) == opened
    # the next night has a budget of its own
    later = night(NIGHT + timedelta(days=1), policy=str(policy))
    assert later.other["review_opened"] == 2 and len(queue(home)) == 4
