"""`receipts verify RUN --store OTHER` (session 28 review): two stores in one home share the
receipts, and verifying one store's run against the other reported
`PARQUET_OP_NOT_IN_JOURNAL`, `RECEIPT_WITHOUT_JOURNALED_CHANGE` and
`DELETED_RECORD_PRESENT` with no word of why. The run's manifest names its store (nightly
and manual runs), and verify says so beside its findings (`OTHER_STORE`), never instead of
them: a store moved since and tampered with is still reported in full."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from memlife.cli import app
from memlife.model import MemoryRecord
from memlife.stores.sqlite import SqliteStore
from tests.support.records import good

runner = CliRunner()


def _store(tmp_path: Path, name: str, ids: tuple[str, ...]) -> str:
    url = f"sqlite:///{tmp_path / name}"
    src = tmp_path / f"{name}.jsonl"
    src.write_text("".join(json.dumps(good(r, content=f"Likes drink {r}.")) + "\n" for r in ids))
    res = runner.invoke(app, ["import", str(src), "--store", url])
    assert res.exit_code == 0, res.output
    return url


def _verify(run_id: str, store: str) -> tuple[int, dict]:
    res = runner.invoke(app, ["receipts", "verify", run_id, "--store", store, "--json"])
    return res.exit_code, json.loads(res.stdout)


def test_a_run_verified_against_another_store_is_named_so_not_as_tampering(
    home: Path, tmp_path: Path
) -> None:
    a = _store(tmp_path, "a.db", ("m-1", "m-2"))
    b = _store(tmp_path, "b.db", ("m-1", "m-2"))  # the same ids: the worst case
    expired = tmp_path / "x.jsonl"  # a hard-expired record: the night deletes it
    expired.write_text(json.dumps(good("m-old", expires_at="2026-01-03T00:00:00Z")) + "\n")
    assert runner.invoke(app, ["import", str(expired), "--store", a]).exit_code == 0
    res = runner.invoke(app, ["erase", "--actor", "u-1", "--id", "m-1", "--store", a, "--yes",
                              "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    manual = json.loads(res.stdout)["run_id"]
    res = runner.invoke(app, ["run", "--engine", "local", "--store", a, "--json"])
    assert res.exit_code == 0, res.output
    night = json.loads(res.stdout)["run_id"]

    for run_id in (manual, night):
        code, out = _verify(run_id, a)
        assert code == 0 and out["ok"], out
        code, out = _verify(run_id, b)
        # b holds none of the run's journal and still holds m-1: findings, and why
        assert code == 1 and out["problems"], out
        (note,) = [n for n in out["notes"] if n["code"] == "OTHER_STORE"]
        assert note["run_store"].endswith("a.db") and note["store"].endswith("b.db")
    with SqliteStore(tmp_path / "b.db") as store:
        assert store.get("m-1") is not None  # b untouched, and not reported as tampered


def test_a_store_moved_since_its_run_is_still_verified_in_full(home: Path, tmp_path: Path) -> None:
    """The identity is the file's path: a store moved (or restored from a backup) keeps its
    journal, so its runs are checked as ever, tampering included."""
    a = _store(tmp_path, "a.db", ("m-1", "m-2"))
    res = runner.invoke(app, ["erase", "--actor", "u-1", "--id", "m-1", "--store", a, "--yes",
                              "--json"])  # fmt: skip
    run_id = json.loads(res.stdout)["run_id"]
    moved = tmp_path / "moved"
    moved.mkdir()
    (tmp_path / "a.db").rename(moved / "a.db")
    code, out = _verify(run_id, f"sqlite:///{moved / 'a.db'}")
    assert code == 0 and out["ok"] and not out["notes"], out  # its journal came with it
    with SqliteStore(moved / "a.db") as store:  # the erased record written back
        store.put_many([MemoryRecord.model_validate(good("m-1", content="Likes drink m-1."))])
    code, out = _verify(run_id, f"sqlite:///{moved / 'a.db'}")
    assert code == 1 and "DELETED_RECORD_PRESENT" in {p["code"] for p in out["problems"]}, out
    with SqliteStore(moved / "a.db") as store:  # and the run's journal rows deleted: still found
        store.connection.execute("DELETE FROM operations WHERE run_id = ?", (run_id,))
        store.connection.commit()
    code, out = _verify(run_id, f"sqlite:///{moved / 'a.db'}")
    codes = {p["code"] for p in out["problems"]}
    assert code == 1 and {"DELETED_RECORD_PRESENT", "PARQUET_OP_NOT_IN_JOURNAL"} <= codes, out
    assert [n["code"] for n in out["notes"]] == ["OTHER_STORE"]  # said, beside the findings


def test_the_text_output_names_the_other_store_before_its_findings(
    home: Path, tmp_path: Path
) -> None:
    """Session 29 walk-through: the terminal listed every journal finding first and the one
    line that explains them (OTHER_STORE) last, below the fold of a long run."""
    a = _store(tmp_path, "a.db", ("m-1", "m-2"))
    b = _store(tmp_path, "b.db", ("m-1", "m-2"))
    res = runner.invoke(app, ["erase", "--actor", "u-1", "--id", "m-1", "--store", a, "--yes",
                              "--json"])  # fmt: skip
    run_id = json.loads(res.stdout)["run_id"]
    res = runner.invoke(app, ["receipts", "verify", run_id, "--store", b], env={"COLUMNS": "400"})
    assert res.exit_code == 1
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    assert lines[0].startswith("OTHER_STORE") and "--store" in lines[0], lines
    assert len(lines) > 2 and sum("OTHER_STORE" in ln for ln in lines) == 1, lines
