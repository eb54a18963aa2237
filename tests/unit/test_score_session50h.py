"""Audit 50h: the nightly score as accesses arrive (memlife/score.py, memlife/ledger_merge.py).

Finding: a record's own ``last_accessed_at`` stamped far in the future (an import from a
system whose clock ran ahead, a host clock set to 2099 when the fact was restated) was
scored as read at the cutoff, every night until that date: in year 9999, for ever. The
access ledger leaves its own reads after the cutoff out (``actor_stats(until=cutoff)``);
the store's stamp had no such bound, so it pinned the record above its type's low score.

Controls: a stamp within the clock skew still counts as read at the cutoff (the existing
rule, ``test_score.py::test_future_timestamps_count_as_age_zero``), and a property test over
access histories through the real ledger: a read between creation and cutoff never lowers
the score, any other read changes nothing, and compaction or a second night's read of the
same ledger scores the same.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlife.importer import import_file
from memlife.ledger import AccessLedger
from memlife.ledger_merge import merge_into_view
from memlife.model import MemoryRecord, MemoryType, Source, plan_view
from memlife.plan import Planner
from memlife.policy import load_policy
from memlife.score import Scorer
from memlife.stores.sqlite import SqliteStore
from tests.support.records import good

POLICY = load_policy("policies/default.yaml")
CUTOFF = datetime(2026, 11, 1, 3, tzinfo=UTC)
NS = "/users/u-1/procedures"


def _line(rid: str, last_accessed_at: str | None) -> dict:
    """An old, weakly sourced procedure: a LOW_SCORE review finding unless it is read."""
    return good(
        rid,
        namespace=NS,
        memory_type="procedural",
        subject=f"steps {rid}",
        source="agent_inferred",
        confidence=0.3,
        created_at="2024-01-02T10:00:00Z",
        last_verified_at=None,
        last_accessed_at=last_accessed_at,
        access_count=1,
    )


def _imported(tmp_path: Path, *lines: dict) -> dict[str, MemoryRecord]:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    store = SqliteStore(tmp_path / "m.db")
    try:
        import_file(store, src, policy=POLICY, now=CUTOFF - timedelta(days=1))
        got = {x["id"]: store.get(x["id"]) for x in lines}
        return {k: v for k, v in got.items() if v is not None}
    finally:
        store.close()


def test_a_last_access_stamped_in_year_9999_does_not_pin_the_record(tmp_path: Path) -> None:
    got = _imported(tmp_path, _line("p-never", None), _line("p-9999", "9999-12-31T00:00:00Z"))
    planner = Planner(POLICY, CUTOFF)
    never, pinned = plan_view(got["p-never"]), plan_view(got["p-9999"])
    assert planner.low_score_finding(never)  # the twin never read is a finding
    # the stamp is no read that happened by the cutoff: it scores as the twin does
    scorer, now = Scorer(POLICY), CUTOFF.timestamp()
    assert scorer.score(pinned, now) == pytest.approx(scorer.score(never, now))
    assert scorer.parts(pinned, now).access_recency == 0.0
    assert planner.low_score_finding(pinned)


def test_a_last_access_within_the_clock_skew_counts_as_read_at_the_cutoff(
    tmp_path: Path,
) -> None:
    """Control: a few seconds ahead is clock skew, read as age zero (unchanged)."""
    ahead = (CUTOFF + timedelta(seconds=30)).isoformat().replace("+00:00", "Z")
    at = CUTOFF.isoformat().replace("+00:00", "Z")
    got = _imported(tmp_path, _line("p-ahead", ahead), _line("p-at", at))
    scorer, now = Scorer(POLICY), CUTOFF.timestamp()
    assert scorer.parts(plan_view(got["p-ahead"]), now).access_recency == 1.0
    assert scorer.score(plan_view(got["p-ahead"]), now) == scorer.score(plan_view(got["p-at"]), now)


# -- the score as accesses arrive, through the real ledger -----------------------------------

CREATED = CUTOFF - timedelta(days=400)
_offsets = st.floats(min_value=-30.0, max_value=430.0, allow_nan=False)  # days after creation


def _record(mt: MemoryType) -> MemoryRecord:
    return MemoryRecord(
        id="m-1",
        actor_id="u-1",
        namespace="/users/u-1/facts",
        memory_type=mt,
        content="Runs the backup on Fridays.",
        owner="team",
        source=Source.agent_inferred,
        confidence=0.5,
        created_at=CREATED,
    )


def _scored(root: Path, rec: MemoryRecord, reads: list[float], compact: bool = False) -> float:
    ledger = AccessLedger(root, flush_seconds=None)
    for d in reads:
        ledger.append(rec.actor_id, rec.namespace, rec.id, at=CREATED + timedelta(days=d))
    ledger.append("u-2", rec.namespace, rec.id, at=CUTOFF - timedelta(days=1))  # another tenant
    ledger.flush()
    if compact:
        ledger.compact()
    view = merge_into_view(plan_view(rec), ledger.actor_stats(until=CUTOFF))
    return Scorer(POLICY).score(view, CUTOFF.timestamp())


@settings(max_examples=40, deadline=None)
@given(
    mt=st.sampled_from(list(MemoryType)),
    history=st.lists(_offsets, max_size=6),
    extra=_offsets,
)
def test_a_read_never_lowers_the_score_and_only_reads_in_the_records_life_count(
    tmp_path_factory: pytest.TempPathFactory,
    mt: MemoryType,
    history: list[float],
    extra: float,
) -> None:
    rec = _record(mt)
    base = _scored(tmp_path_factory.mktemp("a"), rec, history)
    more = _scored(tmp_path_factory.mktemp("b"), rec, [*history, extra])
    at = CREATED + timedelta(days=extra)
    if CREATED <= at <= CUTOFF:
        assert more >= base  # one more read, or a later one: never a lower score
    else:
        assert more == base  # before the record existed, or after the cutoff: not its read
    # the same ledger folded by a compaction, and read by a second night, scores the same
    folded = tmp_path_factory.mktemp("c")
    assert _scored(folded, rec, [*history, extra], compact=True) == more
    again = merge_into_view(plan_view(rec), AccessLedger(folded).actor_stats(until=CUTOFF))
    assert Scorer(POLICY).score(again, CUTOFF.timestamp()) == more
