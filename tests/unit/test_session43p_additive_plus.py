"""Audit 43p (session 43): "plus" as an additive cue reads a name or a grade as "adds a fact".

Session 43 (audit n) added "additionally" and "plus" to ``text._ADDITIVE_CUE`` so that
"Plus allergic to shellfish." retires nothing. The cue matches the word anywhere, so a
newer statement that names "Disney Plus", an "A-plus" or a "plus-size" shop is read as
additive too: offline the extractive consolidator keeps the group apart (KEEP_APART) and
a model's correct ``update`` is refused (ADDITIVE_NOT_UPDATE), so the outdated statement
stays active beside its update. (On LoCoMo: no observation holds "plus" or
"additionally"; 67 of 5,882 turns hold "plus", nearly all as a clause-opening "Plus, ...".)
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife.model import MemoryRecord, MemoryType, Source, Status
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from memlife.text import reads_additive
from tests.support.lifecycle import gate_cases

NOW = datetime(2026, 11, 1, 12, tzinfo=UTC)
NS = "/users/u-1/facts"


def fact(rid: str, text: str, subject: str, age: float) -> MemoryRecord:
    return MemoryRecord(
        id=rid, actor_id="u-1", namespace=NS, memory_type=MemoryType.semantic, content=text,
        subject=subject, owner="team-a", source=Source.user_stated,
        created_at=NOW - timedelta(days=age), last_verified_at=NOW - timedelta(days=age),
    )  # fmt: skip


PLUS_AS_A_WORD = [
    "Prefers Disney Plus for streaming.",
    "Got an A-plus in chemistry.",
    "Buys her dresses at a plus-size shop.",
    "Runs 40 plus miles a week.",
]


@pytest.mark.parametrize("text", PLUS_AS_A_WORD)
def test_plus_inside_a_name_or_compound_adds_nothing(text: str) -> None:
    """The adversary names a service, a grade or a size with "plus" in it: the statement
    replaces the older one as any other would; it is not additive wording."""
    assert not reads_additive(text)


@pytest.mark.parametrize("text", ["Plus allergic to shellfish.", "Loves hiking. Plus, she swims."])
def test_plus_opening_a_clause_still_adds(text: str) -> None:
    """The case audit 43n fixed: "plus" as a connective still reads additive."""
    assert reads_additive(text)


def test_an_update_naming_disney_plus_supersedes_the_older_statement(home: Path) -> None:
    """The adversary changes a preference to a service whose name holds "plus". Offline the
    newest statement of a subject wins (as "aisle" over "window" does): the older
    preference must be superseded, not kept active beside the newer one."""
    db = home / "memlife.db"
    with SqliteStore(db) as s:
        s.put_many([
            fact("m-old", "Prefers Netflix for streaming.", "streaming", 100),
            fact("m-new", "Prefers Disney Plus for streaming.", "streaming", 10),
        ])  # fmt: skip
    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=gate_cases(db)))
    assert summary.status == "success", summary.as_json()
    with SqliteStore(db) as s:
        old = s.get("m-old")
        assert old is not None and old.status is Status.superseded
