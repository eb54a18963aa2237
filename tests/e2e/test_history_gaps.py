"""`receipts history` on evidence with gaps (session 29 compliance review): a run's sealed
dataset file rewritten (a delete of a record that is still active added, reason codes
changed) was printed as fact, and a file moved away or a receipt removed made history say
"no operation on X", which a reviewer reads as "never deleted", while the sealed receipt
and the operation receipts still proved the delete. History now reads a run's file only
when it matches its seal, names every run whose evidence it could not read, and exits 1."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from memlife.audit import FileSink
from memlife.cli import app
from memlife.receipts_history import record_history
from tests.e2e.test_dataset_tamper import deleted_record, pristine  # noqa: F401 (a fixture)
from tests.support.evidence import copied_run

runner = CliRunner()


@pytest.fixture()
def ev(pristine: dict, tmp_path: Path) -> dict:  # noqa: F811 (pristine: the tamper tests')
    run = copied_run(pristine, tmp_path / "c")
    receipts = run["root"] / "receipts"
    (part,) = receipts.glob(f"dataset/operations/date=*/run_id={run['run_id']}/part-0.parquet")
    return run | {"sink": FileSink(receipts), "part": part, "receipts": receipts}


def _history(ev: dict, record_id: str) -> tuple[list, list]:
    gaps: list = []
    return record_history(ev["sink"], record_id, problems=gaps), gaps


def test_intact_evidence_has_no_gaps(ev: dict) -> None:
    rows, gaps = _history(ev, deleted_record(ev))
    assert rows and gaps == []


def test_a_sealed_file_rewritten_in_place_is_not_read(ev: dict) -> None:
    gone = deleted_record(ev)
    table = pq.read_table(ev["part"])
    fake = table.filter(pc.equal(table["record_id"], gone)).to_pylist()[0]
    fake.update(record_id="m-still-active", operation_id="op-" + "f" * 32)
    pq.write_table(pa.concat_tables([table, pa.Table.from_pylist([fake], schema=table.schema)]),
                   ev["part"])  # fmt: skip
    rows, gaps = _history(ev, "m-still-active")
    assert rows == []  # the forged delete is not shown as fact
    assert [(g["code"], g["run_id"]) for g in gaps] == [("DATASET_DIGEST_MISMATCH", ev["run_id"])]
    res = runner.invoke(app, ["receipts", "history", "m-still-active", "--receipts",
                              f"file://{ev['receipts']}"])  # fmt: skip
    assert res.exit_code == 1 and "DATASET_DIGEST_MISMATCH" in res.output


@pytest.mark.parametrize("gap", ["file moved away", "folder removed", "receipt removed"])
def test_missing_evidence_is_named_not_read_as_no_operation(ev: dict, gap: str) -> None:
    gone = deleted_record(ev)
    if gap == "file moved away":
        ev["part"].rename(ev["part"].with_name("elsewhere.bin"))
        code = "DATASET_PART_MISSING"
    elif gap == "folder removed":
        shutil.rmtree(ev["part"].parent)
        code = "DATASET_PART_MISSING"
    else:
        (receipt,) = ev["receipts"].glob(f"runs/*/*/*/{ev['run_id']}/receipt.json")
        receipt.unlink()
        code = "DATASET_NOT_SEALED"
    rows, gaps = _history(ev, gone)
    assert rows == [] and [(g["code"], g["run_id"]) for g in gaps] == [(code, ev["run_id"])]
    res = runner.invoke(app, ["receipts", "history", gone, "--receipts",
                              f"file://{ev['receipts']}"])  # fmt: skip
    assert res.exit_code == 1
    assert code in res.output and "evidence not read" in res.output
