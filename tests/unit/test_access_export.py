"""`memlife export --access` / `memlife import --access`: a store's access history moves with
its records, each read counted once, only the records' own reads, never query text."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from memlife.cli import app
from memlife.ledger import SCHEMA, AccessLedger, query_sha256
from memlife.stores.sqlite import SqliteStore
from tests.support.records import good

BORN = datetime(2026, 1, 2, 10, 0, tzinfo=UTC)  # good()'s created_at
QS = query_sha256("what do I drink?")


@pytest.fixture()
def runner() -> CliRunner:
    return CliRunner()


def _old_store(tmp_path: Path, home: Path, runner: CliRunner) -> tuple[str, Path]:
    """Three records in an old store, and a ledger under the old home with their reads, an
    earlier record's reads under a reused id, and another store's record's reads."""
    store = f"sqlite:///{tmp_path / 'old.db'}"
    src = tmp_path / "r.jsonl"
    src.write_text("".join(json.dumps(good(r, content=f"Likes drink {r}.")) + "\n"
                           for r in ("m-1", "m-2", "m-3")))  # fmt: skip
    res = runner.invoke(app, ["import", str(src), "--store", store])
    assert res.exit_code == 0, res.output
    with AccessLedger(home / "ledger") as ledger:
        for h in (1, 2, 3):
            ledger.append("u-1", "/users/u-1/preferences", "m-1", rank=1, query_sha256=QS,
                          at=BORN + timedelta(hours=h))  # fmt: skip
        ledger.append("u-1", "/users/u-1/preferences", "m-1", rank=2, at=BORN - timedelta(days=3))
        ledger.append("u-1", "/users/u-1/preferences", "m-2", at=BORN + timedelta(days=2))
        ledger.append("u-1", "/users/u-1/preferences", "zz-9", at=BORN + timedelta(days=2))
        ledger.append("u-2", "/users/u-2/x", "m-3", at=BORN + timedelta(days=2))  # not u-1's m-3
    return store, src


def _exported_reads(tmp_path: Path, home: Path, runner: CliRunner) -> Path:
    old, _ = _old_store(tmp_path, home, runner)
    reads = tmp_path / "reads.parquet"
    res = runner.invoke(app, ["export", "--store", old, "-o", str(tmp_path / "o.jsonl"),
                              "--access", str(reads)])  # fmt: skip
    assert res.exit_code == 0, res.output
    return reads


def _counts(ledger: AccessLedger) -> dict[str, int]:
    return {rid: t.count for (_, rid), t in ledger.actor_stats().items()}


