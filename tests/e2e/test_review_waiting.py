"""Review findings past the nightly budget, on real nights: named (`review list --waiting`),
aged into a later budget however many higher-priority findings keep coming, and closed by
the sweep when their finding goes. Before, they were only counted (`review_waiting`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from memlife.cli import app
from memlife.model import MemoryRecord
from memlife.pipeline import RunConfig, run_local
from memlife.policy import resolve_policy_path
from memlife.review_queue import ReviewItem, ReviewQueue
from memlife.stores.sqlite import SqliteStore

DAY1 = datetime(2026, 3, 2, 8, tzinfo=UTC)
NIGHT = DAY1 + timedelta(days=1, hours=18)
ACTOR, NS = "u-7", "/team/notes"  # no owner for this namespace: every record MISSING_OWNER
FACTS = ["keeps bees", "plays chess", "speaks Welsh", "grows tomatoes", "collects stamps",
         "restores clocks", "sails dinghies", "brews cider", "climbs at Stanage", "knits socks",
         "rings church bells", "builds kites"]  # fmt: skip


def seed(home: Path, rid: str, text: str, at: datetime, confidence: float) -> None:
    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many([MemoryRecord(id=rid, actor_id=ACTOR, namespace=NS, memory_type="semantic",
                                     content=text, created_at=at, source="agent_inferred",
                                     confidence=confidence)])  # fmt: skip
    finally:
        store.close()


def policy(tmp_path: Path, per_day: float) -> str:
    text = resolve_policy_path(None).read_text()
    for old, new in (("nightly_budget: 500", "nightly_budget: 2"),
                     ("waiting_priority_per_day: 0.1", f"waiting_priority_per_day: {per_day}")):  # fmt: skip
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / f"budget-{per_day}.yaml"
    path.write_text(text)
    return str(path)


def waiting(home: Path) -> dict[str, ReviewItem]:
    store = SqliteStore(home / "memlife.db")
    try:
        return {i.record_id: i for i in ReviewQueue.for_store(store).list(states=("waiting",))}
    finally:
        store.close()


def nights(home: Path, rules: str, count: int) -> int | None:
    """A low-priority fact (confidence 0.9: priority 0.6) on the first night, then each night
    two new ones of priority 1.4 (confidence 0.1). The night the low one opens, or None."""
    seed(home, "low", "The user sings in a choir.", DAY1, 0.9)
    for n in range(count):
        for k in range(2):
            fact = FACTS[2 * n + k]
            seed(home, f"h{n}{k}", f"The user {fact}.", DAY1 + timedelta(days=n), 0.1)
        summary = run_local(RunConfig(dry_run=False, now=NIGHT + timedelta(days=n), policy=rules))
        assert summary.status == "success"
        if summary.other.get("review_opened_waited"):
            return n
        assert "low" in waiting(home)
    return None


def test_a_low_finding_opens_once_it_has_waited_long_enough(offline_home: Path, tmp_path: Path):
    # 0.6 + 0.25 a day passes 1.4 on the fourth day after it was first found
    assert nights(offline_home, policy(tmp_path, 0.25), 6) == 4
    assert "low" not in waiting(offline_home)


def test_without_ageing_the_stream_keeps_it_waiting(offline_home: Path, tmp_path: Path):
    assert nights(offline_home, policy(tmp_path, 0.0), 6) is None
    assert waiting(offline_home)["low"].first_seen_at == NIGHT.isoformat()


def test_waiting_findings_are_listed_and_closed_when_their_finding_goes(
    offline_home: Path, tmp_path: Path
) -> None:
    rules = policy(tmp_path, 0.1)
    for i, fact in enumerate(FACTS[:5]):
        seed(offline_home, f"m{i}", f"The user {fact}.", DAY1 + timedelta(hours=i), 0.5)
    summary = run_local(RunConfig(dry_run=False, now=NIGHT, policy=rules))
    assert summary.other["review_opened"] == 2 and summary.other["review_waiting_listed"] == 3
    res = CliRunner().invoke(app, ["review", "list", "--waiting", "--json"])
    assert res.exit_code == 0, res.stderr
    listed = json.loads(res.stdout)
    assert len(listed) == 3 and {i["state"] for i in listed} == {"waiting"}
    assert {i["first_seen_at"] for i in listed} == {NIGHT.isoformat()}
    res = CliRunner().invoke(app, ["review", "list"])  # the reviewer's queue: open only
    assert res.exit_code == 0 and "2 review items" in res.stdout
    res = CliRunner().invoke(app, ["review", "list", "--waiting", "--all"])
    assert res.exit_code == 2 and "use one" in res.stderr
    # one of them gets an owner: the next night's sweep closes its waiting item
    gone = sorted(waiting(offline_home))[0]
    store = SqliteStore(offline_home / "memlife.db")
    try:
        record = store.get(gone)
        assert record is not None
        store.put_many([record.model_copy(update={"owner": "team-notes"})])
        queue = ReviewQueue.for_store(store)
        before = {i.record_id: i for i in queue.list(states=("waiting",))}[gone]
    finally:
        store.close()
    later = run_local(RunConfig(dry_run=False, now=NIGHT + timedelta(days=1), policy=rules))
    assert later.status == "success"
    assert gone not in waiting(offline_home)
    store = SqliteStore(offline_home / "memlife.db")
    try:
        after = ReviewQueue.for_store(store).get(before.item_id)
    finally:
        store.close()
    assert after is not None and (after.state, after.decision) == ("resolved", "cleared")
