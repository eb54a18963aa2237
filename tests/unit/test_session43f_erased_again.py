"""Audit 43f (session 43): an older backup restored with today's erasures (`import --erasures`), where
the backup still holds the erased record under a legal hold placed (and released) before
its erasure. The record is deferred, not erased: the report must not say it was erased."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from memlife.cli import app
from memlife.stores.sqlite import SqliteStore
from tests.support.records import good
from tests.unit.test_import_export import write_jsonl

SECRET = "Was treated for depression in 2025."


def _ok(runner: CliRunner, *args: str) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


def test_a_held_record_of_an_older_backup_is_not_reported_erased_again(
    home: Path, tmp_path: Path
) -> None:
    """The backup was taken while m-1 was held; the hold was released and m-1 erased since.
    Restored with today's erasures, m-1 comes back held, so its erasure is deferred. The
    import's report (`erased_again`, the CLI's "erased record(s) erased again") must name
    only records actually gone from the new store."""
    runner = CliRunner()
    old, new = f"sqlite:///{tmp_path / 'old.db'}", f"sqlite:///{tmp_path / 'new.db'}"
    seed = write_jsonl(
        tmp_path / "seed.jsonl",
        [json.dumps(good("m-1", content=SECRET)), json.dumps(good("m-2", content="Likes jazz."))],
    )
    _ok(runner, "import", str(seed), "--store", old)
    _ok(runner, "hold", "place", "--id", "m-1", "--store", old)
    _ok(runner, "export", "--store", old, "-o", str(tmp_path / "backup.jsonl"))
    _ok(runner, "hold", "release", "--id", "m-1", "--store", old)
    _ok(runner, "erase", "--actor", "u-1", "--id", "m-1", "--yes", "--store", old)
    _ok(runner, "export", "--store", old, "-o", str(tmp_path / "now.jsonl"),
        "--erasures", str(tmp_path / "erasures.jsonl"))  # fmt: skip
    out = json.loads(_ok(runner, "import", str(tmp_path / "backup.jsonl"), "--store", new,
                         "--erasures", str(tmp_path / "erasures.jsonl"), "--json"))  # fmt: skip
    with SqliteStore(tmp_path / "new.db") as s:
        still_here = {r.id for r in s.iter_all()}
    reported = set(out["erasures"].get("erased_again", []))
    assert not reported & still_here, (reported, still_here)
