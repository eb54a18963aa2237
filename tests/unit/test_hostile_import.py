"""Issue 12, cases 4, 5 and 7: import never changes a record silently; one bad line never
sinks a file; malformed namespaces never enter. Each test failed on the code before."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlife.cli import app
from memlife.importer import import_file, json_depth
from memlife.journal import OpKind, open_journal
from memlife.model import RetentionClass, Status
from memlife.stores.sqlite import SqliteStore
from tests.support.records import good
from tests.unit.test_import_export import write_jsonl


def _import(runner: CliRunner, src: Path, db: Path, *extra: str) -> tuple[int, dict]:
    res = runner.invoke(app, ["import", str(src), "--store", f"sqlite:///{db}", "--json", *extra])
    return res.exit_code, json.loads(res.stdout)


@pytest.fixture()
def held_store(home: Path, tmp_path: Path) -> Path:
    db = tmp_path / "s.db"
    src = write_jsonl(
        tmp_path / "seed.jsonl",
        [
            json.dumps(
                good(
                    "m-held",
                    actor_id="u-1",
                    content="Held statement.",
                    retention_class="legal_hold",
                )
            ),
            json.dumps(good("m-plain", content="Plain statement.")),
        ],
    )
    code, _ = _import(CliRunner(), src, db)
    assert code == 0
    return db


def test_existing_id_of_another_actor_is_a_conflict_not_an_overwrite(
    held_store: Path, tmp_path: Path
) -> None:
    runner = CliRunner()
    src = write_jsonl(
        tmp_path / "attack.jsonl",
        [
            json.dumps(
                good(
                    "m-held",
                    actor_id="u-2",
                    namespace="/users/u-2/preferences",
                    content="Attacker text.",
                )
            )
        ],
    )
    for extra in ((), ("--update",), ("--update", "--allow-held")):
        code, out = _import(runner, src, held_store, *extra)
        assert code == 1
        assert out["imported"] == 0 and out["updated"] == 0
        assert out["conflicts"][0]["id"] == "m-held"
        assert out["conflicts"][0]["code"] in ("ID_EXISTS", "ACTOR_MISMATCH")
    with SqliteStore(held_store) as s:
        r = s.get("m-held")
    assert r is not None and r.actor_id == "u-1" and r.content == "Held statement."
    assert r.retention_class is RetentionClass.legal_hold


def test_update_needs_the_flag_skips_held_and_is_receipted(
    held_store: Path, tmp_path: Path, home: Path
) -> None:
    runner = CliRunner()
    src = write_jsonl(
        tmp_path / "upd.jsonl",
        [
            json.dumps(good("m-held", content="Changed held.", retention_class="standard")),
            json.dumps(good("m-plain", content="Changed plain.")),
        ],
    )
    code, out = _import(runner, src, held_store)
    assert code == 1 and {c["code"] for c in out["conflicts"]} == {"ID_EXISTS"}
    code, out = _import(runner, src, held_store, "--update")
    assert out["updated"] == 1
    assert [(c["id"], c["code"]) for c in out["conflicts"]] == [("m-held", "HELD")]
    with SqliteStore(held_store) as s:
        assert s.get("m-held").content == "Held statement."
        assert s.get("m-plain").content == "Changed plain."
        ops = [o for o in open_journal(s).for_record("m-plain") if o.kind is OpKind.update]
    assert len(ops) == 1 and ops[0].run_id == out["update_run"]["run_id"]
    receipt = out["update_run"]["receipt"]
    assert receipt and Path(receipt.removeprefix("file://")).exists()
    again = write_jsonl(tmp_path / "again.jsonl", [json.dumps(good("m-plain", content="Again."))])
    text = runner.invoke(app, ["import", str(again), "--store", f"sqlite:///{held_store}",
                               "--update"])  # fmt: skip
    # the text output names its run and receipt, as every writer's does
    assert "run manual-" in text.stderr and "receipt: " in text.stderr, text.stderr
    src = write_jsonl(tmp_path / "upd2.jsonl", [
        json.dumps(good("m-held", content="Changed held.", retention_class="standard")),
        json.dumps(good("m-plain", content="Again.")),
    ])  # fmt: skip
    code, out = _import(runner, src, held_store, "--update", "--allow-held")
    assert out["updated"] == 1  # m-held now; m-plain is unchanged
    with SqliteStore(held_store) as s:
        assert s.get("m-held").content == "Changed held."


def test_duplicate_ids_in_one_file_are_reported_and_the_first_wins(
    home: Path, tmp_path: Path
) -> None:
    src = write_jsonl(
        tmp_path / "dup.jsonl",
        [
            json.dumps(good("m-1", content="First.")),
            json.dumps(good("m-2")),
            json.dumps(good("m-1", content="Second.")),
        ],
    )
    code, out = _import(CliRunner(), src, tmp_path / "d.db")
    assert code == 1 and out["imported"] == 2
    assert out["conflicts"] == [{"line": 3, "id": "m-1", "code": "DUPLICATE_ID", "first_line": 1}]
    with SqliteStore(tmp_path / "d.db") as s:
        assert s.get("m-1").content == "First."


@pytest.mark.parametrize("rows_path", [True, False])
def test_a_key_written_twice_is_an_error_naming_it_on_every_path(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows_path: bool
) -> None:
    """JSON parsers keep the last of two equal keys: a second retention_class once dropped
    a legal hold silently, a second content replaced the fact; an escaped spelling of the
    key is the same key."""
    monkeypatch.setattr("memlife.importer.ROWS_PATH", rows_path)
    held = json.dumps(good("m-held", retention_class="legal_hold"))
    lines = [
        json.dumps(good("m-ok1")),
        held[:-1] + ', "retention_class": "standard"}',
        held.replace("m-held", "m-esc")[:-1] + ', "retention\\u005fclass": "standard"}',
        json.dumps(good("m-fact"))[:-1] + ', "content": "Likes jazz."}',
        json.dumps(good("m-prov")).replace('"replaced_by": null', '"replaced_by": null, "replaced_by": "m-ok1"'),
        json.dumps(good("m-quoted", content='She said "status" and "status" again.')),
        json.dumps(good("m-ok2")),
    ]  # fmt: skip
    assert '"replaced_by": null, "replaced_by"' in lines[4]
    src = write_jsonl(tmp_path / "dup.jsonl", lines)
    code, out = _import(CliRunner(), src, tmp_path / "k.db")
    assert code == 1 and out["imported"] == 3
    assert {(e["line"], e["id"], e["field"]) for e in out["invalid"]} == {
        (2, "m-held", "retention_class"),
        (3, "m-esc", "retention_class"),
        (4, "m-fact", "content"),
        (5, "m-prov", "replaced_by"),
    }
    with SqliteStore(tmp_path / "k.db") as s:
        assert s.get("m-quoted").content == 'She said "status" and "status" again.'
        assert s.get("m-held") is None and s.get("m-fact") is None


@pytest.mark.parametrize("rows_path", [True, False])
def test_sub_microsecond_times_are_refused_not_cut(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows_path: bool
) -> None:
    monkeypatch.setattr("memlife.importer.ROWS_PATH", rows_path)
    lines = [
        json.dumps(good("m-7", created_at="2026-01-02T10:00:00.9999999Z")),
        json.dumps(good("m-6", created_at="2026-01-02T10:00:00.999999Z")),
    ]
    code, out = _import(CliRunner(), write_jsonl(tmp_path / "t.jsonl", lines), tmp_path / "t.db")
    assert out["imported"] == 1
    assert [(e["id"], e["field"]) for e in out["invalid"]] == [("m-7", "created_at")]


@pytest.mark.parametrize("rows_path", [True, False])
def test_a_superseded_line_whose_replacement_is_missing_or_foreign_is_reported(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows_path: bool
) -> None:
    """Invariants 3 and 8 at the door: replaced_by must name an active record of the same
    actor and namespace, here or in the store (a replacement later in the file counts)."""
    monkeypatch.setattr("memlife.importer.ROWS_PATH", rows_path)

    def superseded(rid: str, by: str) -> str:
        d = good(rid, status="superseded")
        d["provenance"] = {**d["provenance"], "replaced_by": by}
        return json.dumps(d)

    lines = [
        superseded("m-ok", "r-later"),
        superseded("m-dangling", "r-nowhere"),
        superseded("m-cross", "r-other-actor"),
        json.dumps(good("r-later")),
        json.dumps(good("r-other-actor", actor_id="u-2", namespace="/users/u-2/preferences")),
    ]
    code, out = _import(CliRunner(), write_jsonl(tmp_path / "s.jsonl", lines), tmp_path / "s.db")
    assert out["imported"] == 5 and out["invalid"] == []
    assert [(w["line"], w["id"], w["code"]) for w in out["warnings"]] == [
        (2, "m-dangling", "REPLACEMENT_NOT_ACTIVE"),
        (3, "m-cross", "REPLACEMENT_OUT_OF_SCOPE"),
    ]


def test_every_bad_line_is_reported_and_the_rest_imported(home: Path, tmp_path: Path) -> None:
    lines = [
        json.dumps(good("m-ok1")),
        _deep_text(100_000),
        json.dumps(good("m-y9999", created_at="9999-12-31T23:59:59-05:00")),
        json.dumps(good("m-acc")).replace('"access_count": 0', '"access_count": 1e30'),
        json.dumps(good("m-acc2")).replace(
            '"access_count": 0', '"access_count": ' + "1" + "0" * 30
        ),
        json.dumps(good("m-big", content="x" * (64 * 1024 + 1))),
        json.dumps(good("m-ns", namespace="/users/u1/../../compliance/facts")),
        json.dumps(good("m-ns2", namespace="/users//facts")),
        json.dumps(good("m-long", content="y" * 2000)),
        json.dumps(good("m-ok2")),
    ]
    src = write_jsonl(tmp_path / "bad.jsonl", lines)
    code, out = _import(CliRunner(), src, tmp_path / "b.db", "--max-line-bytes", "1500")
    assert code == 1
    assert out["imported"] == 2
    got = {(e["line"], e["id"], e["field"]) for e in out["invalid"]}
    assert got == {
        (2, None, "<line>"),  # 100,000 levels is also far over 1500 bytes
        (3, "m-y9999", "created_at"),
        (4, "m-acc", "access_count"),
        (5, "m-acc2", "access_count"),
        (6, None, "<line>"),
        (7, "m-ns", "namespace"),
        (8, "m-ns2", "namespace"),
        (9, None, "<line>"),
    }
    with SqliteStore(tmp_path / "b.db") as s:
        assert s.get("m-ok1") and s.get("m-ok2")


def _deep_text(depth: int) -> str:
    d = json.dumps(good("m-deep"))
    return d.replace(
        '"provenance": {', '"provenance": {"x": ' + "[" * depth + "]" * depth + ", ", 1
    )


def test_depth_and_content_bounds_within_the_line_limit(home: Path, tmp_path: Path) -> None:
    lines = [
        _deep_text(100_000),
        _deep_text(5),
        json.dumps(good("m-big", content="é" * 40_000)),  # 80,000 bytes of UTF-8
        json.dumps(good("m-ok")),
    ]
    src = write_jsonl(tmp_path / "d.jsonl", lines)
    code, out = _import(CliRunner(), src, tmp_path / "c.db")
    assert out["imported"] == 1
    got = {(e["line"], e["id"], e["field"]) for e in out["invalid"]}
    assert got == {(1, None, "<json>"), (2, "m-deep", "provenance.x"), (3, "m-big", "content")}


def test_json_depth_ignores_brackets_in_strings() -> None:
    assert json_depth(b'{"a": "[[[[{{{{", "b": [1, {"c": 2}]}') == 3
    assert json_depth(b'{"a": "\\"[[[["}') == 1


def test_future_created_at_is_reported(home: Path, tmp_path: Path) -> None:
    src = write_jsonl(
        tmp_path / "f.jsonl", [json.dumps(good("m-2099", created_at="2099-01-01T00:00:00Z"))]
    )
    with SqliteStore(tmp_path / "f.db") as s:
        rep = import_file(s, src)
    assert rep.imported == 1
    assert rep.warnings == [
        {"line": 1, "id": "m-2099", "field": "created_at", "code": "FUTURE_CREATED_AT"}
    ]


def test_status_retained_counts_as_held_for_update(home: Path, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with SqliteStore(db) as s:
        src = write_jsonl(tmp_path / "a.jsonl", [json.dumps(good("m-r", status="retained"))])
        assert import_file(s, src).imported == 1
        src = write_jsonl(tmp_path / "b.jsonl", [json.dumps(good("m-r", content="New."))])
        rep = import_file(s, src, update=True)
        assert [c["code"] for c in rep.conflicts] == ["HELD"]
        assert s.get("m-r").status is Status.retained


@pytest.mark.parametrize("workers", [0, 1])
def test_a_declared_content_sha256_of_another_content_is_refused(
    home: Path, tmp_path: Path, workers: int
) -> None:
    """The pipeline trusts provenance.content_sha256 (consolidation memo, derived digests,
    tombstones): a line declaring another content's hash would alias that content."""
    other = hashlib.sha256(b"Victim statement.").hexdigest()
    own = hashlib.sha256(b"Honest statement.").hexdigest()
    lines = [
        json.dumps(good("m-alias", content="Attacker text.", provenance={"content_sha256": other})),
        json.dumps(
            good("m-upper", content="Honest statement.", provenance={"content_sha256": own.upper()})
        ),
        json.dumps(good("m-own", content="Honest statement.", provenance={"content_sha256": own})),
        json.dumps(good("m-blank", content="Blank hash.", provenance={"content_sha256": ""})),
    ]
    src = write_jsonl(tmp_path / "a.jsonl", lines)
    with SqliteStore(tmp_path / "a.db") as s:
        rep = import_file(s, src, workers=workers)
        stored = dict(s.connection.execute("SELECT id, content_sha256 FROM records").fetchall())
    got = [(e.line, e.record_id, e.field) for e in rep.invalid]
    assert got == [
        (1, "m-alias", "provenance.content_sha256"),
        (2, "m-upper", "provenance.content_sha256"),
    ]
    assert stored == {
        "m-own": own,
        "m-blank": hashlib.sha256(b"Blank hash.").hexdigest(),
    }
