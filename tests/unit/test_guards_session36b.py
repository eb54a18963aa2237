"""Session 36b mutation audit of the import path (import_parse, import_lines,
import_columnar, import_turns, import_write, import_links, import_removed, import_table,
import_ingest, importer): each test attacks one guard a mutant showed untested. Real SQLite
stores in tmp_path, through ``import_file`` or the CLI; no mocks of memlife logic."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memlife.import_lines import json_depth
from memlife.importer import ImportReport, import_file
from memlife.journal import Operation, OpKind, OpState, Outcome, open_journal
from memlife.model import parse_record_line
from memlife.policy import load_policy
from memlife.stores.sqlite import SqliteStore
from tests.support.records import good

# the three ways a SQLite import runs: the row path in this process, worker processes in
# turn, and --update (the record path, parse_line)
PATHS = [{"workers": 0}, {"workers": 1}, {"update": True}]
PATH_IDS = ["rows", "turns", "update"]


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_import(db: Path, src: Path, **kw: Any) -> tuple[ImportReport, set[str]]:
    with SqliteStore(db) as s:
        rep = import_file(s, src, **kw)
        ids = {r[0] for r in s.connection.execute("SELECT id FROM records")}
    return rep, ids


def invalid(rep: ImportReport) -> set[tuple[int | None, str | None, str]]:
    return {(e.line, e.record_id, e.field) for e in rep.invalid}


def _nested(rid: str, depth: int) -> str:
    """A record line nested ``depth`` levels deep (the object itself is one level)."""
    extra = depth - 2  # the object and provenance are two
    return json.dumps(good(rid)).replace(
        '"provenance": {', '"provenance": {"x": ' + "[" * extra + "]" * extra + ", ", 1
    )


# -- import_lines.checked_text: the nesting bound -------------------------------------------


@pytest.mark.parametrize("kw", PATHS, ids=PATH_IDS)
def test_a_line_one_level_past_the_depth_bound_is_refused_as_too_deep(
    home: Path, tmp_path: Path, kw: dict[str, Any]
) -> None:
    """checked_text's ``json_depth(raw) > max_depth`` (MAX_DEPTH = 16): a line 17 deep is a
    ``<json>`` error before it is decoded; one 16 deep is judged on its fields. Holds the
    mutant that loosens the bound (``> max_depth + 8``), and ``>=`` on the other side."""
    src = write(
        tmp_path / "deep.jsonl",
        [_nested("m-17", 17), _nested("m-16", 16), json.dumps(good("m-ok"))],
    )
    rep, ids = run_import(tmp_path / "s.db", src, **kw)
    assert invalid(rep) == {(1, None, "<json>"), (2, "m-16", "provenance.x")}
    assert "nested deeper than 16 levels" in rep.invalid[0].reason
    assert ids == {"m-ok"}


# -- the content size bound, exactly at the limit -------------------------------------------


@pytest.mark.parametrize("kw", PATHS, ids=PATH_IDS)
def test_content_one_byte_over_the_limit_is_refused_and_at_the_limit_stored(
    home: Path, tmp_path: Path, kw: dict[str, Any]
) -> None:
    """line_row's and parse_line's ``size > content_max``: a content of exactly
    ``limits.content_max_bytes`` is stored, one byte more is a ``content`` error naming
    the record. Holds the off-by-one mutants (``> content_max + 1``) of import_lines and
    importer; the columnar path sends the over-long row to line_row, which must refuse it."""
    limit = load_policy(None).limits.content_max_bytes
    src = write(
        tmp_path / "c.jsonl",
        [
            json.dumps(good("m-at", content="a" * limit)),
            json.dumps(good("m-over", content="a" * (limit + 1))),
            json.dumps(good("m-over-2", content="é" * (limit // 2) + "a")),  # limit+1 bytes
        ],
    )
    rep, ids = run_import(tmp_path / "s.db", src, **kw)
    assert invalid(rep) == {(2, "m-over", "content"), (3, "m-over-2", "content")}
    assert all(f"{limit + 1} bytes, over the limit of {limit}" in e.reason for e in rep.invalid)
    assert ids == {"m-at"}


# -- importer._apply_updates: --update never moves a record across tenants -------------------


def test_update_into_another_namespace_of_the_same_actor_is_refused_before_any_run(
    home: Path, tmp_path: Path
) -> None:
    """_apply_updates' ``old.namespace != new.namespace`` (NAMESPACE_MISMATCH): --update
    of an id stored under another namespace of the same actor is a conflict, the stored
    record keeps its namespace and content, and no manual run is started for it. Holds the
    mutant that drops the namespace check (the actor check alone let it through)."""
    db = tmp_path / "s.db"
    first = write(tmp_path / "a.jsonl", [json.dumps(good("m-1", content="Original."))])
    rep, _ = run_import(db, first)
    assert rep.imported == 1
    moved = good("m-1", namespace="/users/u-1/other", content="Moved and rewritten.")
    second = write(tmp_path / "b.jsonl", [json.dumps(moved)])
    rep, _ = run_import(db, second, update=True)
    assert rep.conflicts == [{"line": 1, "id": "m-1", "code": "NAMESPACE_MISMATCH"}]
    assert rep.updated == 0 and rep.run is None
    with SqliteStore(db) as s:
        got = s.get("m-1")
    assert got is not None
    assert (got.namespace, got.content) == ("/users/u-1/preferences", "Original.")


@pytest.mark.parametrize("held", [{"retention_class": "legal_hold"}, {"status": "retained"}])
def test_update_that_would_place_a_hold_needs_allow_held(
    home: Path, tmp_path: Path, held: dict[str, str]
) -> None:
    """_apply_updates' ``(old.held or new.held) and not allow_held``: an --update whose new
    line is held (legal_hold, or status retained) is a HELD conflict without
    ``allow_held``: a hold is neither placed nor lifted by a plain update. Holds the mutant
    that checks only the stored record (``old.held``); with ``allow_held`` it goes through."""
    db = tmp_path / "s.db"
    rep, _ = run_import(db, write(tmp_path / "a.jsonl", [json.dumps(good("m-1"))]))
    assert rep.imported == 1
    line = json.dumps(good("m-1", content="Now held.", **held))
    second = write(tmp_path / "b.jsonl", [line])
    rep, _ = run_import(db, second, update=True)
    assert rep.conflicts == [{"line": 1, "id": "m-1", "code": "HELD"}]
    assert rep.updated == 0 and rep.run is None
    with SqliteStore(db) as s:
        got = s.get("m-1")
    assert got is not None and not got.held and got.content == "Statement m-1."
    rep, _ = run_import(db, second, update=True, allow_held=True)
    assert rep.updated == 1 and not rep.conflicts
    with SqliteStore(db) as s:
        got = s.get("m-1")
    assert got is not None and got.held and got.content == "Now held."


# -- import_file + import_removed: a record brought back after a receipted removal -----------


def _removed(
    store: SqliteStore,
    run_id: str,
    line: str,
    *,
    actor_id: str | None = None,
    kind: OpKind = OpKind.delete,
    states: tuple[OpState, ...] = (OpState.APPLIED, OpState.RECEIPTED),
) -> None:
    """A removal of the line's record as a run journals it (through ``states``), and the
    row gone."""
    r = parse_record_line(line)
    op = Operation(f"op-{run_id}-{r.id}", run_id, kind, actor_id or r.actor_id, r.namespace,
                   r.id, ["REVIEWER_DELETE"], "p1", content_sha256=r.sha256)  # fmt: skip
    journal = open_journal(store)
    journal.plan([op])
    at = datetime(2026, 3, 2, tzinfo=UTC)
    for state in states:
        journal.transition(op.operation_id, state, outcome=Outcome.deleted, at=at)
    store.delete_many([r.id])


@pytest.mark.parametrize("kw", PATHS, ids=PATH_IDS)
def test_a_reimport_names_records_a_receipted_removal_took_out(
    home: Path, tmp_path: Path, kw: dict[str, Any]
) -> None:
    """import_file's ``report.warnings += brought_back(store, mark)``: re-importing a file
    brings back a record a receipted run deleted or purged; it is imported and named
    (PREVIOUSLY_DELETED, the run), on every import path. A removal journaled under another
    actor for the same id is not this record's (``o.actor_id = r.actor_id``), and one only
    planned never removed anything. Holds the mutants that drop the warnings from
    import_file, drop the actor condition, or count only deletes (``_REMOVALS``)."""
    db = tmp_path / "s.db"
    names = ["m-back", "m-purged", "m-other", "m-planned", "m-kept"]
    lines = [json.dumps(good(rid)) for rid in names]
    src = write(tmp_path / "a.jsonl", lines)
    rep, _ = run_import(db, src)
    assert rep.imported == 5 and rep.warnings == []
    with SqliteStore(db) as s:
        _removed(s, "manual-20260302-aaaa", lines[0])
        _removed(s, "20260303T030000Z-apply-bbbb", lines[1], kind=OpKind.purge)
        _removed(s, "manual-20260302-cccc", lines[2], actor_id="u-2")  # another tenant's op
        _removed(s, "manual-20260302-dddd", lines[3], states=())  # planned, never applied
    rep, ids = run_import(db, src, **kw)
    assert ids == set(names)
    assert rep.imported == 4 and rep.unchanged == 1
    assert rep.warnings == [
        {"line": None, "id": "m-back", "field": "id", "code": "PREVIOUSLY_DELETED",
         "run_id": "manual-20260302-aaaa"},
        {"line": None, "id": "m-purged", "field": "id", "code": "PREVIOUSLY_DELETED",
         "run_id": "20260303T030000Z-apply-bbbb"},
    ]  # fmt: skip


# -- import_links: a superseded line's replacement must be an active record of its tenant ----


def _superseded(rid: str, by: str, **kw: Any) -> str:
    d = good(rid, status="superseded", **kw)
    d["provenance"] = {**d["provenance"], "replaced_by": by}
    return json.dumps(d)


@pytest.mark.parametrize("kw", PATHS, ids=PATH_IDS)
def test_a_replacement_in_another_namespace_or_not_active_is_reported(
    home: Path, tmp_path: Path, kw: dict[str, Any]
) -> None:
    """_check_link's ``(target.actor_id, target.namespace) != (rec.actor_id,
    rec.namespace)`` and ``target.status is not Status.active``: a superseded line whose
    replacement is the same actor's record in another namespace, or another actor's
    record in the same namespace string, is REPLACEMENT_OUT_OF_SCOPE; one whose
    replacement exists but is quarantined is REPLACEMENT_NOT_ACTIVE. Each is imported as
    written. Holds the mutants that compare the actor alone, the namespace alone, or that
    take any existing replacement as active."""
    lines = [
        _superseded("m-ns", "r-other-ns"),
        _superseded("m-actor", "r-other-actor"),
        _superseded("m-quar", "r-quarantined"),
        _superseded("m-fine", "r-ok"),
        json.dumps(good("r-other-ns", namespace="/users/u-1/other")),
        json.dumps(good("r-other-actor", actor_id="u-2")),  # same namespace string
        json.dumps(good("r-quarantined", status="quarantined")),
        json.dumps(good("r-ok")),
    ]
    rep, ids = run_import(tmp_path / "s.db", write(tmp_path / "l.jsonl", lines), **kw)
    assert rep.imported == 8 and not rep.invalid and not rep.conflicts
    assert [(w["line"], w["id"], w["field"], w["code"]) for w in rep.warnings] == [
        (1, "m-ns", "provenance.replaced_by", "REPLACEMENT_OUT_OF_SCOPE"),
        (2, "m-actor", "provenance.replaced_by", "REPLACEMENT_OUT_OF_SCOPE"),
        (3, "m-quar", "provenance.replaced_by", "REPLACEMENT_NOT_ACTIVE"),
    ]


# -- a real bug found on clean code: json_depth is quadratic on a hostile line --------------


@pytest.mark.parametrize("kw", [PATHS[0], PATHS[2]], ids=["rows", "update"])
def test_a_hostile_line_of_escaped_quotes_is_read_in_one_pass_and_refused_as_it_is(
    home: Path, tmp_path: Path, kw: dict[str, Any]
) -> None:
    """A real bug the audit found: checked_text runs json_depth on any line with more than
    16 brackets (the fast path and the columnar path refuse this one first), and
    json_depth stripped strings with a regex that required the closing quote: on an
    unterminated string of backslash-quote pairs every quote started a scan to the end of
    the line (quadratic: 8 s for these 32 KiB, hours for a line under the 1 MiB bound),
    and the line was then refused as "nested deeper than 16 levels", which it is not. It
    is read in one pass now and refused by the parser for what it is; the lines around it
    are imported. (How long it takes is bench material; the depth it is read at is not.)"""
    hostile = b'{"id":"m-q","a":"' + b"[" * 20 + b'\\"' * 16_000 + b"}"
    assert json_depth(hostile) == 1  # the brackets are inside the string
    src = tmp_path / "q.jsonl"
    src.write_bytes(
        json.dumps(good("m-ok")).encode() + b"\n" + hostile + b"\n"
        + json.dumps(good("m-ok2")).encode() + b"\n"
    )  # fmt: skip
    rep, ids = run_import(tmp_path / "s.db", src, **kw)
    assert ids == {"m-ok", "m-ok2"}
    assert [e.line for e in rep.invalid] == [2]
    assert "nested deeper" not in rep.invalid[0].reason, rep.invalid[0].reason


# -- the line bound, exactly at the limit, inside a block the columnar path reads ------------


def _line_of(rid: str, size: int) -> str:
    """A valid record line of exactly ``size`` bytes (newline not counted)."""
    short = json.dumps(good(rid, content="x"))
    return json.dumps(good(rid, content="x" * (1 + size - len(short))))


@pytest.mark.parametrize("kw", PATHS, ids=PATH_IDS)
def test_a_line_one_byte_over_the_line_bound_is_refused_in_a_plain_block(
    home: Path, tmp_path: Path, kw: dict[str, Any]
) -> None:
    """_plain_lines' ``(np.diff(ends) - 1).max() > max_line_bytes`` (and parse_lines',
    bounded_lines' bounds): in a block of otherwise plain lines, a line of exactly
    ``max_line_bytes`` is stored and one of ``max_line_bytes + 1`` is a ``<line>`` error,
    on every path. Holds the columnar off-by-one (``> max_line_bytes + 1``), which let
    pyarrow read the over-long line and store it."""
    bound = 700
    lines = [_line_of("m-at", bound), _line_of("m-over", bound + 1), json.dumps(good("m-ok"))]
    assert [len(x.encode()) for x in lines[:2]] == [bound, bound + 1]
    src = write(tmp_path / "b.jsonl", lines)
    rep, ids = run_import(tmp_path / "s.db", src, max_line_bytes=bound, **kw)
    assert invalid(rep) == {(2, None, "<line>")}
    assert rep.invalid[0].reason == f"longer than {bound} bytes"
    assert ids == {"m-at", "m-ok"}


# -- FUTURE_CREATED_AT: a small clock skew is not the future ---------------------------------


@pytest.mark.parametrize("kw", PATHS, ids=PATH_IDS)
def test_created_at_within_the_clock_skew_is_not_reported_as_future(
    home: Path, tmp_path: Path, kw: dict[str, Any]
) -> None:
    """import_file's ``future_after = now + FUTURE_SKEW`` (5 minutes) and each path's
    ``created_at > future_after``: a line created 4 minutes after ``now`` is a clock skew,
    imported without a warning; one 6 minutes after is imported and reported
    (FUTURE_CREATED_AT, naming the field). Holds the mutants that drop the skew and that
    drop the record path's future flag."""
    now = datetime(2026, 5, 1, 12, tzinfo=UTC)
    lines = [
        json.dumps(good("m-skew", created_at="2026-05-01T12:04:00Z")),
        json.dumps(good("m-future", created_at="2026-05-01T12:06:00Z")),
    ]
    rep, ids = run_import(tmp_path / "s.db", write(tmp_path / "f.jsonl", lines), now=now, **kw)
    assert ids == {"m-skew", "m-future"} and rep.imported == 2
    assert rep.warnings == [
        {"line": 2, "id": "m-future", "field": "created_at", "code": "FUTURE_CREATED_AT"}
    ]


# -- import_columnar: an explicit null is the line path's to judge, not a default ------------


@pytest.mark.parametrize("kw", PATHS, ids=PATH_IDS)
def test_an_explicit_null_supersedes_is_a_field_error_on_every_path(
    home: Path, tmp_path: Path, kw: dict[str, Any]
) -> None:
    """_Block.check's ``absent_or_refer(... , "supersedes")``: pyarrow reads a missing and
    a null ``provenance.supersedes`` alike; the model refuses the null. A line with
    ``"supersedes": null`` in a block of plain lines is an error naming record and field,
    on every path, and the block's other lines are stored. Holds the mutant that takes the
    null as the default ``[]`` on the columnar path."""
    prov = {**good("x")["provenance"], "supersedes": None}
    lines = [json.dumps(good("m-a")), json.dumps(good("m-null", provenance=prov))]
    lines.append(json.dumps(good("m-b")))
    rep, ids = run_import(tmp_path / "s.db", write(tmp_path / "n.jsonl", lines), **kw)
    assert invalid(rep) == {(2, "m-null", "provenance.supersedes")}
    assert ids == {"m-a", "m-b"}
