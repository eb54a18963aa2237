"""Session 26 review: an erasure matched LIVE records against the older store versions'
statement keys (version 3 folded 'C++' to 'C', 'A+' and 'A-' to 'A', version 2 '-18' to
'18'), so erasing 'Knows C++' by id also erased the live 'Knows C', a different fact. The
older keys exist only so that a tombstone written then keeps refusing what it refused;
an erasure selects live records by today's key and exact hash. Each test of a different
fact failed before the fix; the same-statement and old-tombstone tests are counter-checks."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife.erase import erase, plan_erasure, text_keys
from memlife.model import MemoryRecord, MemoryType, Provenance
from memlife.stores.sqlite import SqliteStore
from memlife.tombstones import insert_new

NOW = datetime(2026, 6, 1, tzinfo=UTC)

# (the erased text, another fact that an older version's key folded into it)
DIFFERENT = [
    ("Knows C++", "Knows C"),
    ("Knows C#", "Knows C"),
    ("Knows C", "Knows C++"),
    ("Blood type: A+", "Blood type: A-"),
    ("Blood type: A-", "Blood type: A"),
    ("Temperature must stay below -18 C", "Temperature must stay below 18 C"),
    ("A1C must stay <7%", "A1C must stay >7%"),
    ("A1C must stay <7%", "A1C must stay 7"),
    ("Systolic \u2264 120", "Systolic \u2265 120"),
    ("Budget is 5%", "Budget is 5"),
    ("Price: $900", "Price: \u20ac900"),
    ("Passport renewed: \u2713", "Passport renewed: \u2717"),
    ("Account balance is -$50", "Account balance is $50"),
]
# the same statement: case, spacing, punctuation (and a sign written another way)
SAME = [
    ("Knows C++", "knows  c++."),
    ("Blood type: A+", "BLOOD TYPE a+!"),
    ("Temperature must stay below -18 C", "temperature must stay below -18 c."),
    ("Systolic \u2264 120", "systolic <= 120"),
    ("Passport renewed: \u2713", "passport renewed \u2713"),
]


def rec(rid: str, content: str, actor: str = "u-1") -> MemoryRecord:
    return MemoryRecord(
        id=rid,
        actor_id=actor,
        namespace=f"/users/{actor}/facts",
        memory_type=MemoryType.semantic,
        content=content,
        owner="team-a",
        created_at=NOW - timedelta(days=5),
        provenance=Provenance(),
    )


@pytest.fixture()
def store(home: Path) -> SqliteStore:
    home.mkdir(parents=True, exist_ok=True)
    return SqliteStore(home / "memlife.db")


@pytest.mark.parametrize(("erased", "other"), DIFFERENT)
def test_erasing_one_text_never_plans_a_different_fact(
    store: SqliteStore, erased: str, other: str
) -> None:
    store.put_many([rec("m-a", erased), rec("m-b", other)])
    assert plan_erasure(store, "u-1", ids=["m-a"]).why == {"m-a": "ERASURE_REQUEST"}
    assert not text_keys(rec("x", erased)) & text_keys(rec("y", other))


@pytest.mark.parametrize(("erased", "other"), SAME)
def test_an_erasure_still_takes_every_live_copy_of_the_same_statement(
    store: SqliteStore, erased: str, other: str
) -> None:
    store.put_many([rec("m-a", erased), rec("m-b", other), rec("m-c", "Lives in Lisbon")])
    why = plan_erasure(store, "u-1", ids=["m-a"]).why
    assert why == {"m-a": "ERASURE_REQUEST", "m-b": "SAME_CONTENT"}


def test_erase_keeps_the_other_fact_and_its_tombstone_refuses_only_the_erased_text(
    store: SqliteStore,
) -> None:
    store.put_many([rec("m-cpp", "Knows C++"), rec("m-c", "Knows C"), rec("m-a", "Blood type: A+")])
    out = erase(store, "u-1", ids=["m-cpp"], now=NOW)
    assert out["status"] == "success" and out["erased"] == ["m-cpp"]
    assert store.get("m-c") is not None and store.get("m-a") is not None
    got = insert_new(store, [rec("n-1", "knows c++."), rec("n-2", "Knows C#")])
    assert [(f.id, f.code) for f in got.failed] == [("n-1", "ERASED_CONTENT")]
    assert got.succeeded == ["n-2"]


def _sha(folded: str) -> str:
    return hashlib.sha256(folded.encode()).hexdigest()


def test_a_tombstone_written_at_version_3_still_refuses_what_it_refused(
    store: SqliteStore,
) -> None:
    """Counter-check: the older keys still refuse (the store checks a new text under them)."""
    store.connection.execute(
        "INSERT INTO tombstones VALUES (?, ?, ?, ?, ?)",
        ("u-1", "m-v3", "0" * 64, _sha("knows c"), "2026-01-01"),
    )
    got = insert_new(
        store, [rec("n-1", "Knows C++"), rec("n-2", "Knows C"), rec("n-3", "Knows Go")]
    )
    assert sorted((f.id, f.code) for f in got.failed) == [
        ("n-1", "ERASED_CONTENT"),
        ("n-2", "ERASED_CONTENT"),
    ]
    assert got.succeeded == ["n-3"]
