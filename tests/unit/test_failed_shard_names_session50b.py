"""Audit 50b: a failed shard's name is the key of the failure event's codes.

``Shard.__str__`` joined actor and namespace with ':' ("for people"). AgentCore allows ':'
and '/' in an actor id, so actor ``a`` with namespace ``/x:/y`` and actor ``a:/x`` with
namespace ``/y`` (both accepted by the importer) were both "a:/x:/y". The review sweep was
fixed to compare the pair (session 39), but the Prefect failure event still keyed
``failed_shard_codes`` by that name: two tenants failing one night landed in one key (one
failure and its tenant lost to the alert), and the summary named both alike.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from memlife.model import MemoryRecord
from memlife.pipeline import RunConfig, run_local
from memlife.run_types import Shard
from memlife.stores.sqlite import SqliteStore

NOW = datetime(2026, 11, 1, tzinfo=UTC)
TWINS = [("a:/x", "/y"), ("a", "/x:/y")]  # both "a:/x:/y" joined with ':'


def _night(home: Path, tenants: list[tuple[str, str]]) -> object:
    """An apply night where each tenant's shard fails (a damaged row its gate case reads)."""
    home.mkdir(parents=True, exist_ok=True)
    records, cases = [], []
    for i, (actor, ns) in enumerate(tenants):
        records += [
            MemoryRecord(id=f"r{i}-{k}", actor_id=actor, namespace=ns, memory_type="semantic",
                         subject="tea", content=f"Prefers green tea{'!' * k}",
                         created_at=NOW - timedelta(days=90 + k))
            for k in (0, 1)
        ]  # fmt: skip
        cases.append({"id": f"c{i}", "kind": "custom", "query": "what does the user prefer?",
                      "actor_id": actor, "namespace": ns, "must_retrieve": [f"r{i}-0"],
                      "k": 100, "threshold": -1.0})  # fmt: skip
    with SqliteStore(home / "memlife.db") as store:
        store.put_many(records)
    db = sqlite3.connect(home / "memlife.db")
    db.execute("UPDATE records SET retention_class=X'01' WHERE id LIKE '%-1'")
    db.commit()
    db.close()
    (home / "cases.yaml").write_text(yaml.safe_dump({"cases": cases}))
    return run_local(RunConfig(dry_run=False, now=NOW, eval_cases=str(home / "cases.yaml")))


def test_two_tenants_failing_one_night_are_two_keys_of_the_failure_event(home: Path) -> None:
    from flows import events
    from memlife.run_finish import markdown_summary

    summary = _night(home, TWINS)
    assert summary.status == "partial_failure"
    scopes = {(s["actor_id"], s["namespace"]) for s in summary.failed_shards}
    assert scopes == set(TWINS)  # the receipt's data always told them apart
    event = events.run_event(summary)
    assert event is not None
    payload = event[2]
    assert len(set(payload["failed_shards"])) == 2
    assert len(payload["failed_shard_codes"]) == 2  # was 1: one tenant's failure lost
    line = next(x for x in markdown_summary(summary).splitlines() if x.startswith("Failed"))
    assert len(set(line.removeprefix("Failed shards: ").split(", "))) == 2


def test_a_plain_actors_shard_name_is_unchanged(home: Path) -> None:
    """Control: actors without ':' keep "actor:namespace" (docs, alerts, tests read it)."""
    from flows import events

    summary = _night(home, [("u-1", "/users/u-1/facts"), ("u-2", "/users/u-2/facts")])
    event = events.run_event(summary)
    assert event is not None
    assert sorted(event[2]["failed_shard_codes"]) == ["u-1:/users/u-1/facts",
                                                      "u-2:/users/u-2/facts"]  # fmt: skip


def test_every_shard_name_names_one_actor_and_namespace() -> None:
    """Names of distinct shards never meet (an actor with ':' or a leading '"' quoted)."""
    actors = ["a", "a:", "a:/x", '"a', '"a:/x"', "", ":", "a/b", "a\\:b"]
    namespaces = ["/y", "/x:/y", ":/y", "y", '":/y', "/x"]
    names: dict[str, tuple[str, str]] = {}
    for a in actors:
        for ns in namespaces:
            name = str(Shard(a, ns))
            assert names.setdefault(name, (a, ns)) == (a, ns), (name, names[name], (a, ns))
    assert str(Shard("a:/x", "/y")) == json.dumps("a:/x") + ":/y"
