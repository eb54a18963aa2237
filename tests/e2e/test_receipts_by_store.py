"""Receipts of stores sharing one receipts location (session 29; listed under "Left" since
session 24): `receipts list` showed both stores' runs with nothing to tell them apart, and
`receipts history ID` merged the operations of every record that ever had the id (another
store's, another actor's) into one history, which a compliance reviewer reads as one
record's. Runs and history rows now say whose they are, and `--for-store`/`--actor` keep one."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from memlife.cli import app
from tests.support.records import good

runner = CliRunner()


def _night_deleting(tmp_path: Path, name: str, actor: str) -> tuple[str, str]:
    """A store holding one hard-expired record `m-old` of ``actor``, and the night's run id
    (which deletes it)."""
    url = f"sqlite:///{tmp_path / name}"
    src = tmp_path / f"{name}.jsonl"
    rows = [good("m-old", actor_id=actor, expires_at="2026-01-03T00:00:00Z"),
            good("m-keep", actor_id=actor, content=f"Likes tea in {name}.")]  # fmt: skip
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert runner.invoke(app, ["import", str(src), "--store", url]).exit_code == 0
    res = runner.invoke(app, ["run", "--engine", "local", "--store", url, "--json"])
    assert res.exit_code == 0, res.output
    return url, json.loads(res.stdout)["run_id"]


def test_runs_and_a_records_history_name_their_store_and_actor(home: Path, tmp_path: Path) -> None:
    a, run_a = _night_deleting(tmp_path, "a.db", "u-1")
    b, run_b = _night_deleting(tmp_path, "b.db", "u-2")
    assert run_a != run_b

    res = runner.invoke(app, ["receipts", "list", "--json"])
    listed = {r["run_id"]: r["store"] for r in json.loads(res.stdout)}
    assert listed[run_a].endswith("a.db") and listed[run_b].endswith("b.db")
    res = runner.invoke(app, ["receipts", "list"], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "store" in res.stdout and "b.db" in res.stdout
    res = runner.invoke(app, ["receipts", "list", "--for-store", a, "--json"])
    assert [r["run_id"] for r in json.loads(res.stdout)] == [run_a]

    # one id, two records (two stores, two actors): one history each, never merged unnamed
    res = runner.invoke(app, ["receipts", "history", "m-old", "--json"])
    rows = json.loads(res.stdout)
    assert {(r["actor_id"], r["store"].rsplit("/", 1)[1]) for r in rows} == {
        ("u-1", "a.db"), ("u-2", "b.db")}  # fmt: skip
    res = runner.invoke(app, ["receipts", "history", "m-old"], env={"COLUMNS": "250"})
    assert res.exit_code == 0 and "u-1" in res.stdout and "u-2" in res.stdout
    assert "2 records" in res.stderr and "--for-store" in res.stderr
    for flags, actor in ((["--for-store", b], "u-2"), (["--actor", "u-1"], "u-1")):
        res = runner.invoke(app, ["receipts", "history", "m-old", *flags, "--json"])
        rows = json.loads(res.stdout)
        assert rows and {r["actor_id"] for r in rows} == {actor}, flags
    res = runner.invoke(app, ["receipts", "history", "m-old", "--actor", "u-9"])
    assert res.exit_code == 1 and "no operation on m-old" in res.output


def test_for_store_names_itself_when_it_is_no_store_url(home: Path) -> None:
    res = runner.invoke(app, ["receipts", "list", "--for-store", "postgres://x"])
    assert res.exit_code == 2 and "--for-store 'postgres://x'" in res.output
