"""Guards left untested by earlier audits (session 36): each test fails when the guard it
names is loosened. Real components: the SQLite store, the CLI through typer's runner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memlife.journal import Operation, OpKind, operation_id
from memlife.journal.sqlite import SqliteJournal
from memlife.model import RetentionClass
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke


def test_an_erase_whose_record_was_held_meanwhile_exits_3_and_defers_it(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks ``status != "success" -> exit 3`` in `memlife erase` (the thirteenth audit
    left it untested). Another writer (an import with --allow-held) puts the record on
    legal hold after erase selected it and before its delete: the store refuses the
    delete, the erasure is deferred, the run is a partial failure, and a script calling
    the CLI must see exit 3, not 0 (which would read as "erased"). The record stays."""
    import memlife.erase as erase_module

    code, out, err = invoke(
        "remember", "--actor", "u1", "--subject", "case", "My cat is Tom.", "--json"
    )
    assert code == 0, err
    rid = json.loads(out)["id"]
    real = erase_module.manual_run

    def run_then_hold(*args: Any, **kwargs: Any) -> Any:
        run = real(*args, **kwargs)  # erase has selected the record: now it is held
        with SqliteStore(home / "memlife.db") as other:
            r = other.get(rid)
            assert r is not None
            other.put_many([r.model_copy(update={"retention_class": RetentionClass.legal_hold})])
        return run

    monkeypatch.setattr(erase_module, "manual_run", run_then_hold)
    code, out, err = invoke("erase", "--actor", "u1", "--id", rid, "--yes", "--json")
    assert code == 3, (code, out, err)
    result = json.loads(out)
    assert result["status"] == "partial_failure" and result["deferred"] == [rid]
    assert result["erased"] == []
    with SqliteStore(home / "memlife.db") as store:
        left = store.get(rid)
        assert left is not None and left.retention_class is RetentionClass.legal_hold


def test_an_erase_the_store_refused_is_sealed_by_the_rerun_in_the_same_process(
    home: Path,
) -> None:
    """A manual run whose caller failed part way (here the store refuses the delete: a full
    disk, a corrupt page; a trigger stands in for it) gave its lease back but stayed
    "alive" for the rest of the process. The erase run again in the same process (an
    agent, a review UI, a worker) deleted the record under the first run's operation and
    never sealed that run: `receipts verify` failed on it for good and the record's history
    showed only the rerun's `already_absent`, never the deletion. The first run is dead
    once its lease is given back: the rerun seals it, as a rerun in a new process does."""
    code, out, err = invoke(
        "remember", "--actor", "u1", "--subject", "case", "My cat is Tom.", "--json"
    )
    assert code == 0, err
    rid = json.loads(out)["id"]
    with SqliteStore(home / "memlife.db") as store:
        store.connection.execute(
            "CREATE TRIGGER refuse BEFORE DELETE ON records "
            "BEGIN SELECT RAISE(ABORT, 'the disk refused'); END"
        )
        store.connection.commit()
    code, out, err = invoke("erase", "--actor", "u1", "--id", rid, "--yes", "--json")
    assert code == 1 and "the disk refused" in err, (code, out, err)
    with SqliteStore(home / "memlife.db") as store:
        assert store.get(rid) is not None  # nothing erased, the lease given back
        assert store.connection.execute("SELECT COUNT(*) FROM leases").fetchone()[0] == 0
        store.connection.execute("DROP TRIGGER refuse")
        store.connection.commit()
    code, out, err = invoke("erase", "--actor", "u1", "--id", rid, "--yes", "--json")
    assert code == 0, (code, out, err)
    assert json.loads(out)["counts"].get("abandoned_runs_sealed") == 1, out
    code, out, err = invoke("receipts", "list", "--json")
    runs = json.loads(out)
    assert [r["status"] for r in runs] != ["incomplete", "success"], runs
    for run in runs:
        code, out, err = invoke("receipts", "verify", run["run_id"])
        assert code == 0, (run, out, err)
    code, out, err = invoke("receipts", "history", rid, "--json")
    assert code == 0, err
    assert "deleted" in [h["outcome"] for h in json.loads(out)], out


def _op(rid: str) -> Operation:
    return Operation(
        operation_id=operation_id("run-1", OpKind.delete, [rid]),
        run_id="run-1", kind=OpKind.delete, actor_id="u-1", namespace="/users/u-1/facts",
        record_id=rid, reasons=["HARD_EXPIRED"], policy_version="p1", content_sha256="ab" * 32,
    )  # fmt: skip


