"""A stored row the regression gate cannot read (a damaged file, a hand-written value) stops
its own shard, not the run: before, the gate's KeyError ended every tenant's night."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from memlife.errors import CorruptRecordError
from memlife.model import MemoryRecord
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore

NOW = datetime(2026, 11, 1, tzinfo=UTC)


def pair(actor: str, namespace: str, subject: str, says: str) -> list[MemoryRecord]:
    """Two statements on one subject: the night consolidates them."""
    return [
        MemoryRecord(id=f"{actor}-{subject}-{k}", actor_id=actor, namespace=f"/users/{actor}/{namespace}",
                     memory_type="semantic", subject=subject, content=f"Prefers {says}{'!' * k}",
                     created_at=NOW - timedelta(days=90 + k))
        for k in (0, 1)
    ]  # fmt: skip


def case(cid: str, actor: str, namespace: str | None, target: str) -> dict:
    out = {"id": cid, "kind": "custom", "query": "what does the user prefer?", "actor_id": actor,
           "must_retrieve": [target], "k": 100, "threshold": -1.0}  # fmt: skip
    return out | ({"namespace": f"/users/{actor}/{namespace}"} if namespace else {})


def test_a_row_the_gate_cannot_read_stops_its_shard_and_the_run_goes_on(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many(
            pair("u-1", "facts", "tea", "green tea")  # its retention class is damaged below
            + pair("u-1", "preferences", "music", "jazz")  # judged by a case that reads facts
            + pair("u-2", "preferences", "city", "Lisbon")  # another tenant: goes on
        )
    db = sqlite3.connect(home / "memlife.db")
    db.execute("UPDATE records SET retention_class=X'01' WHERE id='u-1-tea-1'")
    db.commit()
    db.close()
    cases = home / "cases.yaml"
    cases.write_text(yaml.safe_dump({"cases": [
        case("facts", "u-1", "facts", "u-1-tea-0"),
        case("everything", "u-1", None, "u-1-music-0"),  # every namespace of u-1: facts too
        case("other", "u-2", "preferences", "u-2-city-0"),
    ]}))  # fmt: skip

    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=str(cases)))

    assert summary.status == "partial_failure"
    assert summary.failed_shards == [{"shard": "u-1:/users/u-1/facts", "actor_id": "u-1",
                                      "namespace": "/users/u-1/facts", "code": "CORRUPT_RECORD",
                                      "record_id": "u-1-tea-1", "field": "retention_class"}]  # fmt: skip
    receipt = json.loads(Path(str(summary.receipt)).read_text())
    unread = receipt["gate"]["unreadable_cases"]
    assert {u["case"] for u in unread} == {"facts", "everything"}
    assert all(u["record_id"] == "u-1-tea-1" and u["field"] == "retention_class" for u in unread)
    db = sqlite3.connect(home / "memlife.db")
    status = dict(db.execute("SELECT id, status FROM records").fetchall())
    db.close()
    # u-2 was judged by its own case and consolidated; u-1's other namespace waits: the one
    # case that judges it could not read u-1's facts
    assert status["u-2-city-0"] == status["u-2-city-1"] == "superseded"
    assert status["u-1-music-0"] == status["u-1-music-1"] == "active"
    assert status["u-1-tea-0"] == "active"
    assert summary.other["gate_withheld_groups"] == 1


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("retention_class", b"legal_hold"),  # the right word, stored as bytes
        ("retention_class", "Legal_Hold"),
        ("status", "deleted-ish"),
        ("memory_type", "semantik"),
        ("source", 7),
        ("created_at", "last Tuesday"),
        ("expires_at", "Diagnosed with hepatitis C"),
        ("provenance", "{not json"),
        ("provenance", "[1, 2]"),
        ("provenance", '{"replaced_by": null, "stolen": 1}'),
        ("content", b"\xff\xfe"),
    ],
)
def test_a_damaged_row_is_read_as_an_error_naming_its_record_and_field(
    tmp_path: Path, column: str, value: object
) -> None:
    """Every read of a record (get, pages, exports) built it unchecked from the row: a
    damaged value was a bare KeyError or ValueError, which named nothing, or printed the
    value. Now the record and the field, never the value."""
    with SqliteStore(tmp_path / "m.db") as store:
        store.put_many(pair("u-1", "facts", "tea", "green tea"))
        store.connection.execute(f"UPDATE records SET {column}=? WHERE id='u-1-tea-1'", (value,))
        store.connection.commit()
        with pytest.raises(CorruptRecordError) as caught:
            store.get("u-1-tea-1")
        assert (caught.value.record_id, caught.value.field) == ("u-1-tea-1", column)
        assert "hepatitis" not in str(caught.value) and caught.value.__cause__ is None
        with pytest.raises(CorruptRecordError):
            list(store.iter_all())
        assert store.get("u-1-tea-0") is not None  # the others read as before


def test_provenance_missing_keys_reads_with_their_defaults(tmp_path: Path) -> None:
    """Review of session 20: provenance written without a key (a row from another tool) was
    built as it was, and the first read of the missing attribute ended the whole run."""
    with SqliteStore(tmp_path / "m.db") as store:
        store.put_many(pair("u-1", "facts", "tea", "green tea"))
        store.connection.execute("UPDATE records SET provenance='{}' WHERE id='u-1-tea-1'")
        store.connection.commit()
        got = store.get("u-1-tea-1")
        assert got is not None and got.provenance.supersedes == []
        assert got.provenance.content_sha256 is None and got.sha256  # computed, not raised


def test_a_row_only_the_after_view_reaches_withholds_what_its_case_judges(
    tmp_path: Path,
) -> None:
    """Review of session 20: the after view follows a staged replacement's sources
    (lineage) and met a damaged superseded row that no planning read; only the before
    view's unreadable cases were kept, so the case that would have blocked (R is forbidden)
    was dropped from after and nothing was held. Every view's unreadable cases count now,
    and the run withholds R."""
    from memlife.evalset import parse_cases
    from memlife.gate import evaluate_changes
    from memlife.model import Provenance, Status
    from memlife.policy import load_policy
    from memlife.run_commit import unseen_by

    def rec(rid: str, content: str, **kw: object) -> MemoryRecord:
        return MemoryRecord(id=rid, actor_id="u-1", namespace="/users/u-1/facts",
                            memory_type="semantic", subject="x", content=content,
                            created_at=NOW, **kw)  # type: ignore[arg-type]  # fmt: skip

    store = SqliteStore(tmp_path / "m.db")
    store.put_many([
        rec("X", "Used to work at a shop.", status=Status.superseded,
            provenance=Provenance(replaced_by="O1")),
        rec("O1", "Works at the bakery.", provenance=Provenance(supersedes=["X"])),
        rec("O2", "Prefers green tea."),
    ])  # fmt: skip
    store.connection.execute("UPDATE records SET content=X'fffe' WHERE id='X'")
    store.connection.commit()
    replacement = rec("R", "Prefers green tea and works at the bakery.",
                      provenance=Provenance(supersedes=["O1", "O2"]))  # fmt: skip
    cases = parse_cases([{"id": "c", "query": "which tea does the user prefer?",
                          "actor_id": "u-1", "namespace": "/users/u-1/facts", "k": 1,
                          "threshold": -1.0, "impact": "high", "forbidden": ["R"]}])  # fmt: skip
    verdict = evaluate_changes(store, cases, load_policy().gate, superseded=["O1", "O2"],
                               replacements=[replacement], groups=[("R", ["O1", "O2"])])  # fmt: skip
    assert [(u["case"], u["record_id"], u["field"]) for u in verdict["unreadable_cases"]] == [
        ("c", "X", "content")
    ]

    class Staged:  # what run_commit reads of a staged group and a batch's outcome
        replacement = rec("R", "-")
        shard = ("u-1", "/users/u-1/facts")

    class Outcome:
        staged = [Staged()]
        deletions: list = []

    held: dict[str, list[str]] = {"deletions": [], "groups": []}
    unseen_by(held, verdict["unreadable_cases"], [Outcome()])  # type: ignore[list-item]
    assert held["groups"] == ["R"]
    store.close()
