"""Subject grouping: clusters, survivor/duplicate/contradicted roles, splitting, tenancy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memlife.consolidate import Group
from memlife.embed import MiniLMEmbedder, default_embedder
from memlife.group import analyse_group, build_groups, cluster_group, split_group
from memlife.model import MemoryRecord, RetentionClass, Source
from memlife.plan import Planner, group_key
from memlife.policy import load_policy

T0 = datetime(2026, 1, 1, tzinfo=UTC)


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


def test_clusters_join_duplicates_but_never_opposite_polarity(emb) -> None:
    g = group(PEANUTS)
    vecs = emb.embed([r.content for r in PEANUTS])
    assert float(vecs[0] @ vecs[3]) >= 0.88  # similar enough to merge on cosine alone
    clusters = cluster_group(g, vecs, threshold=0.75)
    assert clusters == [["p1", "p2", "p3"], ["p4", "p5"]]
    # Without vectors only exact and normalised duplicates join.
    assert cluster_group(g) == [["p1", "p2"], ["p3"], ["p4", "p5"]]


def test_roles_for_the_executor(emb) -> None:
    g = group(PEANUTS, survivor_id="p5")
    a = analyse_group(g, emb.embed([r.content for r in PEANUTS]))
    assert a.survivor_id == "p5"
    assert a.duplicates == ["p4"] and a.exact_duplicates == ["p4"]
    assert sorted(a.contradicted) == ["p1", "p2", "p3"] and a.conflicting == []
    assert sorted(a.polarity_flips) == ["p1", "p2", "p3"]  # all affirm what p5 negates
    assert [a.role(i) for i in ("p5", "p4", "p1")] == ["survivor", "duplicate", "contradicted"]


def test_newer_weaker_statement_conflicts_instead_of_being_superseded() -> None:
    recs = [
        rec("s1", "Is allergic to peanuts.", 0, source=Source.system_of_record),
        rec("s2", "Is not allergic to peanuts.", 30, source=Source.agent_inferred),
    ]
    a = analyse_group(group(recs))
    assert a.survivor_id == "s1" and a.conflicting == ["s2"] and a.contradicted == []


def test_split_is_oldest_first_deterministic_and_keeps_the_survivor_newest() -> None:
    recs = [rec(f"r{i:02d}", f"Statement number {i}.", i) for i in range(27)]
    g = group(recs, survivor_id="r05", superseded_ids=["r00", "r20"])
    parts = split_group(g, 12)
    assert [len(p.records) for p in parts] == [12, 12, 3]
    assert parts[0].ids == [f"r{i:02d}" for i in range(13) if i != 5]
    assert parts[1].ids == [f"r{i:02d}" for i in range(13, 25)]
    assert [p.survivor_id for p in parts] == [None, None, "r05"]
    assert parts[-1].ids[-1] == "r05" and "r05" not in parts[0].ids
    assert [p.superseded_ids for p in parts] == [["r00"], ["r20"], []]
    assert sorted(i for p in parts for i in p.ids) == sorted(g.ids)  # nothing lost or doubled
    assert [p.ids for p in split_group(g, 12)] == [p.ids for p in parts]
    # A lone last record borrows one so every chunk can consolidate.
    assert [len(p.records) for p in split_group(group(recs[:13]), 12)] == [11, 2]


def test_build_groups_never_crosses_actors_or_namespaces() -> None:
    recs = [
        rec("a1", "Is allergic to peanuts.", 0, actor="u-1"),
        rec("a2", "Is allergic to peanuts.", 1, actor="u-1"),
        rec("b1", "Is allergic to peanuts.", 2, actor="u-2"),
        rec("b2", "Is allergic to peanuts.", 3, actor="u-2"),
        rec("c1", "Lives in Oslo.", 4, actor="u-1", subject="home"),  # alone: no group
    ]
    groups = build_groups(recs)
    assert sorted(g.ids for g in groups) == [["a1", "a2"], ["b1", "b2"]]
    for g in groups:
        assert len({(r.actor_id, r.namespace) for r in g.records}) == 1
        assert g.key == group_key(g.actor_id, g.namespace, "allergy")
    with pytest.raises(ValueError):
        Group("k", "u-1", "/users/u-1/facts", "allergy", [recs[0], recs[2]])


def test_build_groups_from_planner_decisions_skips_held_and_expired() -> None:
    policy = load_policy()
    now = T0 + timedelta(days=60)
    recs = [
        rec("d1", "Is allergic to peanuts.", 0, last_verified_at=T0),
        rec("d2", "Is not allergic to peanuts.", 30, last_verified_at=T0 + timedelta(days=30)),
        rec("d3", "Is allergic to peanuts.", 5, retention_class=RetentionClass.legal_hold),
        rec("d4", "Is allergic to peanuts.", 6, expires_at=T0 + timedelta(days=7)),
    ]
    from memlife.model import plan_view

    decisions = Planner(policy, now).plan_shard([[plan_view(r) for r in recs]])
    groups = build_groups(recs, policy=policy, decisions=decisions)
    assert len(groups) == 1 and groups[0].ids == ["d1", "d2"]
    assert groups[0].survivor_id == "d2" and groups[0].superseded_ids == ["d1"]


def test_vectors_must_align_with_records() -> None:
    with pytest.raises(ValueError):
        cluster_group(group(PEANUTS), np.zeros((2, 384), dtype=np.float32))
