"""Audit 43o (session 43): an erased record's owner (a free-text metadata value) outlives the erasure.

1. The rebuilt replacement keeps it.

A night merges two records of one subject (extractive: the replacement copies the newest,
and takes the newest's owner). Erasing that newest record by id rebuilds the replacement
from the kept source (erase._rebuilt): its text becomes the kept one, but every other
field is the old replacement's, the erased record's owner included. The owner is free
text the erased record carried ("team-<marker>"); after the erasure it is still on an
active record, and so in the store file.

2. Its review items keep it. Erasure closes the erased record's items (decision
``erased``) but leaves each row whole, ``owner`` column included.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from memlife.erase import erase
from memlife.model import MemoryRecord, MemoryType, RetentionClass, Status
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.lifecycle import gate_cases

NOW = datetime(2026, 11, 1, 12, tzinfo=UTC)
NS = "/users/u-1/facts"
OWNER_MARKER = "zqx-owner-canary-43o"


def rec(rid: str, content: str, age: float, owner: str) -> MemoryRecord:
    return MemoryRecord(
        id=rid,
        actor_id="u-1",
        namespace=NS,
        memory_type=MemoryType.semantic,
        content=content,
        subject="city",
        owner=owner,
        created_at=NOW - timedelta(days=age),
    )


ERASED = rec("m-a", "The user lives in Berlin now.", 10, f"team-{OWNER_MARKER}")
KEPT = rec("m-b", "The user lives in Paris.", 100, "team-a")


def everywhere(root: Path, needle: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def test_a_rebuilt_replacement_keeps_no_metadata_value_of_the_erased_source(home: Path) -> None:
    """The adversary gives a record an owner of its own, lets a night merge it (the
    replacement takes its owner), then erases it by id. The replacement rebuilt from the
    kept source must carry the kept source's owner, and the erased owner must be in no file
    under MEMLIFE_HOME."""
    db = home / "memlife.db"
    with SqliteStore(db) as s:
        s.put_many([ERASED, KEPT])
    assert run_local(RunConfig(dry_run=False, now=NOW, eval_cases=gate_cases(db))).status == (
        "success"
    )
    with SqliteStore(db) as s:
        (repl,) = [r for r in s.iter_all() if r.id.startswith("r-")]
        assert repl.owner == ERASED.owner  # the merge took the newest member's owner
        result = erase(s, "u-1", ids=["m-a"], now=NOW)
        assert result["status"] == "success" and result["rebuilt"] == [repl.id]
        after = s.get(repl.id)
        assert after is not None and after.status is Status.active
        assert after.content == KEPT.content
        assert after.owner == KEPT.owner
    assert everywhere(home, OWNER_MARKER) == []


def test_the_erased_records_review_items_keep_no_owner_value(home: Path) -> None:
    """The adversary gives a stale sensitive procedure an owner of its own; a night opens
    review items on it (they copy the owner), then the record is erased by id. Its items
    are closed, and the erased owner must be in no file under MEMLIFE_HOME."""
    stale = rec("p-1", "Deploy with make ship.", 400, f"team-{OWNER_MARKER}").model_copy(
        update={
            "namespace": "/users/u-1/procedures",
            "memory_type": MemoryType.procedural,
            "subject": "deploy",
            "retention_class": RetentionClass.sensitive,
        }
    )
    db = home / "memlife.db"
    with SqliteStore(db) as s:
        s.put_many([stale, KEPT])
    assert run_local(RunConfig(dry_run=False, now=NOW, eval_cases=gate_cases(db))).status == (
        "success"
    )
    with SqliteStore(db) as s:
        q = "SELECT owner, state FROM review_items WHERE record_id='p-1'"
        assert (f"team-{OWNER_MARKER}", "open") in s.connection.execute(q).fetchall()
        assert erase(s, "u-1", ids=["p-1"], now=NOW)["erased"] == ["p-1"]
        assert {row[1] for row in s.connection.execute(q)} == {"resolved"}
    assert everywhere(home, OWNER_MARKER) == []


def test_a_rebuild_keeps_an_owner_or_subject_no_erased_source_gave() -> None:
    """The rebuild replaces only what came with the erased source: an owner or a subject
    set on the replacement otherwise (``remember`` filling a subject in, ``import
    --update``) stays; one only the erased source had goes, for the kept sources'."""
    from datetime import UTC, datetime

    from memlife.erase import _rebuilt
    from memlife.model import MemoryRecord

    def rec(rid: str, owner: str | None, subject: str | None) -> MemoryRecord:
        return MemoryRecord.model_validate({
            "id": rid, "actor_id": "u-1", "namespace": "/users/u-1/facts",
            "memory_type": "semantic", "content": f"Likes tea ({rid}).", "owner": owner,
            "subject": subject, "created_at": datetime(2026, 1, 1, tzinfo=UTC),
        })  # fmt: skip

    kept, gone = rec("m-b", "team-b", "tea"), rec("m-a", "team-a", "drinks")
    from_gone = rec("r-1", "team-a", "drinks")
    assert (lambda r: (r.owner, r.subject))(_rebuilt(from_gone, [kept], [kept], [gone])) == (
        "team-b",
        "tea",
    )
    set_since = rec("r-1", "ops", "beverages")
    assert (lambda r: (r.owner, r.subject))(_rebuilt(set_since, [kept], [kept], [gone])) == (
        "ops",
        "beverages",
    )