def test_a_plan_that_fails_part_way_journals_none_of_its_operations(tmp_path: Path) -> None:
    """The SQLite journal's ``plan`` is one transaction (the sixteenth audit left it
    unchecked): a batch whose third insert fails (the disk refuses; a trigger stands in)
    journals none of the batch, so no operation is PLANNED without the others the run
    planned with it, and the rerun plans the whole batch again. Committing instead of
    rolling back, or one transaction per insert, leaves the first two behind."""
    journal = SqliteJournal.at(tmp_path / "journal.db")
    journal.connection.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON operations WHEN NEW.record_id = 'm-3' "
        "BEGIN SELECT RAISE(ABORT, 'the disk refused'); END"
    )
    ops = [_op(f"m-{i}") for i in range(1, 5)]
    with pytest.raises(Exception, match="the disk refused"):
        journal.plan(ops)
    assert journal.by_run("run-1") == []
    journal.connection.execute("DROP TRIGGER refuse")
    planned = journal.plan(ops)
    assert sorted(o.record_id for o in planned) == ["m-1", "m-2", "m-3", "m-4"]
    assert len(journal.by_run("run-1")) == 4


# -- ids and actors a person can type, read and erase by -------------------------------------
def _line(rid: str, actor: str = "u-1") -> str:
    return json.dumps(
        {"id": rid, "actor_id": actor, "namespace": "/users/u-1/facts",
         "memory_type": "semantic", "content": f"Fact {len(rid)}.",
         "created_at": "2026-01-02T10:00:00Z"},
        ensure_ascii=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    "kw", [{"workers": 0}, {"workers": 1}, {"update": True}], ids=["rows", "turns", "update"]
)
def test_an_id_or_actor_holding_an_invisible_character_is_refused_by_name(
    tmp_path: Path, kw: dict[str, Any]
) -> None:
    """The sixteenth-b audit imported ids and actors holding control and format characters:
    an actor with a NUL cannot be named on a command line (`erase --actor`), an id with an
    ESC sequence rewrote the terminal of whoever listed it, one with a right-to-left
    override or a zero-width space reads as another. Every import path (the fast path, the
    columnar reader, the checked path) refuses such a key, naming the line and field and
    never echoing the id; the lines around them are imported, and printable ids with
    spaces or accents stay valid. The online library refused such actors already."""
    from memlife.importer import import_file

    lines = [
        _line("m-ok"),
        _line("m-\x1b[2J"),  # escaped in JSON (\u001b)
        _line("m-\u202eabc"),  # raw UTF-8: a right-to-left override
        _line("m-\u200b1"),  # a zero-width space
        _line("m-2", actor="u\u00a01"),  # a no-break space in the actor
        _line("m-3", actor="u-1\ufeff"),  # a BOM
        _line("m é 4", actor="ü-1"),
    ]
    src = tmp_path / "keys.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with SqliteStore(tmp_path / "s.db") as store:
        report = import_file(store, src, **kw)
        ids = {r[0] for r in store.connection.execute("SELECT id FROM records")}
    assert ids == {"m-ok", "m é 4"}
    refused = sorted((e.line, e.field, e.record_id) for e in report.invalid)
    assert refused == [
        (2, "id", None), (3, "id", None), (4, "id", None),
        (5, "actor_id", "m-2"), (6, "actor_id", "m-3"),
    ], refused  # fmt: skip
    assert all("invisible character" in e.reason for e in report.invalid)


@pytest.mark.parametrize(
    "kw", [{"workers": 0}, {"workers": 1}, {"update": True}], ids=["rows", "turns", "update"]
)
def test_a_lone_surrogate_is_named_by_its_field(tmp_path: Path, kw: dict[str, Any]) -> None:
    """JSON's ``\\ud800`` escape decodes to a lone surrogate, text no store or terminal can
    write. The line was refused as field ``<record>`` with the validator's "unexpected end
    of hex escape" (a reader had to find the field); it is now named (a nested one dotted),
    the id not echoed when it is the id that holds it, and the other lines imported."""
    from memlife.importer import import_file

    base = (
        '"actor_id":"u-1","namespace":"/users/u-1/facts","memory_type":"semantic",'
        '"created_at":"2026-01-02T10:00:00Z"'
    )
    lines = [
        '{"id":"m-ok","content":"Fine.",' + base + "}",
        '{"id":"m-1","content":"a\\ud800b",' + base + "}",
        '{"id":"m-\\udc00","content":"Fine too.",' + base + "}",
        '{"id":"m-2","content":"ok",' + base + ',"provenance":{"supersedes":["x\\ud83d"]}}',
    ]
    src = tmp_path / "surrogates.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with SqliteStore(tmp_path / "s.db") as store:
        report = import_file(store, src, **kw)
        ids = {r[0] for r in store.connection.execute("SELECT id FROM records")}
    assert ids == {"m-ok"}
    refused = sorted((e.line, e.field, e.record_id) for e in report.invalid)
    assert refused == [
        (2, "content", "m-1"), (3, "id", None), (4, "provenance.supersedes", "m-2"),
    ], refused  # fmt: skip
