"""Audit 44a (session 44): an older backup restored with today's erasures (`import --erasures`),
attacked where an erased id was used again and erased a second time."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from typer.testing import CliRunner

from memlife.cli import app
from memlife.stores.sqlite import SqliteStore
from tests.support.records import good
from tests.unit.test_import_export import write_jsonl

FIRST = "Was treated for depression in 2025."
SECOND = "Takes sertraline every morning."


def _ok(runner: CliRunner, *args: str) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


def test_a_backup_of_an_id_erased_twice_is_erased_again_not_refused(
    home: Path, tmp_path: Path
) -> None:
    """m-1 was erased, the actor used the id again for another text, the backup was
    taken, and m-1 was erased a second time (its tombstone is named 'm-1#<hex>'). The
    backup restored with today's erasures: the second text must not be live in the new
    store (the records are in before the erasures file is applied)."""
    runner = CliRunner()
    old, new = f"sqlite:///{tmp_path / 'old.db'}", f"sqlite:///{tmp_path / 'new.db'}"
    jazz = json.dumps(good("m-2", content="Likes jazz."))
    _ok(runner, "import", str(write_jsonl(tmp_path / "a.jsonl", [
        json.dumps(good("m-1", content=FIRST)), jazz])), "--store", old)  # fmt: skip
    _ok(runner, "erase", "--actor", "u-1", "--id", "m-1", "--yes", "--store", old)
    _ok(
        runner,
        "import",
        str(
            write_jsonl(
                tmp_path / "b.jsonl",
                [json.dumps(good("m-1", content=SECOND, created_at=datetime.now(UTC).isoformat()))],
            )
        ),
        "--store",
        old,
    )  # fmt: skip; reused after the erasure (audit 49vi)
    _ok(runner, "export", "--store", old, "-o", str(tmp_path / "backup.jsonl"))
    _ok(runner, "erase", "--actor", "u-1", "--id", "m-1", "--yes", "--store", old)
    _ok(runner, "export", "--store", old, "-o", str(tmp_path / "now.jsonl"),
        "--erasures", str(tmp_path / "erasures.jsonl"))  # fmt: skip
    res = runner.invoke(app, ["import", str(tmp_path / "backup.jsonl"), "--store", new,
                              "--erasures", str(tmp_path / "erasures.jsonl")])  # fmt: skip
    with SqliteStore(tmp_path / "new.db") as s:
        assert [r.id for r in s.iter_all() if r.content == SECOND] == [], res.output
        assert s.get("m-2") is not None


def _superseded(rid: str, content: str) -> dict:
    line = good(rid, content=content, status="superseded")
    line["provenance"] = {**line["provenance"], "replaced_by": "r-1"}
    return line


def test_a_backup_with_a_replacement_keeps_the_fact_the_erasure_kept(
    home: Path, tmp_path: Path
) -> None:
    """The backup holds r-1, a replacement of m-1 (erased since) and m-2 (kept: the
    erasure withdrew r-1 and brought m-2 back). Restored with today's erasures, the
    erased text must be gone and m-2's fact must stay, as it does in the store the
    erasures came from: nobody asked to erase it."""
    runner = CliRunner()
    old, new = f"sqlite:///{tmp_path / 'old.db'}", f"sqlite:///{tmp_path / 'new.db'}"
    merged = good("r-1", content=f"{FIRST} Likes jazz.")
    merged["provenance"] = {**merged["provenance"], "supersedes": ["m-1", "m-2"]}
    lines = [_superseded("m-1", FIRST), _superseded("m-2", "Likes jazz."), merged]
    _ok(runner, "import", str(write_jsonl(tmp_path / "a.jsonl", [json.dumps(x) for x in lines])),
        "--store", old)  # fmt: skip
    _ok(runner, "export", "--store", old, "-o", str(tmp_path / "backup.jsonl"))
    _ok(runner, "erase", "--actor", "u-1", "--id", "m-1", "--yes", "--store", old)
    _ok(runner, "export", "--store", old, "-o", str(tmp_path / "now.jsonl"),
        "--erasures", str(tmp_path / "erasures.jsonl"))  # fmt: skip
    runner.invoke(app, ["import", str(tmp_path / "backup.jsonl"), "--store", new,
                        "--erasures", str(tmp_path / "erasures.jsonl")])  # fmt: skip
    with SqliteStore(tmp_path / "old.db") as s:
        kept = {(r.id, r.status.value, r.content) for r in s.iter_all()}
    with SqliteStore(tmp_path / "new.db") as s:
        assert not [r.id for r in s.iter_all() if FIRST in r.content]
        assert {(r.id, r.status.value, r.content) for r in s.iter_all()} == kept
