"""Subject groups as the nightly run decides them (group_plan): roles, survivor, tenancy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import memlife.group_plan as gp
from memlife.consolidate import Group
from memlife.embed import MiniLMEmbedder, default_embedder
from memlife.model import MemoryRecord, RetentionClass, Source
from memlife.plan import Planner, group_key
from memlife.policy import Grouping, load_policy

T0 = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = load_policy()


@pytest.fixture(scope="module")
def emb() -> MiniLMEmbedder:
    return default_embedder()


def rec(
    rid: str,
    content: str,
    day: int,
    *,
    source: Source = Source.user_stated,
    actor: str = "u-1",
    subject: str = "allergy",
    **kw: object,
) -> MemoryRecord:
    return MemoryRecord(
        id=rid,
        actor_id=actor,
        namespace=f"/users/{actor}/facts",
        memory_type="semantic",
        subject=subject,
        content=content,
        source=source,
        created_at=T0 + timedelta(days=day),
        owner="team-x",
        **kw,
    )


def group(records: list[MemoryRecord], **kw: object) -> Group:
    r = records[0]
    return Group("k", r.actor_id, r.namespace, r.subject or "", records, **kw)  # type: ignore[arg-type]


PEANUTS = [
    rec("p1", "Is allergic to peanuts.", 0),
    rec("p2", "is allergic to peanuts", 10),  # normalised duplicate
    rec("p3", "Has a peanut allergy.", 20),  # paraphrase
    rec("p4", "Is not allergic to peanuts.", 30, source=Source.user_confirmed),  # contradiction
    rec("p5", "Is not allergic to peanuts.", 40, source=Source.user_confirmed),  # exact duplicate
]


def members(records: list[MemoryRecord]) -> list[gp.Member]:
    return [gp.Member.of(r) for r in records]


def vectors_of(emb: MiniLMEmbedder, records: list[MemoryRecord]):  # noqa: ANN201
    """Real MiniLM vectors per statement key, as the executor asks for them."""
    text: dict[str, str] = {}
    for r in sorted(records, key=lambda r: r.created_at):  # the oldest text of a statement
        text.setdefault(gp.Member.of(r).statement, r.content)
    return lambda keys: emb.embed([text[k] for k in keys])


def test_duplicates_join_but_never_opposite_polarity(emb) -> None:
    vecs = emb.embed([r.content for r in PEANUTS])
    assert float(vecs[0] @ vecs[3]) >= 0.88  # similar enough to merge on cosine alone
    loose = Grouping(near_duplicate_cosine=0.75)
    plan = gp.plan_group(members(PEANUTS), vectors_of(emb, PEANUTS), grouping=loose,
                         weights=POLICY.source_weights, planner_survivor="p3")  # fmt: skip
    assert plan is not None
    assert {i: plan.roles[i] for i in ("p1", "p2", "p3")} == {
        "p1": gp.NEAR_DUPLICATE, "p2": gp.NEAR_DUPLICATE, "p3": gp.SURVIVOR}  # fmt: skip
    assert plan.conflicting == ["p4", "p5"]  # the negation is newer: kept for review
    # Without vectors only exact and normalised duplicates join.
    plan = gp.plan_group(members(PEANUTS), None, grouping=loose,
                         weights=POLICY.source_weights, planner_survivor="p2")  # fmt: skip
    assert plan is not None and plan.roles == {"p2": gp.SURVIVOR, "p1": gp.NEAR_DUPLICATE}


def test_roles_for_the_executor(emb) -> None:
    plan = gp.plan_group(members(PEANUTS), vectors_of(emb, PEANUTS), grouping=POLICY.grouping,
                         weights=POLICY.source_weights, planner_survivor="p5")  # fmt: skip
    assert plan is not None and plan.survivor_id == "p5"
    assert plan.roles == {"p5": gp.SURVIVOR, "p4": gp.EXACT_DUPLICATE, "p1": gp.CONTRADICTION,
                          "p2": gp.CONTRADICTION, "p3": gp.CONTRADICTION}  # fmt: skip
    assert plan.to_model == ["p1", "p2", "p3", "p4", "p5"] and plan.conflicting == []


def test_newer_weaker_statement_conflicts_instead_of_being_superseded() -> None:
    recs = [
        rec("s1", "Is allergic to peanuts.", 0, source=Source.system_of_record),
        rec("s2", "Is not allergic to peanuts.", 30, source=Source.agent_inferred),
    ]
    plan = gp.plan_group(members(recs), None, grouping=POLICY.grouping,
                         weights=POLICY.source_weights)  # fmt: skip
    assert plan is not None and plan.survivor_id == "s1"
    assert plan.conflicting == ["s2"] and plan.roles == {}  # nothing to merge


def test_groups_never_cross_actors_or_namespaces() -> None:
    recs = [
        rec("a1", "Is allergic to peanuts.", 0, actor="u-1"),
        rec("a2", "Is allergic to peanuts.", 1, actor="u-1"),
        rec("b1", "Is allergic to peanuts.", 2, actor="u-2"),
        rec("b2", "Is allergic to peanuts.", 3, actor="u-2"),
        rec("c1", "Lives in Oslo.", 4, actor="u-1", subject="home"),  # alone: no group
    ]
    from memlife.model import plan_view

    planner = Planner(POLICY, T0 + timedelta(days=10))
    groups: dict[str, set] = {}
    for actor in ("u-1", "u-2"):
        views = [plan_view(r) for r in recs if r.actor_id == actor]
        for d in planner.plan_shard([views]):
            if d.group:
                groups.setdefault(d.group, set()).add(d.id)
    assert sorted(sorted(g) for g in groups.values()) == [["a1", "a2"], ["b1", "b2"]]
    assert group_key("u-1", "/users/u-1/facts", "allergy") in groups
    with pytest.raises(ValueError):
        Group("k", "u-1", "/users/u-1/facts", "allergy", [recs[0], recs[2]])


def test_planner_groups_skip_held_and_expired() -> None:
    now = T0 + timedelta(days=60)
    recs = [
        rec("d1", "Is allergic to peanuts.", 0, last_verified_at=T0),
        rec("d2", "Is not allergic to peanuts.", 30, last_verified_at=T0 + timedelta(days=30)),
        rec("d3", "Is allergic to peanuts.", 5, retention_class=RetentionClass.legal_hold),
        rec("d4", "Is allergic to peanuts.", 6, expires_at=T0 + timedelta(days=7)),
    ]
    from memlife.model import plan_view

    decisions = {d.id: d for d in Planner(POLICY, now).plan_shard([[plan_view(r) for r in recs]])}
    grouped = sorted(i for i, d in decisions.items() if d.group)
    assert grouped == ["d1", "d2"] and decisions["d1"].survivor == "d2"
    plan = gp.plan_group(members(recs[:2]), None, grouping=POLICY.grouping,
                         weights=POLICY.source_weights, planner_survivor="d2")  # fmt: skip
    assert plan is not None and plan.roles == {"d2": gp.SURVIVOR, "d1": gp.CONTRADICTION}
