"""Purging a quarantined replacement strands the records it superseded (audit 45e).

Found by ``test_audit45e_stateful.py``: a night merges near-duplicates into a replacement;
the user quarantines the replacement online (``LongTermMemory.set_status``); ``quarantine
purge`` deletes it. Its sources stay ``superseded`` with ``replaced_by`` naming a record
that no longer exists (invariant 3). A review ``delete`` of the same replacement takes them
with it (``orphans.followers``, REPLACEMENT_DELETED, each receipted); purge does not. In an
enforced namespace the next night's safety net deletes them; in a rollout-only namespace no
night ever does, so they point to nothing for good.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from memlife.importer import import_file
from memlife.online.memory import LongTermMemory
from memlife.pipeline import RunConfig, run_local
from memlife.quarantine import purge
from memlife.stores.sqlite import SqliteStore
from tests.support.lifecycle import operation_receipts
from tests.support.records import good

T0 = datetime(2025, 3, 3, 12, tzinfo=UTC)
ENFORCED = "/users/u-1/facts"
ROLLOUT = "/team/u-1/notes"  # matches no enforce_deletion_in glob


def _policy(tmp_path: Path) -> str:
    """The default policy without a required evaluation set (the night merges)."""
    data = yaml.safe_load(Path("policies/default.yaml").read_text())
    data["version"] = "2026.11-audit45e-purge"
    data["gate"]["required"] = False
    p = tmp_path / "policy.yaml"
    p.write_text(yaml.safe_dump(data))
    return str(p)


def _merged_then_purged(home: Path, policy: str, namespace: str) -> tuple[str, list[str]]:
    """Two near-duplicates merged by a night, the replacement quarantined online and
    purged: (the replacement's id, its sources' ids)."""
    home.mkdir(parents=True, exist_ok=True)
    lines = [
        good(rid, actor_id="u-1", namespace=namespace, subject="city", content=text,
             created_at=(T0 - timedelta(days=age)).isoformat(),
             last_verified_at=(T0 - timedelta(days=age)).isoformat())
        for rid, text, age in (("m-1", "Lives in Paris.", 30), ("m-2", "Lives in Paris now.", 5))
    ]  # fmt: skip
    src = home / "in.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with SqliteStore(home / "memlife.db") as store:
        assert import_file(store, src, now=T0).imported == 2
    assert run_local(RunConfig(dry_run=False, now=T0, policy=policy)).status == "success"
    with SqliteStore(home / "memlife.db") as store, LongTermMemory(store) as mem:
        repl = store.get("m-1").provenance.replaced_by
        assert repl and store.get("m-2").provenance.replaced_by == repl
        assert mem.set_status([repl], "quarantined", actor="u-1") == [repl]
    with SqliteStore(home / "memlife.db") as store:
        out = purge(store, 0, policy=policy)  # wall clock: the grace is real time
    assert out["status"] == "success" and repl in {o["record_id"] for o in out["operations"]}
    return repl, ["m-1", "m-2"]


def _dangling(home: Path) -> list[str]:
    with SqliteStore(home / "memlife.db") as store:
        recs = {r.id: r for r in store.iter_all()}
    return sorted(
        rid
        for rid, r in recs.items()
        if r.status.value == "superseded" and r.provenance.replaced_by not in recs
    )


def test_purging_a_quarantined_replacement_takes_its_sources_with_receipts(
    home: Path, tmp_path: Path
) -> None:
    """The adversary quarantines a night's replacement and purges it. Must hold at once
    (invariant 3, as a review delete does): no superseded record points to the purged
    record; each source that went has its own receipted delete."""
    repl, sources = _merged_then_purged(home, _policy(tmp_path), ENFORCED)
    assert _dangling(home) == [], f"superseded records point to the purged {repl}"
    gone = {o["record_id"] for o in operation_receipts(home / "receipts").values()
            if o["outcome"] == "deleted"}  # fmt: skip
    assert set(sources) <= gone


def test_in_a_rollout_namespace_a_purged_replacements_sources_never_stop_dangling(
    home: Path, tmp_path: Path
) -> None:
    """As above in a namespace where deletion is not enforced: the night's safety net
    (orphans.sources_follow) only proposes there, so two later nights leave the sources
    pointing to a record that does not exist. Must hold: after the nights, none does."""
    policy = _policy(tmp_path)
    _merged_then_purged(home, policy, ROLLOUT)
    for day in (1, 40):
        cutoff = T0 + timedelta(days=day)
        assert run_local(RunConfig(dry_run=False, now=cutoff, policy=policy)).status == "success"
    assert _dangling(home) == [], "sources of a purged replacement point to nothing for good"
