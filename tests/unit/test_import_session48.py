"""Session 48 (audit 48d): the import path (memlife import) attacked through the real CLI and store.

A record imported as superseded must point to an active record of its own actor and
namespace once the whole file is in (importer docstring: "a replacement further down the
file counts"); with ``--update`` the file's updates are part of the file too.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import memlife.importer as importer
from memlife.cli import app
from memlife.demo import generate
from memlife.importer import ImportReport, ImportWorkerError, import_file
from memlife.model import Status, parse_record_line
from memlife.stores.sqlite import SqliteStore, record_to_row
from tests.support.records import good
from tests.unit.test_guards_session36b import PATH_IDS, PATHS, run_import, write
from tests.unit.test_import_export import write_jsonl

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def _import(src: Path, db: Path, *extra: str) -> dict:
    res = CliRunner().invoke(
        app, ["import", str(src), "--store", f"sqlite:///{db}", "--json", *extra]
    )
    return json.loads(res.stdout)


def _superseded(rid: str, by: str) -> str:
    d = good(rid, status="superseded")
    d["provenance"] = {**d["provenance"], "replaced_by": by}
    return json.dumps(d)


def _links(db: Path) -> dict[str, tuple[Status, str | None]]:
    with SqliteStore(db) as store:
        found = store.get_many(["m-x", "m-y"])
        return {i: (r.status, r.provenance.replaced_by) for i, r in found.items()}


def test_a_link_to_a_record_the_same_update_file_supersedes_is_reported(
    home: Path, tmp_path: Path
) -> None:
    """The adversary imports, with --update, a new record m-y superseded by m-x and, further
    down, an update turning m-x superseded by m-r. After the import m-y's replacement is
    not active: REPLACEMENT_NOT_ACTIVE must be reported, as for a plain import."""
    db = tmp_path / "s.db"
    _import(write_jsonl(tmp_path / "seed.jsonl", [json.dumps(good(i)) for i in ("m-x", "m-r")]), db)
    src = write_jsonl(tmp_path / "u.jsonl", [_superseded("m-y", "m-x"), _superseded("m-x", "m-r")])
    out = _import(src, db, "--update")
    assert out["imported"] == 1 and out["updated"] == 1
    assert _links(db) == {"m-y": (Status.superseded, "m-x"), "m-x": (Status.superseded, "m-r")}
    assert [(w["line"], w["id"], w["code"]) for w in out["warnings"]] == [
        (1, "m-y", "REPLACEMENT_NOT_ACTIVE")
    ]


def test_a_link_to_a_record_the_same_update_file_makes_active_is_not_reported(
    home: Path, tmp_path: Path
) -> None:
    """The reverse: m-x is stored superseded; the --update file brings m-y superseded by
    m-x and, further down, m-x active again. After the import the link holds, so no
    REPLACEMENT_NOT_ACTIVE may be reported (a false warning sends an operator hunting)."""
    db = tmp_path / "s.db"
    _import(
        write_jsonl(tmp_path / "seed.jsonl", [_superseded("m-x", "m-r"), json.dumps(good("m-r"))]),
        db,
    )
    src = write_jsonl(tmp_path / "u.jsonl", [_superseded("m-y", "m-x"), json.dumps(good("m-x"))])
    out = _import(src, db, "--update")
    assert out["imported"] == 1 and out["updated"] == 1
    assert _links(db) == {"m-y": (Status.superseded, "m-x"), "m-x": (Status.active, None)}
    assert out["warnings"] == []


@pytest.mark.parametrize("kw", PATHS, ids=PATH_IDS)
def test_a_repeated_future_line_is_warned_once_for_the_line_that_is_kept(
    home: Path, tmp_path: Path, kw: dict[str, Any]
) -> None:
    """The adversary repeats a line dated 2099 three times. The first line is imported and
    warned FUTURE_CREATED_AT; the repeats are skipped as DUPLICATE_ID and nothing else
    (a warning says "imported, but worth a look": a skipped line is not imported). The
    same on every path, the worker processes' included."""
    line = json.dumps(good("m-2099", created_at="2099-01-01T00:00:00Z"))
    src = write(tmp_path / "f.jsonl", [line, json.dumps(good("m-ok")), line, line])
    rep, ids = run_import(tmp_path / "s.db", src, now=NOW, **kw)
    assert ids == {"m-2099", "m-ok"} and rep.imported == 2
    assert rep.warnings == [
        {"line": 1, "id": "m-2099", "field": "created_at", "code": "FUTURE_CREATED_AT"}
    ]
    assert [(c["line"], c["code"], c["first_line"]) for c in rep.conflicts] == [
        (3, "DUPLICATE_ID", 1),
        (4, "DUPLICATE_ID", 1),
    ]


