"""The receipts dataset is evidence too (session 26 review): `receipts history` and the
dataset's SQL views read `dataset/operations/.../run_id=R/part-*.parquet`, and nothing
checked those files. One file added beside the run's own (allowed by a create-only
bucket) dropped a real delete from a record's history and put a delete of a held record
in it, while `receipts verify` said "verified". Now each seal names its file (digest in
the sealed receipt), `history` reads the named file, and `verify` names every other one."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from memlife.audit import FileSink
from memlife.evidence import receipt_digest
from memlife.journal import open_journal
from memlife.receipts_history import record_history
from memlife.review import verify_run
from memlife.stores.sqlite import SqliteStore
from tests.support.evidence import copied_run, sealed_nightly_run


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return sealed_nightly_run(tmp_path_factory.mktemp("pristine"))


@pytest.fixture()
def ev(pristine: dict, tmp_path: Path) -> dict:
    run = copied_run(pristine, tmp_path / "c")
    receipts = run["root"] / "receipts"
    (part,) = receipts.glob(f"dataset/operations/date=*/run_id={run['run_id']}/part-0.parquet")
    return run | {"sink": FileSink(receipts), "part": part}


def problems(ev: dict) -> tuple[set[str], set[str]]:
    """Problem codes of `verify --evidence-only`, then of the full verify."""
    store = SqliteStore(ev["root"] / "memlife.db")
    try:
        out = tuple(
            {
                p["code"]
                for p in verify_run(
                    ev["sink"],
                    None if only else store,
                    None if only else open_journal(store),
                    ev["run_id"],
                    evidence_only=only,
                ).problems
            }  # fmt: skip
            for only in (True, False)
        )
    finally:
        store.close()
    return out[0], out[1]


def deleted_record(ev: dict) -> str:
    rows = pq.read_table(ev["part"]).to_pylist()
    return next(r["record_id"] for r in rows if r["action"] == "delete")


def forged_part(ev: dict, name: str = "part-001.parquet") -> Path:
    """The review's attack: the run's file again, without the real delete and with a delete
    of a record that was never deleted, written as a new file beside it."""
    table = pq.read_table(ev["part"])
    gone = deleted_record(ev)
    fake = table.filter(pc.equal(table["record_id"], gone)).to_pylist()[0]
    fake.update(record_id="m-never-deleted", operation_id="op-" + "f" * 32)
    kept = table.filter(pc.not_equal(table["record_id"], gone))
    forged = pa.concat_tables([kept, pa.Table.from_pylist([fake], schema=table.schema)])
    path = ev["part"].with_name(name)
    pq.write_table(forged, path)
    return path


def test_the_receipt_names_and_seals_its_dataset_file(ev: dict) -> None:
    evidence = json.loads(ev["receipt"].read_text())["evidence"]
    assert evidence["dataset_key"].endswith(f"run_id={ev['run_id']}/part-0.parquet")
    assert problems(ev) == (set(), set())


def test_a_file_added_beside_the_runs_own_is_named_and_not_read(ev: dict) -> None:
    gone = deleted_record(ev)
    before = [(r["action"], r["outcome"]) for r in record_history(ev["sink"], gone)]
    assert before and before[0][0] == "delete"
    forged_part(ev)
    for found in problems(ev):
        assert "DATASET_NOT_SEALED" in found, found
    # history reads the file the receipt sealed, not the greatest name
    assert [(r["action"], r["outcome"]) for r in record_history(ev["sink"], gone)] == before
    assert record_history(ev["sink"], "m-never-deleted") == []


def test_the_sealed_file_edited_or_deleted_is_named(ev: dict) -> None:
    forged = forged_part(ev, "forged.tmp")
    forged.replace(ev["part"])  # the same name, other bytes
    for found in problems(ev):
        assert "DATASET_DIGEST_MISMATCH" in found, found
    ev["part"].unlink()
    for found in problems(ev):
        assert "DATASET_PART_MISSING" in found, found


def as_sealed_before_session_26(ev: dict) -> None:
    """The receipt as a run sealed before receipts named their dataset file (digest
    recomputed, so only the dataset checks can tell)."""
    doc = json.loads(ev["receipt"].read_text())
    for k in ("dataset_key", "dataset_sha256"):
        doc["evidence"].pop(k)
    doc.pop("digest")
    doc["digest"] = receipt_digest(doc)
    ev["receipt"].write_text(json.dumps(doc))


def test_an_older_runs_files_are_checked_by_what_they_say(ev: dict) -> None:
    as_sealed_before_session_26(ev)
    assert problems(ev) == (set(), set())  # its own file says what its Parquet says
    forged = forged_part(ev)
    for found in problems(ev):
        assert "DATASET_MISMATCH" in found, found
    # a copy of the run's own result as a later file says nothing new: not a problem
    forged.write_bytes(ev["part"].read_bytes())
    assert problems(ev) == (set(), set())


def test_a_file_under_another_days_folder_is_no_runs_evidence(ev: dict) -> None:
    """The second review: the same forged file under another date's folder for the real
    run (`date=<the day before>/run_id=<run>/part-0.parquet`); verify lists only the run's
    own day, and history read it as the run's. A run's files lie under its cutoff day, as
    its run folder does: history reads nothing else."""
    forged = forged_part(ev, "forged.tmp")
    day = ev["part"].parent.parent.name  # date=YYYY-MM-DD
    other = ev["part"].parent.parent.with_name("date=1999-01-01") / ev["part"].parent.name
    other.mkdir(parents=True)
    forged.replace(other / "part-0.parquet")
    assert day != other.parent.name
    assert record_history(ev["sink"], "m-never-deleted") == []