def test_a_migrated_store_keeps_its_records_reads_each_once(
    home: Path, tmp_path: Path, runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Export carried records only, so the new store scored every record as never read.
    With --access the reads go along: the records' own (not an earlier record's under the
    id, not another actor's), once however often the file is imported; no content."""
    old, src = _old_store(tmp_path, home, runner)
    reads = tmp_path / "reads.parquet"
    res = runner.invoke(app, ["export", "--store", old, "-o", str(tmp_path / "out.jsonl"),
                              "--access", str(reads)])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "4 reads" in res.output
    assert b"Likes drink" not in reads.read_bytes()
    assert pq.read_table(reads).num_rows == 4

    new_home = tmp_path / "new-home"  # another machine
    monkeypatch.setenv("MEMLIFE_HOME", str(new_home))
    new = f"sqlite:///{tmp_path / 'new.db'}"
    args = ["import", str(tmp_path / "out.jsonl"), "--store", new, "--access", str(reads), "--json"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["access"] == {
        "rows": 4, "already": 0, "not_in_store": 0, "refused": [],
    }  # fmt: skip
    assert _counts(AccessLedger(new_home / "ledger")) == {"m-1": 3, "m-2": 1}
    res = runner.invoke(app, args)  # the same file again: records unchanged, reads not doubled
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["access"]["already"] == 4
    assert _counts(AccessLedger(new_home / "ledger")) == {"m-1": 3, "m-2": 1}


def test_reads_of_records_the_store_does_not_hold_are_not_added(
    home: Path, tmp_path: Path, runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = _exported_reads(tmp_path, home, runner)
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path / "h2"))
    only = tmp_path / "one.jsonl"
    only.write_text(json.dumps(good("m-2", content="Likes drink m-2.")) + "\n")
    res = runner.invoke(app, ["import", str(only), "--store", f"sqlite:///{tmp_path / 'n.db'}",
                              "--access", str(reads), "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["access"]["not_in_store"] == 3
    assert _counts(AccessLedger(tmp_path / "h2" / "ledger")) == {"m-2": 1}


def _rows(**over: list) -> pa.Table:
    base = {
        "actor_id": ["u-1", "u-1"],
        "namespace": ["/users/u-1/preferences"] * 2,
        "record_id": ["m-1", "m-1"],
        "accessed_at": [BORN + timedelta(hours=1), BORN + timedelta(hours=2)],
        "rank": [1, 1],
        "query_sha256": [QS, QS],
    }
    return pa.table({**base, **over})


def test_query_text_in_an_access_file_is_refused_by_row_and_field(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    """A hostile file puts a question's text where its hash belongs: the ledger never holds
    query text. That row is refused by number and field; the other is added."""
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1")) + "\n")
    bad = tmp_path / "bad.parquet"
    pq.write_table(_rows(query_sha256=[QS, "what is my bank password?"]), bad)
    res = runner.invoke(app, ["import", str(src), "--access", str(bad), "--json"])
    assert res.exit_code == 1, res.output  # a refused row is a bad line: the rest goes in
    got = json.loads(res.stdout)["access"]
    assert got["rows"] == 1 and len(got["refused"]) == 1
    assert "row 2" in got["refused"][0] and "query_sha256" in got["refused"][0]
    table = AccessLedger(home / "ledger").read()
    assert "bank password" not in str(table.to_pylist())


@pytest.mark.parametrize(
    ("table", "named"),
    [
        (_rows().drop_columns(["accessed_at"]), "accessed_at"),
        (_rows(rank=["first", "second"]), "rank"),
    ],
)
def test_an_access_file_that_is_not_ledger_rows_is_refused_before_anything_is_imported(
    home: Path, tmp_path: Path, runner: CliRunner, table: pa.Table, named: str
) -> None:
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1")) + "\n")
    bad = tmp_path / "bad.parquet"
    pq.write_table(table, bad)
    res = runner.invoke(app, ["import", str(src), "--access", str(bad)])
    assert res.exit_code == 2 and named in res.output, res.output
    db = home / "memlife.db"
    assert not db.exists() or SqliteStore(db).get("m-1") is None
    text = tmp_path / "not.parquet"
    text.write_text("actor_id,record_id\n")
    res = runner.invoke(app, ["import", str(src), "--access", str(text)])
    assert res.exit_code == 2 and "not a Parquet file" in res.output


def test_the_exported_file_has_the_ledgers_schema(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    reads = _exported_reads(tmp_path, home, runner)
    assert pq.read_schema(reads).remove_metadata().equals(SCHEMA)


def test_a_read_listed_twice_or_under_another_namespace_is_not_counted_twice(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    """Review of session 19: a file holding one read twice added it twice (the anti-join
    compared the file with the ledger only), and a row naming another actor's namespace was
    credited to this actor's record of the same id. A null namespace crashed the import
    after the records were in, naming nothing; a read stamped in the year 17036 was kept."""
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1")) + "\n")
    one = BORN + timedelta(hours=1)
    rows = _rows(
        accessed_at=[one, one, one, BORN + timedelta(hours=2), BORN + timedelta(days=9000)],
        namespace=["/users/u-1/preferences", "/users/u-1/preferences", "/users/u-2/secret",
                   None, "/users/u-1/preferences"],
        actor_id=["u-1"] * 5, record_id=["m-1"] * 5, rank=[1] * 5, query_sha256=[QS] * 5,
    )  # fmt: skip
    bad = tmp_path / "dup.parquet"
    pq.write_table(rows, bad)
    res = runner.invoke(app, ["import", str(src), "--access", str(bad), "--json"])
    assert res.exit_code == 1, res.output
    got = json.loads(res.stdout)["access"]
    assert (got["rows"], got["already"], got["not_in_store"]) == (1, 1, 1)
    assert [r.split(":")[0] for r in got["refused"]] == ["row 4", "row 5"]
    assert "required" in got["refused"][0] and "later than now" in got["refused"][1]
    assert _counts(AccessLedger(home / "ledger")) == {"m-1": 1}


def test_an_empty_store_exports_and_imports_no_reads(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    """Review of session 19: the births of an empty store had no column types and the
    join failed, after the records file was written."""
    store = f"sqlite:///{tmp_path / 'empty.db'}"
    SqliteStore(tmp_path / "empty.db").close()
    reads = tmp_path / "reads.parquet"
    res = runner.invoke(app, ["export", "--store", store, "-o", str(tmp_path / "o.jsonl"),
                              "--access", str(reads)])  # fmt: skip
    assert res.exit_code == 0 and "0 reads" in res.output, res.output
    empty = tmp_path / "e.jsonl"
    empty.write_text("")
    pq.write_table(_rows(), tmp_path / "some.parquet")
    res = runner.invoke(app, ["import", str(empty), "--store", store, "--access",
                              str(tmp_path / "some.parquet"), "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["access"]["not_in_store"] == 2


def test_agentcore_reads_under_its_own_record_ids_are_exported_under_ours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CloudTrail names AgentCore's memoryRecordId: those ledger rows were dropped by the
    export (its join knew our ids only). They are written under our record id."""
    from memlife.access_export import export_access
    from memlife.model import MemoryRecord
    from tests.fakes.agentcore import agentcore_store

    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path))
    ns = "/users/a/episodes"
    rec = MemoryRecord(id="e-1", actor_id="a", namespace=ns, memory_type="episodic",
                       content="Asked for a refund.", created_at=BORN)  # fmt: skip
    with agentcore_store() as (store, _fake):
        store.put_many([rec])
        store.page("a", ns)  # learn where the record lives
        native = store.native_ids(["e-1"])["e-1"]
        ledger = AccessLedger(tmp_path / "ledger")
        for h in (1, 2, 3):  # as CloudTrail ingest records them: by memoryRecordId
            ledger.append("a", ns, native, at=BORN + timedelta(hours=h))
        ledger.append("a", ns, "e-1", at=BORN + timedelta(hours=4))  # a recall, by our id
        ledger.flush()
        assert export_access(store, ledger, tmp_path / "reads.parquet") == 4
    assert set(pq.read_table(tmp_path / "reads.parquet")["record_id"].to_pylist()) == {"e-1"}


def test_a_store_with_records_and_no_reads_migrates_with_its_empty_access_file(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    """README's migration on a store nobody has recalled from yet (session 28 review): the
    export wrote an access file of 0 rows and the import failed on it ("Function 'invert'
    has no kernel matching input types (null)", exit 1) after the records were written."""
    old = f"sqlite:///{tmp_path / 'old.db'}"
    src = tmp_path / "r.jsonl"
    src.write_text("".join(json.dumps(good(r, content=f"Likes drink {r}.")) + "\n"
                           for r in ("m-1", "m-2")))  # fmt: skip
    assert runner.invoke(app, ["import", str(src), "--store", old]).exit_code == 0
    out, reads = tmp_path / "all.jsonl", tmp_path / "reads.parquet"
    res = runner.invoke(app, ["export", "--store", old, "-o", str(out), "--access", str(reads)])
    assert res.exit_code == 0 and "0 reads" in res.output, res.output
    assert pq.read_table(reads).num_rows == 0
    new = f"sqlite:///{tmp_path / 'new.db'}"
    res = runner.invoke(app, ["import", str(out), "--store", new, "--access", str(reads), "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["access"]["rows"] == 0 and not report["access"]["refused"], report
    with SqliteStore(tmp_path / "new.db") as store:
        assert sorted(r.id for r in store.page("u-1", "/users/u-1/preferences").records) == [
            "m-1",
            "m-2",
        ]
