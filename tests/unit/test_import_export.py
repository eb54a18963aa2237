"""`memlife import` / `memlife export`: per-line errors, idempotent import, lossless round trip."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlife.cli import app
from memlife.demo import generate
from memlife.model import parse_record_line
from memlife.stores.sqlite import SqliteStore
from tests.support.records import good

ANCHOR = datetime(2026, 11, 1, tzinfo=UTC)


def _drop(d: dict, key: str) -> dict:
    d = dict(d)
    d.pop(key)
    return d


# line number -> (text, expected id, expected field); None = valid
LINES: list[tuple[str, str | None, str | None]] = [
    (json.dumps(good("m-1")), None, None),
    (json.dumps(_drop(good("m-x"), "id")), None, "id"),
    (json.dumps(good("m-2", memory_type="semantik")), "m-2", "memory_type"),
    (json.dumps(good("m-3")), None, None),
    (json.dumps(good("m-4", confidence=7)), "m-4", "confidence"),
    (json.dumps(good("m-5", created_at="2026-01-02 10:00:00")), "m-5", "created_at"),
    (json.dumps(good("m-6", expires_at="next week")), "m-6", "expires_at"),
    (json.dumps(good("m-7", status="archived")), "m-7", "status"),
    (json.dumps(good("m-8", access_count=[1])), "m-8", "access_count"),
    (json.dumps(good("m-9", content="")), "m-9", "content"),
    ('{"id": "m-10", "actor_id": "u-1",', None, "<json>"),
    (
        json.dumps(good("m-11", retention_class="legal_hold", expires_at="2026-02-01T00:00:00Z")),
        None,
        None,
    ),
]


@pytest.fixture()
def runner() -> CliRunner:
    return CliRunner()


def write_jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def export_text(runner: CliRunner, store: str) -> str:
    res = runner.invoke(app, ["export", "--store", store])
    assert res.exit_code == 0, res.output
    return res.stdout


def test_import_reports_each_invalid_line(home: Path, tmp_path: Path, runner: CliRunner) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [t for t, _, _ in LINES])
    store = f"sqlite:///{tmp_path / 'a.db'}"
    res = runner.invoke(app, ["import", str(src), "--store", store, "--json"])
    assert res.exit_code == 1, res.output
    out = json.loads(res.stdout)
    expected_invalid = [
        {"line": n, "id": rid, "field": field}
        for n, (_, rid, field) in enumerate(LINES, start=1)
        if field is not None
    ]
    assert [{k: e[k] for k in ("line", "id", "field")} for e in out["invalid"]] == expected_invalid
    assert all(e["reason"] for e in out["invalid"])
    valid_ids = {json.loads(t)["id"] for t, _, f in LINES if f is None}
    assert out["imported"] == len(valid_ids)
    db = SqliteStore(tmp_path / "a.db")
    try:
        assert {r.id for r in db.iter_all()} == valid_ids
    finally:
        db.close()


def test_import_human_output_names_line_id_field(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [t for t, _, _ in LINES])
    res = runner.invoke(app, ["import", str(src), "--store", f"sqlite:///{tmp_path / 'b.db'}"])
    assert res.exit_code == 1
    err = " ".join(res.stderr.split())  # rich may wrap long lines
    for n, (_, rid, field) in enumerate(LINES, start=1):
        if field is None:
            continue
        assert f"line {n}:" in err
        assert f"'{field}'" in err
        if rid:
            assert f"record {rid}" in err
    assert "imported 3 records, 9 invalid lines" in err


def test_import_all_valid_exits_zero_and_is_idempotent(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    lines = [json.dumps(good(f"m-{i}")) for i in range(5)] + ["", "   "]  # blank lines are skipped
    src = write_jsonl(tmp_path / "in.jsonl", lines)
    store = f"sqlite:///{tmp_path / 'c.db'}"
    first = runner.invoke(app, ["import", str(src), "--store", store, "--json"])
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["imported"] == 5
    assert json.loads(first.stdout)["invalid"] == []
    before = export_text(runner, store)
    again = runner.invoke(app, ["import", str(src), "--store", store, "--json"])
    assert again.exit_code == 0
    after = export_text(runner, store)
    assert after == before
    assert len(after.splitlines()) == 5


def test_export_round_trip_of_the_contract(home: Path, tmp_path: Path, runner: CliRunner) -> None:
    records = list(generate(600, seed=11, anchor=ANCHOR))
    src_lines = [r.to_json() for r in records]
    src = write_jsonl(tmp_path / "demo.jsonl", src_lines)
    s1, s2 = f"sqlite:///{tmp_path / 'one.db'}", f"sqlite:///{tmp_path / 'two.db'}"
    assert runner.invoke(app, ["import", str(src), "--store", s1]).exit_code == 0
    exported = tmp_path / "out.jsonl"
    res = runner.invoke(app, ["export", "--store", s1, "-o", str(exported)])
    assert res.exit_code == 0, res.output
    out_lines = exported.read_text().splitlines()
    # every exported line is a valid contract record, equal to what went in
    original = {r.id: r for r in (parse_record_line(t) for t in src_lines)}
    back = {r.id: r for r in (parse_record_line(t, n) for n, t in enumerate(out_lines, 1))}
    assert back == original
    assert {json.loads(t)["id"]: json.loads(t) for t in out_lines} == {
        json.loads(t)["id"]: json.loads(t) for t in src_lines
    }
    # second hop: import the export elsewhere, export again: byte-identical
    assert runner.invoke(app, ["import", str(exported), "--store", s2]).exit_code == 0
    assert export_text(runner, s2) == exported.read_text()


def test_export_contains_every_contract_field(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [json.dumps(good("m-1"))])
    store = f"sqlite:///{tmp_path / 'd.db'}"
    runner.invoke(app, ["import", str(src), "--store", store])
    (line,) = export_text(runner, store).splitlines()
    obj = json.loads(line)
    assert set(good("m-1")) <= set(obj)
    assert obj["created_at"].endswith(("Z", "+00:00"))


def test_import_missing_file(home: Path, tmp_path: Path, runner: CliRunner) -> None:
    res = runner.invoke(app, ["import", str(tmp_path / "nope.jsonl")])
    assert res.exit_code != 0


def test_import_reports_a_non_utf8_line(home: Path, tmp_path: Path, runner: CliRunner) -> None:
    bad = (
        json.dumps(good("m-1", content="caf\u00e9"), ensure_ascii=False)
        .encode("utf-8")
        .replace(b"\xc3\xa9", b"\xe9")
    )
    src = tmp_path / "latin1.jsonl"
    src.write_bytes(bad + b"\n" + json.dumps(good("m-2")).encode() + b"\n")
    res = runner.invoke(
        app, ["import", str(src), "--store", f"sqlite:///{tmp_path / 'e.db'}", "--json"]
    )
    assert res.exit_code == 1
    out = json.loads(res.stdout)
    assert out["imported"] == 1
    assert [e["line"] for e in out["invalid"]] == [1]


def test_report_keeps_file_order_across_batches(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches are parsed on one thread and written on another, and repeated ids are found
    through an on-disk table: across batch boundaries the report is still in file order,
    the first line of an id still wins, and a repeat is named with that first line."""
    import memlife.importer as importer

    monkeypatch.setattr(importer, "BATCH", 2)
    monkeypatch.setattr(importer, "ROWS_BATCH", 2)  # the SQLite row path's
    store = SqliteStore(tmp_path / "s.db")
    store.put_many([parse_record_line(json.dumps(good("m-x", content="Stored first.")))])
    ids = ["m-a", "m-x", "m-a", "m-c", "m-b", "m-b", "m-a"]
    src = write_jsonl(
        tmp_path / "in.jsonl",
        [json.dumps(good(i, content=f"Line {n} about {i}.")) for n, i in enumerate(ids, 1)],
    )
    rep = importer.import_file(store, src, now=datetime(2026, 6, 1, tzinfo=UTC))
    assert rep.imported == 3
    assert rep.conflicts == [
        {"line": 2, "id": "m-x", "code": "ID_EXISTS"},
        {"line": 3, "id": "m-a", "code": "DUPLICATE_ID", "first_line": 1},
        {"line": 6, "id": "m-b", "code": "DUPLICATE_ID", "first_line": 5},
        {"line": 7, "id": "m-a", "code": "DUPLICATE_ID", "first_line": 1},
    ]
    got = store.get("m-a")
    assert got is not None and got.content == "Line 1 about m-a."
    store.close()


