"""The composite score: bounded, monotone, and exactly the documented formula."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlife.model import MemoryRecord, MemoryType, RetentionClass, Source, plan_view
from memlife.policy import load_policy
from memlife.score import Scorer

POLICY = load_policy("policies/default.yaml")
SCORER = Scorer(POLICY)
NOW = datetime(2026, 11, 1, tzinfo=UTC)
T = NOW.timestamp()
DAY = 86400.0


def view(
    *,
    memory_type: MemoryType = MemoryType.semantic,
    created_days: float = 10,
    accessed_days: float | None = None,
    access_count: int = 0,
    verified_days: float | None = None,
    source: Source = Source.user_stated,
    retention: RetentionClass = RetentionClass.standard,
):
    rec = MemoryRecord(
        id="m-1",
        actor_id="u-1",
        namespace="/users/u-1/facts",
        memory_type=memory_type,
        content="Lives in Lisbon.",
        owner="team",
        source=source,
        created_at=NOW - timedelta(days=created_days),
        last_accessed_at=None if accessed_days is None else NOW - timedelta(days=accessed_days),
        access_count=access_count,
        last_verified_at=None if verified_days is None else NOW - timedelta(days=verified_days),
        retention_class=retention,
    )
    return plan_view(rec)


@pytest.mark.parametrize("mt", list(MemoryType))
def test_documented_formula(mt: MemoryType) -> None:
    """Recompute the module docstring's formula independently from the policy."""
    tp = POLICY.memory_types[mt]
    v = view(
        memory_type=mt,
        created_days=40,
        accessed_days=12,
        access_count=3,
        verified_days=20,
        source=Source.user_confirmed,
    )
    creation = 2 ** (-40 / tp.half_life_days.creation)
    access = 2 ** (-12 / tp.half_life_days.access)
    freq = 1 - math.exp(-3 / tp.frequency_scale)
    verify = (
        1.0 if tp.verification_stale_days is None else 1 - min(1, 20 / tp.verification_stale_days)
    )
    source = POLICY.source_weights[Source.user_confirmed]
    w = tp.weights
    conf = v.confidence
    expected = (
        w.creation_recency * creation + w.access_recency * access + w.frequency * freq
        + w.verification * verify + w.source * source + w.confidence * conf
    ) / (w.creation_recency + w.access_recency + w.frequency + w.verification + w.source
         + w.confidence)  # fmt: skip
    parts = SCORER.parts(v, T)
    assert parts.creation_recency == pytest.approx(creation)
    assert parts.access_recency == pytest.approx(access)
    assert parts.frequency == pytest.approx(freq)
    assert parts.verification == pytest.approx(verify)
    assert parts.source == pytest.approx(source)
    assert parts.score == pytest.approx(expected)
    assert SCORER.score(v, T) == parts.score


def test_half_life_halves_creation_recency() -> None:
    hl = POLICY.memory_types[MemoryType.semantic].half_life_days.creation
    assert SCORER.parts(view(created_days=hl), T).creation_recency == pytest.approx(0.5)
    assert SCORER.parts(view(created_days=2 * hl), T).creation_recency == pytest.approx(0.25)


def test_never_accessed_and_never_verified_contribute_zero() -> None:
    p = SCORER.parts(view(accessed_days=None, verified_days=None), T)
    assert p.access_recency == 0.0
    assert p.verification == 0.0
    assert p.frequency == 0.0


def test_contradiction_and_sensitivity_penalties() -> None:
    v = view(created_days=1, accessed_days=1, access_count=20, verified_days=1)
    base = SCORER.score(v, T)
    assert SCORER.score(v, T, contradicted=True) == pytest.approx(
        base - POLICY.contradiction_penalty
    )
    sens = view(created_days=1, accessed_days=1, access_count=20, verified_days=1,
                retention=RetentionClass.sensitive)  # fmt: skip
    penalty = POLICY.sensitivity_penalty[RetentionClass.sensitive]
    assert penalty > 0
    assert SCORER.score(sens, T) == pytest.approx(base - penalty)


def test_future_timestamps_count_as_age_zero() -> None:
    # clock skew: a record 'created' after the cutoff is as fresh as one created at it
    assert SCORER.score(view(created_days=-5), T) == SCORER.score(view(created_days=0), T)


def test_source_authority_orders_scores() -> None:
    by_source = {s: SCORER.score(view(source=s), T) for s in Source}
    order = sorted(Source, key=lambda s: POLICY.source_weights[s])
    assert [by_source[s] for s in order] == sorted(by_source.values())
    assert by_source[Source.agent_inferred] < by_source[Source.system_of_record]


