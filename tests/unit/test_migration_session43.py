"""Audit 43c (session 43): a store moved or restored with `memlife export` / `memlife import`,
attacked as an operator uses it (an older backup beside today's erasures, `--update` lines, an access
history written by another tool)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from memlife.cli import app
from memlife.stores.sqlite import SqliteStore
from tests.support.records import good
from tests.unit.test_import_export import write_jsonl

SECRET = "Was treated for depression in 2025."


@pytest.fixture()
def runner() -> CliRunner:
    return CliRunner()


def _ok(runner: CliRunner, *args: str) -> None:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, res.output


def test_an_older_backup_with_todays_erasures_does_not_bring_the_erased_text_back(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    """The operator restores last week's backup into a new store with the erasures the
    store holds today (`export --erasures`). m-1 was erased since the backup: its text
    must not be active in the new store, whatever the command then reports."""
    old, new = f"sqlite:///{tmp_path / 'old.db'}", f"sqlite:///{tmp_path / 'new.db'}"
    seed = write_jsonl(
        tmp_path / "seed.jsonl",
        [json.dumps(good("m-1", content=SECRET)), json.dumps(good("m-2", content="Likes jazz."))],
    )
    _ok(runner, "import", str(seed), "--store", old)
    _ok(runner, "export", "--store", old, "-o", str(tmp_path / "backup.jsonl"))
    _ok(runner, "erase", "--actor", "u-1", "--id", "m-1", "--yes", "--store", old)
    _ok(runner, "export", "--store", old, "-o", str(tmp_path / "now.jsonl"),
        "--erasures", str(tmp_path / "erasures.jsonl"))  # fmt: skip
    runner.invoke(app, ["import", str(tmp_path / "backup.jsonl"), "--store", new,
                        "--erasures", str(tmp_path / "erasures.jsonl")])  # fmt: skip
    with SqliteStore(tmp_path / "new.db") as s:
        assert [r.id for r in s.iter_all() if r.content == SECRET] == []
        assert s.get("m-2") is not None


def test_an_update_to_superseded_by_nothing_is_reported_as_an_insert_is(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    """A plain import of a superseded line whose replacement is missing is warned
    REPLACEMENT_NOT_ACTIVE; the same line given with --update over an existing record
    must be warned the same way (invariant 3 is the file's to keep, and it is told)."""
    db = tmp_path / "s.db"
    _ok(runner, "import", str(write_jsonl(tmp_path / "a.jsonl", [json.dumps(good("m-1"))])),
        "--store", f"sqlite:///{db}")  # fmt: skip
    line = good("m-1", status="superseded")
    line["provenance"] = {**line["provenance"], "replaced_by": "r-typo"}
    src = write_jsonl(tmp_path / "u.jsonl", [json.dumps(line)])
    res = runner.invoke(app, ["import", str(src), "--store", f"sqlite:///{db}", "--update",
                              "--json"])  # fmt: skip
    out = json.loads(res.stdout)
    assert out["updated"] == 1
    with SqliteStore(db) as s:
        got = s.get("m-1")
    assert got is not None and got.provenance.replaced_by == "r-typo"
    assert [(w["line"], w["id"], w["code"]) for w in out["warnings"]] == [
        (1, "m-1", "REPLACEMENT_NOT_ACTIVE")
    ]


def test_an_access_file_with_integer_times_is_refused_by_column(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    """A ledger file written by another tool with accessed_at as epoch seconds (int64):
    the reads must not be dropped silently as 'of records not in this store'; the file is
    refused naming the column, before any record is imported."""
    store = f"sqlite:///{tmp_path / 'new.db'}"
    src = write_jsonl(tmp_path / "r.jsonl", [json.dumps(good("m-1"))])
    reads = tmp_path / "reads.parquet"
    pq.write_table(
        pa.table({
            "actor_id": ["u-1"], "namespace": ["/users/u-1/preferences"], "record_id": ["m-1"],
            "accessed_at": pa.array([1_767_225_600], pa.int64()),  # 2026-01-01, in seconds
            "rank": pa.array([1], pa.int32()), "query_sha256": [None],
        }),
        reads,
    )  # fmt: skip
    res = runner.invoke(app, ["import", str(src), "--store", store, "--access", str(reads)])
    assert res.exit_code == 2 and "accessed_at" in res.output, res.output
    assert not (tmp_path / "new.db").exists() or SqliteStore(tmp_path / "new.db").get("m-1") is None


def test_an_access_file_of_another_layout_is_read_by_column_name(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    """An access history written by another tool: the columns in another order, the
    hive ``date`` column a dataset read adds, ids dictionary-encoded or large strings,
    times in milliseconds. Each read is taken by its column name and type, once."""
    from datetime import UTC, datetime

    from memlife.ledger import AccessLedger, query_sha256

    src = write_jsonl(tmp_path / "r.jsonl", [json.dumps(good("m-1"))])
    reads = tmp_path / "reads.parquet"
    at = pa.array([datetime(2026, 1, 3, h, tzinfo=UTC) for h in (1, 2)], pa.timestamp("ms", "UTC"))
    pq.write_table(
        pa.table({
            "date": ["2026-01-03"] * 2, "query_sha256": [query_sha256("tea?")] * 2,
            "rank": pa.array([1, 2], pa.int64()), "accessed_at": at,
            "record_id": pa.array(["m-1"] * 2, pa.large_string()),
            "namespace": ["/users/u-1/preferences"] * 2,
            "actor_id": pa.array(["u-1"] * 2).dictionary_encode(),
        }),
        reads,
    )  # fmt: skip
    res = runner.invoke(app, ["import", str(src), "--access", str(reads), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["access"]["rows"] == 2
    stats = AccessLedger(home / "ledger").actor_stats()
    assert {rid: s.count for (_, rid), s in stats.items()} == {"m-1": 2}


@pytest.mark.parametrize("workers", [0, 1], ids=["rows", "turns"])
def test_a_line_of_exactly_the_bound_ending_where_a_read_ends_is_stored(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """importer.line_spans' ``len(buf) > max_bytes``: a line of exactly ``max_line_bytes``
    whose newline is not yet read when a block read ends (the file's blocks fall where
    they fall) is a valid line, stored, on the row path and the workers' path alike; the
    line one byte longer after it is still refused."""
    from tests.unit.test_guards_session36b import _line_of, run_import, write

    bound = 700
    monkeypatch.setattr("memlife.importer.BLOCK_BYTES", bound)  # a read ends before "\n"
    lines = [_line_of("m-at", bound), _line_of("m-over", bound + 1), json.dumps(good("m-ok"))]
    src = write(tmp_path / "b.jsonl", lines)
    rep, ids = run_import(tmp_path / "s.db", src, max_line_bytes=bound, workers=workers)
    assert [(e.line, e.field) for e in rep.invalid] == [(2, "<line>")]
    assert ids == {"m-at", "m-ok"}
