"""Audit 49m3 (session 49, mutation pass): ``ReportWriter.drop_shards`` (audit 49iv) takes out
the failed (actor, namespace) shards only: the same actor's other namespaces, which were
planned, keep their rows, and the row count follows what the file holds."""

from __future__ import annotations

import json
from pathlib import Path

from memlife.plan import Action, Decision, Reason
from memlife.report import ReportWriter


def _shard(actor: str, ns: str, n: int) -> list[Decision]:
    return [
        Decision(f"{actor}{ns}-{i}", actor, ns, Action.review, [Reason.LOW_SCORE], score=0.1)
        for i in range(n)
    ]


def test_a_failed_shard_leaves_the_same_actors_other_namespaces(tmp_path: Path) -> None:
    report = ReportWriter(tmp_path / "r")
    report.write(_shard("u-1", "/facts", 2))
    report.write(_shard("u-1", "/prefs", 3))  # the same actor, another shard: it was planned
    report.write(_shard("u-2", "/facts", 1))

    assert report.drop_shards({("u-1", "/facts")}) == 2

    rows = [json.loads(x) for x in report.jsonl_path.read_text().splitlines()]
    assert sorted({(r["actor_id"], r["namespace"]) for r in rows}) == [
        ("u-1", "/prefs"),
        ("u-2", "/facts"),
    ]
    assert report.rows == len(rows) == 4
    report.close()
    assert report.rows == 4
