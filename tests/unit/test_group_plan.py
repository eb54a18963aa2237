"""The one group decision (memlife.group_plan): roles, survivor, the cap, bounded work."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

import memlife.group_plan as gp
from memlife.model import MemoryRecord, Source
from memlife.policy import Grouping, load_policy

T0 = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = load_policy()


def rec(rid: str, content: str, day: int, source: Source = Source.user_stated, **kw) -> gp.Member:
    kw.setdefault("memory_type", "semantic")
    r = MemoryRecord(
        id=rid, actor_id="u-1", namespace="/users/u-1/facts", subject="diet", content=content,
        source=source, created_at=T0 + timedelta(days=day), **kw,
    )  # fmt: skip
    return gp.Member.of(r)


def fake_vectors(by_text: dict[str, list[float]], members: Sequence[gp.Member], calls: list):
    """Vectors per statement key from hand-made rows (a pure function is tested here)."""
    rows = {m.statement: np.asarray(by_text[m.id], dtype=np.float32) for m in members}

    def vectors(keys: Sequence[str]) -> np.ndarray:
        calls.append(len(keys))
        out = np.stack([rows[k] for k in keys])
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    return vectors


def test_roles_survivor_and_conflicts() -> None:
    ms = [
        rec("a", "Is vegetarian.", 0),
        rec("b", "is  vegetarian", 1),  # normalised duplicate of a
        rec("c", "Eats only plants.", 2),  # near duplicate of a (by vector)
        rec("d", "Eats fish on Fridays.", 3),  # another statement, older than the survivor
        rec("e", "Is vegetarian.", 5),  # the survivor: newest, strongest
        rec("f", "Loves steak.", 9, Source.agent_inferred),  # newer but weaker: conflicting
    ]
    v = {"a": [1, 0, 0], "b": [1, 0, 0], "c": [0.97, 0.2, 0], "d": [0, 1, 0], "e": [1, 0, 0],
         "f": [0, 0, 1]}  # fmt: skip
    calls: list = []
    plan = gp.plan_group(ms, fake_vectors(v, ms, calls), grouping=Grouping(),
                         weights=POLICY.source_weights)  # fmt: skip
    assert plan is not None and plan.survivor_id == "e"  # no planner survivor: source, then time
    named = gp.plan_group(ms, fake_vectors(v, ms, calls), grouping=Grouping(),
                          weights=POLICY.source_weights, planner_survivor="d")  # fmt: skip
    assert named is not None and named.survivor_id == "d"  # the planner's survivor wins
    plan = gp.plan_group(ms, fake_vectors(v, ms, calls), grouping=Grouping(),
                         weights=POLICY.source_weights, planner_survivor="e")  # fmt: skip
    assert plan is not None and plan.survivor_id == "e"
    assert plan.roles == {"e": gp.SURVIVOR, "a": gp.EXACT_DUPLICATE, "b": gp.NEAR_DUPLICATE,
                          "c": gp.NEAR_DUPLICATE, "d": gp.CONTRADICTION}  # fmt: skip
    assert plan.conflicting == ["f"] and "f" not in plan.ids
    assert plan.contradicted_to_model == ["d"] and plan.over_cap == 0
    assert calls == [4, 4, 4]  # one vector per distinct statement (6 records, 4 statements)


def test_opposite_polarity_never_merges_and_episodic_keeps_events() -> None:
    ms = [rec("a", "Is allergic to peanuts.", 0), rec("b", "Is not allergic to peanuts.", 4)]
    same = {"a": [1, 0], "b": [1, 0]}
    plan = gp.plan_group(ms, fake_vectors(same, ms, []), grouping=Grouping(),
                         weights=POLICY.source_weights)  # fmt: skip
    assert plan is not None and plan.roles == {"b": gp.SURVIVOR, "a": gp.CONTRADICTION}
    ev = [rec("x", "Went to Rome.", 0, memory_type="episodic"),
          rec("y", "Went to Oslo.", 3, memory_type="episodic")]  # fmt: skip
    plan = gp.plan_group(ev, None, grouping=Grouping(), weights=POLICY.source_weights)
    assert plan is not None and plan.roles == {} and plan.ids == []  # nothing to merge


def test_the_cap_sends_the_survivor_and_the_newest_others() -> None:
    ms = [rec(f"m{i:02d}", "Drinks tea.", i) for i in range(15)]
    plan = gp.plan_group(ms, None, grouping=Grouping(max_group_size=12),
                         weights=POLICY.source_weights)  # fmt: skip
    assert plan is not None and len(plan.to_model) == 12 and plan.over_cap == 3
    assert plan.to_model == [f"m{i:02d}" for i in range(3, 15)] and len(plan.ids) == 15


def test_a_huge_group_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """20k records, 2k distinct statements: vectors asked per statement, a chunk at a time,
    against at most MAX_LEADERS leaders; statements beyond that stay alone."""
    monkeypatch.setattr(gp, "MAX_LEADERS", 64)
    monkeypatch.setattr(gp, "MAX_MEMBERS", 10**6)  # the roles of all (the bound is below)
    ms = [rec(f"m{i:05d}", f"Statement number {i % 2000}.", i % 400) for i in range(20_000)]
    rng = np.random.default_rng(7)
    basis = rng.normal(size=(2000, 32)).astype(np.float32)  # near-orthogonal: no merges
    v = {m.id: basis[int(m.id[1:]) % 2000] for m in ms}
    calls: list = []
    plan = gp.plan_group(ms, fake_vectors(v, ms, calls), grouping=Grouping(),
                         weights=POLICY.source_weights)  # fmt: skip
    assert sum(calls) == 2000 and max(calls) <= 512
    # every record has a role but the 40 other statements said at the survivor's instant
    # (day 399) by the same source: which is current is unknown, so they are conflicting
    assert plan is not None and len(plan.conflicting) == 40
    # merged tonight: the twelve the model reads and copies of their texts; the other older
    # statements wait for a night the model reads them (audit 53c)
    read = {m.sha for m in plan.members if m.id in plan.to_model}
    assert len(plan.to_model) == 12 and {m.sha for m in plan.members} == read
    assert len(plan.ids) == 12 + plan.over_cap
    dups = [i for i, r in plan.roles.items() if r.endswith("DUPLICATE")]
    assert len(dups) == 9  # the survivor's own restatements only


def test_a_group_keeps_its_newest_members_up_to_one_transaction() -> None:
    """Session 46 (audit 46a): a group's write and supersedes are journaled in one DynamoDB
    transaction (100 items), so a subject restated 150 times merges its newest 99 (the
    survivor among them) tonight; the 51 oldest stay as they are for the next night."""
    ms = [rec(f"m{i:03d}", "Drinks tea.", i) for i in range(150)]
    plan = gp.plan_group(ms, None, grouping=Grouping(), weights=POLICY.source_weights)
    assert plan is not None and plan.survivor_id == "m149"
    assert plan.ids == [f"m{i:03d}" for i in range(51, 150)]
    from memlife.journal.dynamodb import TRANSACT_MAX

    assert gp.MAX_MEMBERS + 1 <= TRANSACT_MAX  # the write and every supersede


def test_a_statement_of_the_survivors_instant_is_conflicting_not_contradicted() -> None:
    """Session 30 "Left": roles ordered members by (created_at, id), so of two statements
    saved at one instant by one source, the one whose id sorted lower was superseded as the
    older. Now it is conflicting (kept, for review) whichever way the ids sort; a weaker
    source at that instant is still contradicted, and an older statement still is."""
    for ids in (("a", "b"), ("b", "a")):
        tie = [rec(ids[0], "Lives in Paris.", 5), rec(ids[1], "Lives in Berlin.", 5)]
        v = {"a": [1, 0], "b": [0, 1]}
        plan = gp.plan_group(tie, fake_vectors(v, tie, []), grouping=Grouping(),
                             weights=POLICY.source_weights, planner_survivor=ids[1])  # fmt: skip
        assert plan is not None and plan.conflicting == [ids[0]] and plan.roles == {}
    weaker = [
        rec("a", "Lives in Paris.", 5, Source.agent_inferred),
        rec("b", "Lives in Berlin.", 5),
    ]
    v = {"a": [1, 0], "b": [0, 1]}
    plan = gp.plan_group(weaker, fake_vectors(v, weaker, []), grouping=Grouping(),
                         weights=POLICY.source_weights)  # fmt: skip
    assert plan is not None and plan.roles == {"b": gp.SURVIVOR, "a": gp.CONTRADICTION}
    older = [rec("b", "Lives in Paris.", 4), rec("a", "Lives in Berlin.", 5)]
    plan = gp.plan_group(older, fake_vectors({"b": [1, 0], "a": [0, 1]}, older, []),
                         grouping=Grouping(), weights=POLICY.source_weights)  # fmt: skip
    assert plan is not None and plan.roles == {"a": gp.SURVIVOR, "b": gp.CONTRADICTION}
