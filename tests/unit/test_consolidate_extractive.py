"""ExtractiveConsolidator: verbatim only, every source id kept, no model, no tokens."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memlife.consolidate import ConsolidationError, ExtractiveConsolidator, Group, check_grounding
from memlife.consolidate.coverage import DROPPED_FACT
from memlife.embed import default_embedder
from memlife.model import MemoryRecord, Source

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def rec(
    rid: str, content: str, day: int, source: Source = Source.user_stated, confidence: float = 0.7
) -> MemoryRecord:
    return MemoryRecord(
        id=rid,
        actor_id="u-1",
        namespace="/users/u-1/preferences",
        memory_type="semantic",
        subject="seat",
        content=content,
        source=source,
        created_at=T0 + timedelta(days=day),
        confidence=confidence,
    )


RECORDS = [
    rec("a", "Prefers a window seat on flights.", 0, confidence=0.95),
    rec("b", "Prefers an aisle seat on flights.", 50, Source.system_of_record),
    rec("c", "prefers an AISLE seat on flights", 60),  # a restatement of b
    rec("d", "Likes aisle seats when flying.", 70, Source.agent_inferred),
]


def group(survivor: str | None = None) -> Group:
    return Group("k", "u-1", "/users/u-1/preferences", "seat", RECORDS, survivor_id=survivor)


def test_verbatim_survivor_and_all_source_ids() -> None:
    res = ExtractiveConsolidator().consolidate(group(survivor="c"))
    assert res.summary == "prefers an AISLE seat on flights" and res.claims == [res.summary]
    # The other distinct statements, verbatim, newest first; b restates c and is dropped once.
    assert res.dropped_claims == [
        "Likes aisle seats when flying.",
        "Prefers a window seat on flights.",
    ]
    assert res.source_ids == ["a", "b", "c", "d"]
    # the confidence of what it says (b and c: 0.7), not of "window seat" it drops (a: 0.95,
    # pinned here before audit 51x5)
    assert res.confidence == 0.7
    assert (res.model, res.input_tokens, res.output_tokens) == (None, 0, 0)


def test_without_survivor_authority_then_recency_wins() -> None:
    res = ExtractiveConsolidator().consolidate(group())
    assert res.summary == "Prefers an aisle seat on flights."  # system_of_record beats newer ones


def test_every_output_string_is_some_record_verbatim_and_grounded() -> None:
    res = ExtractiveConsolidator().consolidate(group())
    contents = {r.content for r in RECORDS}
    assert {res.summary, *res.claims, *res.dropped_claims} <= contents
    # grounded: nothing invented. Coverage, which runs after every grounding rule, refuses
    # it: by policy the extractive answer retires the statements it drops (newest or most
    # authoritative wins), which a model's "duplicate" may not
    with pytest.raises(ConsolidationError) as info:
        check_grounding(res, group(), default_embedder(), 0.55)
    assert info.value.code == DROPPED_FACT