def test_a_file_replaced_under_the_import_is_never_read_by_the_workers(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The adversary replaces the file by rename (as ``memlife export -o`` writes its
    output) after the importing process opened it and before the workers open it by
    name. The import may stop, but every row stored must be one of the lines the
    importing process read, and no line it read may be named malformed: the workers must
    never parse another file's bytes at this file's offsets."""
    monkeypatch.setattr(importer, "BLOCK_BYTES", 4096)
    src = tmp_path / "in.jsonl"
    old = [r.to_json() for r in generate(80, seed=6, anchor=NOW)]
    src.write_text("".join(line + "\n" for line in old))
    newer = tmp_path / "newer.jsonl"
    newer.write_text("".join(r.to_json() + "\n" for r in generate(90, seed=7, anchor=NOW)))
    real = importer.import_in_turns

    def replaced_first(*a: Any, **kw: Any) -> Any:
        os.replace(newer, src)  # the importing process holds the old file open
        return real(*a, **kw)

    monkeypatch.setattr(importer, "import_in_turns", replaced_first)
    expected = {row[0]: row for row in (record_to_row(parse_record_line(x)) for x in old)}
    with SqliteStore(tmp_path / "s.db") as store:
        try:
            rep: ImportReport | None = import_file(store, src, now=NOW, workers=1)
        except ImportWorkerError:
            rep = None  # stopped: then what is stored must still be the old file's
        stored = store.connection.execute("SELECT * FROM records").fetchall()
    assert rep is None or rep.invalid == []
    assert all(expected.get(row[0]) == row for row in stored)


@pytest.mark.skipif(not Path("/dev/stdin").exists(), reason="no /dev/stdin here")
def test_a_file_given_as_dev_stdin_imports_with_workers(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``memlife import /dev/stdin < backup.jsonl``: the workers are started with a pipe as
    their own stdin, so reopening the name "/dev/stdin" gives them that pipe, not the file
    (a file of 16 MiB or more takes workers by default). The import must store the file's
    records as the in-process import does, not stop with "not seekable" on every rerun."""
    src = tmp_path / "in.jsonl"
    records = list(generate(40, seed=5, anchor=NOW))
    src.write_text("".join(r.to_json() + "\n" for r in records))
    saved = os.dup(0)
    try:
        with src.open("rb") as fh, SqliteStore(tmp_path / "s.db") as store:
            os.dup2(fh.fileno(), 0)  # the shell's "< in.jsonl"
            rep = import_file(store, Path("/dev/stdin"), now=NOW, workers=1)
            stored = store.connection.execute("SELECT * FROM records ORDER BY id").fetchall()
    finally:
        os.dup2(saved, 0)
        os.close(saved)
    assert rep.ok and rep.imported == len(records)
    assert stored == sorted(record_to_row(r) for r in records)


@pytest.mark.parametrize("kw", PATHS, ids=PATH_IDS)
def test_a_future_line_that_is_skipped_is_not_warned_as_imported(
    home: Path, tmp_path: Path, kw: dict[str, Any]
) -> None:
    """The adversary dates a line 2099 and gives it the id of another actor's stored
    record. The line is skipped (a conflict; nothing is overwritten); the report must not
    also warn FUTURE_CREATED_AT, which says "imported, but worth a look"."""
    db = tmp_path / "s.db"
    other = good("m-1", actor_id="u-2", namespace="/users/u-2/preferences")
    with SqliteStore(db) as store:
        store.put_many([parse_record_line(json.dumps(other))])
    line = json.dumps(good("m-1", created_at="2099-01-01T00:00:00Z"))
    rep, ids = run_import(db, write(tmp_path / "f.jsonl", [line]), now=NOW, **kw)
    assert rep.imported == rep.updated == 0 and len(rep.conflicts) == 1
    assert rep.warnings == []


@pytest.mark.parametrize("kw", PATHS, ids=PATH_IDS)
def test_an_actor_or_id_that_prints_as_another_is_refused(
    home: Path, tmp_path: Path, kw: dict[str, Any]
) -> None:
    """The adversary imports records under "jos\\u00e9" and under "jose\\u0301": two actor
    ids that print identically. Accepted, an erasure asked for the person "josé" (as
    typed) erases one and leaves the other's address, receipted a success. Like an
    invisible character (text.invisible_at), a key that is not in NFC must be refused by
    line and field, on every path; the rest of the file is imported."""
    ns = "/users/jose/facts"
    lines = [
        json.dumps(good("m-1", actor_id="jos\u00e9", namespace=ns)),
        json.dumps(good("m-2", actor_id="jose\u0301", namespace=ns)),
        json.dumps(good("cafe\u0301", namespace=ns)),
    ]
    rep, ids = run_import(tmp_path / "s.db", write(tmp_path / "f.jsonl", lines), now=NOW, **kw)
    assert ids == {"m-1"}
    assert {(e.line, e.record_id, e.field) for e in rep.invalid} == {
        (2, "m-2", "actor_id"),
        (3, None, "id"),
    }