# -- a store's erasures move with it (session 11) ------------------------------------------


def _erased_store(runner: CliRunner, tmp_path: Path, store: str) -> None:
    """m-1 erased (a tombstone); m-2 held, its erasure deferred (a pending erasure)."""
    lines = [
        json.dumps(good("m-1", content="Was treated for depression in 2025.")),
        json.dumps(good("m-2", content="Owes 500 EUR to Bob.", retention_class="legal_hold")),
        json.dumps(good("m-3", content="Likes jazz.")),
    ]
    assert runner.invoke(app, ["import", str(write_jsonl(tmp_path / "a.jsonl", lines)),
                               "--store", store]).exit_code == 0  # fmt: skip
    for rid in ("m-1", "m-2"):
        res = runner.invoke(
            app, ["erase", "--actor", "u-1", "--id", rid, "--yes", "--store", store]
        )
        assert res.exit_code == 0, res.output


def test_a_migrated_store_keeps_its_erasures(home: Path, tmp_path: Path, runner: CliRunner) -> None:
    """Export carried records only: the new store took the erased text back and a release
    there erased nothing. With --erasures, both hold; the file holds no content."""
    old, new = f"sqlite:///{tmp_path / 'old.db'}", f"sqlite:///{tmp_path / 'new.db'}"
    _erased_store(runner, tmp_path, old)
    res = runner.invoke(app, ["export", "--store", old, "-o", str(tmp_path / "r.jsonl")])
    assert res.exit_code == 0 and "2 erasures" in res.output and "--erasures" in res.output
    res = runner.invoke(app, ["export", "--store", old, "-o", str(tmp_path / "r.jsonl"),
                              "--erasures", str(tmp_path / "e.jsonl")])  # fmt: skip
    assert res.exit_code == 0, res.output
    carried = (tmp_path / "e.jsonl").read_text()
    assert "depression" not in carried and "Bob" not in carried
    res = runner.invoke(app, ["import", str(tmp_path / "r.jsonl"), "--store", new,
                              "--erasures", str(tmp_path / "e.jsonl"), "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["erasures"]["carried"] == ["m-2"]
    # the erased text is refused in the new store, as in the old one
    again = write_jsonl(
        tmp_path / "b.jsonl",
        [json.dumps(good("m-9", content="Was treated for depression in 2025."))],
    )
    res = runner.invoke(app, ["import", str(again), "--store", new, "--json"])
    assert res.exit_code == 1 and json.loads(res.stdout)["conflicts"][0]["code"] == "ERASED_CONTENT"
    # releasing the hold in the new store applies the erasure asked for in the old one
    res = runner.invoke(app, ["hold", "release", "--id", "m-2", "--store", new, "--json"])
    assert res.exit_code == 0, res.output
    with SqliteStore(tmp_path / "new.db") as s:
        assert s.get("m-2") is None and s.get("m-3") is not None


def test_a_bad_erasures_file_is_refused_by_line_and_field_before_anything_is_imported(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    bad = tmp_path / "e.jsonl"
    bad.write_text(
        '{"kind": "tombstone", "actor_id": "u-1", "record_id": "m-1", "content_sha256": "'
        + "a" * 64
        + '"}\n{"kind": "tombstone", "actor_id": "u-1", "record_id": "m-2", '
        '"content_sha256": "not-a-hash"}\n'
    )
    src = write_jsonl(tmp_path / "r.jsonl", [json.dumps(good("m-3"))])
    store = f"sqlite:///{tmp_path / 'new.db'}"
    res = runner.invoke(app, ["import", str(src), "--store", store, "--erasures", str(bad)])
    assert res.exit_code == 2 and "line 2" in res.output and "content_sha256" in res.output
    assert not (tmp_path / "new.db").exists() or SqliteStore(tmp_path / "new.db").get("m-3") is None


def test_an_erasures_file_that_does_not_belong_to_the_records_is_refused(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    """Review of session 11: a tombstone of a live record's text was taken silently; the
    next release of any hold of that actor then erased the record, asked by nobody."""
    from memlife.model import content_sha256

    live = good("m-1", content="Likes jazz.")
    src = write_jsonl(tmp_path / "r.jsonl", [json.dumps(live)])
    bad = tmp_path / "e.jsonl"
    bad.write_text(json.dumps({"kind": "tombstone", "actor_id": live["actor_id"], "record_id": "m-0",
                               "content_sha256": content_sha256("Likes jazz.")}) + "\n")  # fmt: skip
    store = f"sqlite:///{tmp_path / 'new.db'}"
    res = runner.invoke(app, ["import", str(src), "--store", store, "--erasures", str(bad)])
    assert res.exit_code == 2 and "m-1" in res.output and "not this store's erasures" in res.output
    with SqliteStore(tmp_path / "new.db") as s:
        assert s.tombstones() == [] and s.get("m-1") is not None
