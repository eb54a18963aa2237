"""Shared by the gate tests: records, evaluation cases and policies for the gate's scenarios."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from memlife.model import MemoryRecord, MemoryType, Provenance, RetentionClass, Source
from memlife.stores.sqlite import SqliteStore

NOW = datetime(2026, 6, 1, tzinfo=UTC)
ACTOR = "u-1"


def rec(
    rid: str,
    ns: str,
    content: str,
    *,
    subject: str | None = None,
    age: float = 100,
    mtype: MemoryType = MemoryType.semantic,
    expires: datetime | None = None,
    source: Source = Source.user_stated,
    actor: str = ACTOR,
    retention: RetentionClass = RetentionClass.standard,
    **kw: Any,
) -> MemoryRecord:
    created = NOW - timedelta(days=age)
    return MemoryRecord(
        id=rid,
        actor_id=actor,
        namespace=f"/users/{actor}/{ns}",
        memory_type=mtype,
        content=content,
        subject=subject,
        owner="team-a",
        source=source,
        created_at=created,
        last_verified_at=created,
        expires_at=expires,
        retention_class=retention,
        provenance=Provenance(source_event=f"evt-{rid}"),
        **kw,
    )


def store_at(home: Path) -> SqliteStore:
    return SqliteStore(home / "memlife.db")


def write_cases(path: Path, cases: list[dict]) -> str:
    path.write_text(yaml.safe_dump({"cases": cases}, sort_keys=False))
    return str(path)


def ttl_policy(tmp_path: Path, semantic_ttl: int) -> str:
    """The default policy with a short default TTL for semantic memories (the bad change)."""
    data = yaml.safe_load(Path("policies/default.yaml").read_text())
    data["version"] = "2026.11-test-short-ttl"
    data["memory_types"]["semantic"]["default_ttl_days"] = semantic_ttl
    p = tmp_path / "short-ttl.yaml"
    p.write_text(yaml.safe_dump(data))
    return str(p)


FACTS = [
    rec("m-allergy", "facts", "Is allergic to peanuts; never serve satay.", subject="allergy"),
    rec("m-dog", "facts", "Has a dog named Rex.", subject="pet"),
    rec(
        "m-router",
        "procedures",
        "To reset the router: unplug it, wait 30 seconds, plug it back in.",
        subject="router_reset",
        mtype=MemoryType.procedural,
        source=Source.system_of_record,
        age=20,
    ),
    rec(
        "m-trip",
        "episodes",
        "Planned a trip to Osaka in May.",
        mtype=MemoryType.episodic,
        age=40,
        expires=NOW - timedelta(days=2),
    ),
]


def vector_row(store: SqliteStore, record: MemoryRecord) -> bytes:
    row = store.connection.execute(
        "SELECT vector FROM embeddings WHERE content_sha256=? AND model_id NOT LIKE '%#tokens'",
        (record.sha256,),
    ).fetchone()
    assert row is not None
    return bytes(row[0])


# The high-impact case most gate scenarios hold a run to: the allergy must stay retrievable.
ALLERGY_KEPT: dict[str, Any] = {
    "id": "allergy-kept",
    "query": "Is the user allergic to any food?",
    "actor_id": ACTOR,
    "must_retrieve": ["m-allergy"],
    "impact": "high",
    "k": 3,
}
