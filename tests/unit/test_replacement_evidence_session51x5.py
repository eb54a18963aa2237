"""Audit 51x5 (session 51: what an offline merge may write): the replacement's evidence.

A subject group's newer statement supersedes an older, other one ("Blood type is B+."
after "Blood type is A+."). The replacement carried the newer text, yet it took its
``last_verified_at`` from every member and (extractive) its ``confidence`` as every
member's highest: the retired "A+", verified by a reviewer last week at 0.99, made "B+"
(said at 0.3, never verified) read as verified and near certain. In a sensitive class the
unverified record would have gone to review (STALE_VERIFICATION); the replacement did not.
Staging's cosine (A+ / B+) even calls the older a near duplicate, so the planner's
decision is what tells a retired statement. The fix: only members whose statement the
replacement carries lend their verification and (extractive) confidence.

Real components: the embedded SQLite store, the bundled MiniLM, the extractive
consolidator (no key), one nightly apply run through ``run_local``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from memlife.model import MemoryRecord, RetentionClass, Source, Status
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore

DAY1 = datetime(2026, 4, 6, 7, tzinfo=UTC)
NIGHT = DAY1 + timedelta(days=20)
NS = "/users/u-6/health"  # deletion not enforced: no evaluation set needed to consolidate
CHECKED = DAY1 + timedelta(days=3)


def _replacement(home: Path, older: str, newer: str) -> MemoryRecord:
    def rec(rid: str, text: str, day: int, confidence: float, verified: datetime | None):
        return MemoryRecord(
            id=rid, actor_id="u-6", namespace=NS, memory_type="semantic", subject="blood type",
            content=text,
            source=Source.user_confirmed, owner="team-health", confidence=confidence,
            retention_class=RetentionClass.sensitive, created_at=DAY1 + timedelta(days=day),
            last_verified_at=verified,
        )  # fmt: skip

    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many([rec("m-old", older, 0, 0.99, CHECKED), rec("m-new", newer, 5, 0.3, None)])
    finally:
        store.close()
    assert run_local(RunConfig(dry_run=False, now=NIGHT)).status == "success"
    store = SqliteStore(home / "memlife.db")
    try:
        (active,) = [r for r in store.iter_all() if r.status is Status.active]
    finally:
        store.close()
    assert active.id.startswith("r-") and active.provenance.supersedes == ["m-new", "m-old"]
    return active


def test_a_replacement_is_not_verified_by_the_statement_it_retires(offline_home: Path) -> None:
    r = _replacement(offline_home, "Blood type is A+.", "Blood type is B+.")
    assert r.content == "Blood type is B+." and r.last_verified_at is None


def test_a_replacement_takes_no_confidence_from_the_statement_it_retires(
    offline_home: Path,
) -> None:
    r = _replacement(offline_home, "Blood type is A+.", "Blood type is B+.")
    assert r.confidence == 0.3


def test_control_a_restatement_lends_its_check_and_confidence(offline_home: Path) -> None:
    """The older record says the same statement (case and punctuation aside): its check and
    its confidence are the replacement's."""
    r = _replacement(offline_home, "blood type is B+", "Blood type is B+.")
    assert r.last_verified_at == CHECKED and r.confidence == 0.99