def test_episodic_verification_never_goes_stale() -> None:
    # episodic has no staleness limit: its verification part is 1 (staleness as a review
    # reason is the planner's, tests/unit/test_plan.py)
    assert SCORER.parts(view(memory_type=MemoryType.episodic), T).verification == 1.0


ages = st.floats(min_value=-30, max_value=5000, allow_nan=False)
maybe_age = st.none() | st.floats(min_value=0, max_value=5000, allow_nan=False)
counts = st.integers(min_value=0, max_value=10_000)


@settings(max_examples=150, deadline=None)
@given(
    mt=st.sampled_from(list(MemoryType)), created=ages, accessed=maybe_age, count=counts,
    verified=maybe_age, source=st.sampled_from(list(Source)),
    retention=st.sampled_from(list(RetentionClass)), contradicted=st.booleans(),
)  # fmt: skip
def test_score_bounded(
    mt, created, accessed, count, verified, source, retention, contradicted
) -> None:
    v = view(memory_type=mt, created_days=created, accessed_days=accessed, access_count=count,
             verified_days=verified, source=source, retention=retention)  # fmt: skip
    p = SCORER.parts(v, T, contradicted)
    assert 0.0 <= p.score <= 1.0
    for part in (p.creation_recency, p.access_recency, p.frequency, p.verification, p.source):
        assert 0.0 <= part <= 1.0


@settings(max_examples=100, deadline=None)
@given(
    mt=st.sampled_from(list(MemoryType)),
    a=st.floats(min_value=0, max_value=3000, allow_nan=False),
    b=st.floats(min_value=0, max_value=3000, allow_nan=False),
    count=counts,
)
def test_monotone_in_recency(mt, a, b, count) -> None:
    newer, older = sorted((a, b))
    # creation recency: a newer record never scores lower
    s_new = SCORER.score(view(memory_type=mt, created_days=newer, access_count=count), T)
    s_old = SCORER.score(view(memory_type=mt, created_days=older, access_count=count), T)
    assert s_new >= s_old
    # access recency: a more recent read never scores lower (created long ago for both)
    s_new = SCORER.score(view(memory_type=mt, created_days=4000, accessed_days=newer), T)
    s_old = SCORER.score(view(memory_type=mt, created_days=4000, accessed_days=older), T)
    assert s_new >= s_old
    # and having been read at all never scores lower than never having been read
    never = SCORER.score(view(memory_type=mt, created_days=4000), T)
    assert s_old >= never


@settings(max_examples=100, deadline=None)
@given(mt=st.sampled_from(list(MemoryType)), a=counts, b=counts)
def test_monotone_in_access_count(mt, a, b) -> None:
    lo, hi = sorted((a, b))
    s_lo = SCORER.score(
        view(memory_type=mt, created_days=100, accessed_days=10, access_count=lo), T
    )
    s_hi = SCORER.score(
        view(memory_type=mt, created_days=100, accessed_days=10, access_count=hi), T
    )
    assert s_hi >= s_lo


def test_strictly_monotone_where_weights_are_positive() -> None:
    # guards against a monotonicity test that passes because everything is flat
    v1 = SCORER.score(view(created_days=1, access_count=1, accessed_days=1), T)
    v2 = SCORER.score(view(created_days=300, access_count=1, accessed_days=1), T)
    v3 = SCORER.score(view(created_days=1, access_count=10, accessed_days=1), T)
    v4 = SCORER.score(view(created_days=1, access_count=1, accessed_days=200), T)
    assert v1 > v2
    assert v3 > v1
    assert v1 > v4


def test_confidence_feeds_the_score() -> None:
    """Policy default: a less confident record scores lower, all else equal."""
    sure = plan_view(_rec_with_confidence(0.95))
    unsure = plan_view(_rec_with_confidence(0.2))
    assert POLICY.memory_types[MemoryType.semantic].weights.confidence > 0
    assert SCORER.score(unsure, T) < SCORER.score(sure, T)


def _rec_with_confidence(c: float):
    v = view(created_days=10)
    return MemoryRecord(id=v.id, actor_id=v.actor_id, namespace=v.namespace,
                        memory_type=v.memory_type, content="Likes tea.",
                        created_at=datetime.fromtimestamp(v.created, UTC), confidence=c)  # fmt: skip
