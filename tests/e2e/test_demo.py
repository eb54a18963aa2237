"""Demo data: deterministic, exact in size, valid, and containing every promised kind."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlife.cli import app
from memlife.demo import generate
from memlife.model import MemoryType, RetentionClass, Source, parse_record, plan_view
from memlife.plan import Action, Planner, Reason
from memlife.policy import load_policy
from memlife.stores.sqlite import SqliteStore
from memlife.text import norm_sha256

ANCHOR = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def ten_k() -> list:
    return list(generate(10_000, seed=7, anchor=ANCHOR))


def test_deterministic_under_seed_and_anchor() -> None:
    a = [r.to_json() for r in generate(600, seed=3, anchor=ANCHOR)]
    b = [r.to_json() for r in generate(600, seed=3, anchor=ANCHOR)]
    assert a == b
    assert a != [r.to_json() for r in generate(600, seed=4, anchor=ANCHOR)]
    later = [r.to_json() for r in generate(600, seed=3, anchor=ANCHOR + timedelta(days=1))]
    assert later != a


def test_prefix_stable_per_actor() -> None:
    # an actor is generated from its own RNG: the first actor is the same at any size
    small = [r for r in generate(1000, seed=3, anchor=ANCHOR) if r.actor_id == "u-000000"]
    big = [r for r in generate(2000, seed=3, anchor=ANCHOR) if r.actor_id == "u-000000"]
    assert [r.to_json() for r in small] == [r.to_json() for r in big[: len(small)]]


@pytest.mark.parametrize("n", [0, 1, 7, 49, 50, 51, 199, 201, 1234])
def test_exactly_n_records_unique_ids(n: int) -> None:
    rs = list(generate(n, seed=1, anchor=ANCHOR))
    assert len(rs) == n
    assert len({r.id for r in rs}) == n


def test_negative_count_rejected() -> None:
    with pytest.raises(ValueError):
        list(generate(-1))


def test_ten_thousand(ten_k: list) -> None:
    assert len(ten_k) == 10_000
    assert len({r.id for r in ten_k}) == 10_000
    assert len({r.actor_id for r in ten_k}) >= 50
    # namespaces never cross actors
    assert all(r.namespace.startswith(f"/users/{r.actor_id}/") for r in ten_k)


def test_every_record_valid_under_parse_record(ten_k: list) -> None:
    for r in ten_k:
        again = parse_record(json.loads(r.to_json()))
        assert again.model_dump() == r.model_dump()
        # the demo's timestamps are consistent
        if r.last_accessed_at is not None:
            assert r.last_accessed_at >= r.created_at
        if r.last_verified_at is not None:
            assert r.last_verified_at >= r.created_at
        assert r.created_at <= ANCHOR


def test_contains_every_promised_kind(ten_k: list) -> None:
    policy = load_policy("policies/default.yaml")
    anchor = ANCHOR.timestamp()
    kinds: Counter = Counter()
    subjects: dict[tuple, list] = defaultdict(list)
    for r in ten_k:
        if r.subject:
            subjects[(r.actor_id, r.namespace, r.subject)].append(r)
        if r.expires_at is not None and r.expires_at <= ANCHOR:
            kinds["expired"] += 1
            if r.retention_class is RetentionClass.legal_hold:
                kinds["legal_hold_expired"] += 1
        if r.retention_class is RetentionClass.legal_hold:
            kinds["legal_hold"] += 1
        if r.retention_class is RetentionClass.sensitive:
            kinds["sensitive"] += 1
        if not r.owner:
            kinds["missing_owner"] += 1
        if r.memory_type is MemoryType.procedural:
            kinds["procedural"] += 1
        if r.memory_type is MemoryType.episodic:
            kinds["episodic"] += 1
        stale = policy.memory_types[r.memory_type].verification_stale_days
        if stale is not None and (
            r.last_verified_at is None or anchor - r.last_verified_at.timestamp() > stale * 86400
        ):
            kinds["stale_verification"] += 1
        if r.source is Source.agent_inferred:
            kinds["agent_inferred"] += 1
    for members in subjects.values():
        norms = Counter(norm_sha256(m.content) for m in members)
        if any(c > 1 for c in norms.values()):
            kinds["duplicates"] += 1
        negs = {plan_view(m).negated for m in members}
        if len(norms) > 1 and len(negs) > 1:
            kinds["contradicting_pairs"] += 1
    promised = [
        "expired",
        "legal_hold",
        "legal_hold_expired",
        "sensitive",
        "missing_owner",
        "procedural",
        "episodic",
        "stale_verification",
        "duplicates",
        "contradicting_pairs",
        "agent_inferred",
    ]
    missing = [k for k in promised if kinds[k] == 0]
    assert not missing, (missing, kinds)


def test_near_duplicates_differ_in_text_but_not_meaning(ten_k: list) -> None:
    """Paraphrases of the newer preference: same subject, different text, both newer than the old."""
    by_subject: dict[tuple, list] = defaultdict(list)
    for r in ten_k:
        if r.namespace.endswith("/preferences"):
            by_subject[(r.actor_id, r.subject)].append(r)
    paraphrased = sum(1 for ms in by_subject.values() if len({m.content for m in ms}) >= 3)
    assert paraphrased > 0


def test_planner_sees_every_decision_kind(ten_k: list) -> None:
    planner = Planner(load_policy("policies/default.yaml"), ANCHOR)
    shards: dict[tuple, list] = defaultdict(list)
    for r in ten_k[:3000]:
        shards[(r.actor_id, r.namespace)].append(plan_view(r))
    reasons: Counter = Counter()
    actions: Counter = Counter()
    for views in shards.values():
        for d in planner.plan_shard([views]):
            actions[d.action] += 1
            reasons.update(d.reasons)
    for a in (
        Action.retain,
        Action.hold,
        Action.delete_expired,
        Action.review,
        Action.consolidate_candidate,
        Action.supersede_candidate,
    ):
        assert actions[a] > 0, a
    # (not MISSING_OWNER: the default policy makes a user own the facts in their own
    # namespaces, and every demo namespace is a user's)
    for reason in (Reason.DELETE_DEFERRED, Reason.CONTRADICTION, Reason.EXACT_DUPLICATE,
                   Reason.STALE_VERIFICATION, Reason.CONFLICTING_SOURCE,
                   Reason.HARD_EXPIRED):  # fmt: skip
        assert reasons[reason] > 0, reason


def test_markers_add_unique_canaries() -> None:
    plain = list(generate(300, seed=2, anchor=ANCHOR))
    marked = list(generate(300, seed=2, anchor=ANCHOR, markers=True))
    canaries = set()
    for p, m in zip(plain, marked, strict=True):
        assert p.id == m.id
        assert m.content.startswith(p.content) and "[canary " in m.content
        canaries.add(m.content.rsplit("[canary ", 1)[1])
    assert len(canaries) == 300


def test_demo_cli_writes_exactly_n(home: Path, tmp_path: Path) -> None:
    store = tmp_path / "demo.db"
    res = CliRunner().invoke(
        app,
        [
            "demo",
            "-n",
            "777",
            "--seed",
            "5",
            "--anchor",
            "2026-11-01T00:00:00Z",
            "--store",
            f"sqlite:///{store}",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["records"] == 777
    db = SqliteStore(store)
    try:
        assert db.count() == 777
        got = {r.id: r.model_dump() for r in db.iter_all()}
    finally:
        db.close()
    want = {r.id: r.model_dump() for r in generate(777, seed=5, anchor=ANCHOR)}
    assert got == want
