"""Audit 49e (session 49: scoring, policy and the plan): one group per subject.

The planner bucketed a shard's records by ``f"{subject}\\x1f{memory_type}"`` and took the
group key's subject back with ``bucket.split("\\x1f")[0]``. A subject is kept as written
(import, ``remember``), U+001F included, so "tea\\x1fmorning" and "tea" got one group key,
and the apply stage (which stages by that key) merged two subjects into one consolidation:
the older subject's fact was superseded by a replacement that says the other's.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from memlife.model import MemoryRecord, MemoryType, Source, Status, plan_view
from memlife.pipeline import RunConfig, run_local
from memlife.plan import Action, Planner, group_key
from memlife.policy import load_policy
from memlife.stores.sqlite import SqliteStore

NOW = datetime(2026, 11, 1, 12, tzinfo=UTC)
ACTOR, NS = "u-1", "/users/u-1/notes"  # no enforce_deletion_in glob: merges go ahead ungated


def _rec(rid: str, subject: str, content: str, age: float) -> MemoryRecord:
    at = NOW - timedelta(days=age)
    return MemoryRecord(
        id=rid, actor_id=ACTOR, namespace=NS, memory_type=MemoryType.semantic, subject=subject,
        content=content, owner="team-a", source=Source.user_stated, created_at=at,
        last_verified_at=at,
    )  # fmt: skip


COFFEE = [_rec(f"c{i}", "tea\x1fmorning", "Drinks black coffee at breakfast.", 40 - i)
          for i in range(2)]  # fmt: skip
TEA = [_rec(f"t{i}", "tea", "Drinks green tea in the evening.", 20 - i) for i in range(2)]


def _groups(*records: MemoryRecord) -> dict[str, str | None]:
    decisions = Planner(load_policy(), NOW).plan_shard([[plan_view(r) for r in records]])
    return {d.id: d.group for d in decisions}


def test_a_subject_holding_a_unit_separator_is_a_group_of_its_own() -> None:
    """Two duplicates under "tea\\x1fmorning", two under "tea": two groups, two keys."""
    groups = _groups(*COFFEE, *TEA)
    assert groups["c0"] == groups["c1"] and groups["t0"] == groups["t1"]
    assert groups["c0"] != groups["t0"]
    assert groups["c0"] == group_key(ACTOR, NS, "tea\x1fmorning")


def test_control_one_subject_spelt_with_case_and_spaces_is_one_group() -> None:
    """The fold that is meant: "Tea " and "tea" are one subject, one key."""
    spaced = [r.model_copy(update={"subject": "Tea "}) for r in TEA[:1]]
    groups = _groups(*spaced, *TEA[1:])
    assert groups["t0"] == groups["t1"] == group_key(ACTOR, NS, "tea")


def test_a_night_never_supersedes_one_subjects_fact_by_anothers(offline_home: Path) -> None:
    """The apply night (offline, extractive): each subject's duplicates merge into a
    replacement of their own; the coffee fact is never superseded by the tea one."""
    with SqliteStore(offline_home / "memlife.db") as s:
        s.put_many([*COFFEE, *TEA])
    run_local(RunConfig(dry_run=False, now=NOW, workers=1))
    with SqliteStore(offline_home / "memlife.db") as s:
        by = {r.id: r for r in s.iter_all()}
    active = {r.content for r in by.values() if r.status is Status.active}
    assert active == {"Drinks black coffee at breakfast.", "Drinks green tea in the evening."}
    for c in COFFEE:
        assert by[by[c.id].provenance.replaced_by or ""].subject == "tea\x1fmorning"


def test_control_the_plan_still_merges_each_subjects_duplicates() -> None:
    """Each subject's two copies are consolidation candidates, as before."""
    decisions = Planner(load_policy(), NOW).plan_shard([[plan_view(r) for r in (*COFFEE, *TEA)]])
    assert {d.action for d in decisions} == {Action.consolidate_candidate}
